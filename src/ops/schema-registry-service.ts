/**
 * The schema registry's place in a broker: served under `/schema-registry/` on the HTTP
 * listener and, when `tidelog.schema.registry.listener` is set, on a listener of its own
 * (`tidelog start` puts it on 8081, Confluent's port), the API at its root there.
 *
 * Nothing of the registry loads before its first request (docs/startup.md): the first
 * request imports src/schema-registry (and the format library its schema needs), creates
 * `_schemas` if it is missing and reads it; later requests reuse that registry.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Logger } from '../common/logger.js'
import type { RegistrySecurity } from '../schema-registry/auth.js'
import type { DecodedRecord, RegistryHost, SchemaRegistry } from '../schema-registry/index.js'
import { addRegistryPeer } from '../schema-registry/peers.js'
import { HttpListener, type HttpsOptions, type RawPrefixRoute } from './http-listener.js'

/** Where the registry answers on the broker's HTTP listener. */
export const REGISTRY_PREFIX = '/schema-registry/'

type RegistryModule = typeof import('../schema-registry/index.js')

export class SchemaRegistryService {
  private host: RegistryHost | null = null
  private security: RegistrySecurity | null = null
  /** The CAs a write forwarded to another broker's HTTPS registry trusts: this listener's. */
  private forwardCa: string | readonly string[] | null = null
  private registry: Promise<SchemaRegistry> | null = null
  private listener: HttpListener | null = null
  private closed = false
  private removePeer: (() => void) | null = null

  private constructor(private readonly logger: Logger) {}

  /**
   * `listener`: where the registry's own listener binds, parsed by the broker's config from
   * tidelog.schema.registry.listener, or null for none; `tls`: what an https:// listener
   * serves with.
   */
  static async start(
    listener: { readonly host: string; readonly port: number } | null,
    logger: Logger,
    tls: HttpsOptions | null = null,
  ): Promise<SchemaRegistryService> {
    const service = new SchemaRegistryService(logger)
    const ca = tls?.ca
    service.forwardCa = typeof ca === 'string' || Array.isArray(ca) ? (ca as string | string[]) : null
    if (listener !== null) {
      const { host, port } = listener
      service.listener = await HttpListener.start(host, port, {}, logger, service.route('/'), tls)
      logger.info({ url: service.url }, 'schema registry listener')
    }
    return service
  }

  /** The registry's own listener's URL, null without one. */
  get url(): string | null {
    if (!this.listener) return null
    const host = this.listener.host.includes(':') ? `[${this.listener.host}]` : this.listener.host
    return `${this.listener.scheme}://${host}:${this.listener.port}`
  }

  /**
   * The broker is open: requests may now open the registry. `security`, where the broker's
   * is on: every request is authenticated and authorized with it (schema-registry/auth.ts).
   */
  attach(host: RegistryHost, security: RegistrySecurity | null = null): void {
    this.host = host
    this.security = security
    // Writes sent to another broker of this process reach this registry when this one leads.
    this.removePeer = addRegistryPeer({
      host,
      open: async () => this.open(await import('../schema-registry/index.js')),
    })
  }

  /** Requests under `prefix` of an HTTP listener go to the registry. */
  route(prefix: string): RawPrefixRoute {
    return { prefix, handle: (req, res, path, query) => this.handle(req, res, path, query) }
  }

  /** Records in Confluent's wire format (base64, as the console API has them), decoded. */
  async decode(values: readonly (string | null)[]): Promise<(DecodedRecord | null)[]> {
    let registry: SchemaRegistry
    try {
      registry = await this.open(await import('../schema-registry/index.js'))
    } catch (error) {
      return values.map((v) => (v === null ? null : { error: (error as Error).message }))
    }
    return Promise.all(
      values.map((v) => (v === null ? null : registry.decodeRecord(Buffer.from(v, 'base64')))),
    )
  }

  async close(): Promise<void> {
    this.closed = true
    this.removePeer?.()
    await this.listener?.close()
    const registry = await this.registry?.catch(() => null)
    await registry?.close()
  }

  private async handle(req: IncomingMessage, res: ServerResponse, path: string, query: URLSearchParams) {
    const module = await import('../schema-registry/index.js')
    await module.handleRegistryRequest(
      req,
      res,
      path,
      query,
      () => this.open(module),
      (error) => this.logger.error({ err: error }, 'schema registry request failed'),
      this.security,
      { ca: this.forwardCa },
    )
  }

  private open(module: RegistryModule): Promise<SchemaRegistry> {
    if (this.closed) return Promise.reject(module.Errors.unknownLeader('The broker is stopping'))
    const host = this.host
    if (!host) return Promise.reject(module.Errors.unknownLeader('The broker is still starting'))
    this.registry ??= module.SchemaRegistry.open(host, this.logger).catch((error: unknown) => {
      this.registry = null
      if (error instanceof module.RegistryError) throw error
      throw module.Errors.storeError(`The schema registry could not read ${module.SCHEMAS_TOPIC}`, error)
    })
    return this.registry
  }
}

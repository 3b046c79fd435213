/**
 * Operations for one broker: its metrics registry, the request observer, and the HTTP
 * listener serving `/metrics`, `/healthz`, `/readyz`, the console and the schema registry
 * (under `/schema-registry/`, schema-registry-service.ts). Started by the broker
 * when `tidelog.http.listener` is set, before its logs load, so `/healthz` answers and
 * `/readyz` says "recovering" during a long recovery; `attach` hands it the broker's state.
 *
 * What only a scrape or the console uses loads later, off the path to the Kafka listener
 * (docs/notes/startup.md): prom-client on the first scrape, the console API and the admin client
 * it drives on the first console request.
 */
import type { Logger } from '../common/logger.js'
import type { BrokerMetricsSource } from './broker-metrics-source.js'
import type { ConsoleApi } from './console-api.js'
import { readiness } from './health.js'
import { HttpError, HttpListener, type HttpReply, type RouteTable, staticFile } from './http-listener.js'
import { BrokerMetrics } from './metrics.js'
import type { RequestObserver } from './request-observer.js'
import { REGISTRY_PREFIX, type SchemaRegistryService } from './schema-registry-service.js'

export interface OpsSettings {
  /**
   * tidelog.http.listener, parsed by the broker's config (port 0 picks a free one): ops
   * sits below the server and does not read its config.
   */
  readonly listener: { readonly host: string; readonly port: number }
  /** tidelog.request.log.slow.ms: -1 turns the slow-request log off. */
  readonly slowRequestMs: number
  /** tidelog.console.topic.admin.enable: the console may create and delete topics. */
  readonly topicAdminEnabled: boolean
}

/** The console's files ship in the package beside dist (package.json "files"). */
const CONSOLE_DIR = new URL('../../../src/ops/console/', import.meta.url)

export class OpsServer {
  private source: BrokerMetricsSource | null = null

  private constructor(
    readonly metrics: BrokerMetrics,
    private readonly api: LazyConsoleApi,
    private readonly http: HttpListener,
  ) {}

  /** `registry`: served under /schema-registry/ when given. */
  static async start(
    settings: OpsSettings,
    logger: Logger,
    registry: SchemaRegistryService | null = null,
  ): Promise<OpsServer> {
    const { host, port } = settings.listener
    let self: OpsServer | null = null
    const source = () => self?.source ?? null
    const metrics: BrokerMetrics = new BrokerMetrics({
      logger,
      slowRequestMs: settings.slowRequestMs,
      highWatermarks: async (partitions) => highWatermarks(await api.get(), partitions),
    })
    const api = new LazyConsoleApi(source, metrics.requests, settings.topicAdminEnabled)
    const http = await HttpListener.start(
      host,
      port,
      routes(metrics, api, source, registry),
      logger,
      registry?.route(REGISTRY_PREFIX) ?? null,
    )
    self = new OpsServer(metrics, api, http)
    logger.info({ url: self.url }, 'http listener: /metrics, /healthz, /readyz and the console')
    return self
  }

  /** The metrics' view of the request path (Connection calls it). */
  get requestObserver(): RequestObserver {
    return this.metrics.requests
  }

  get url(): string {
    const host = this.http.host.includes(':') ? `[${this.http.host}]` : this.http.host
    return `http://${host}:${this.http.port}/`
  }

  get port(): number {
    return this.http.port
  }

  attach(source: BrokerMetricsSource): void {
    this.source = source
    this.metrics.attach(source)
  }

  async close(): Promise<void> {
    this.api.close()
    await this.http.close()
    this.metrics.close()
  }
}

/** The console API, imported with the admin client and consumer on its first use. */
class LazyConsoleApi {
  private api: Promise<ConsoleApi> | null = null
  private loaded: ConsoleApi | null = null
  private closed = false

  constructor(
    private readonly source: () => BrokerMetricsSource | null,
    private readonly requests: BrokerMetrics['requests'],
    private readonly topicAdminEnabled: boolean,
  ) {}

  get(): Promise<ConsoleApi> {
    if (this.closed) return Promise.reject(new HttpError(503, 'the broker is stopping'))
    this.api ??= import('./console-api.js').then(({ ConsoleApi }) => {
      // Closed while importing: no API, or its admin client would outlive the ops server.
      if (this.closed) throw new HttpError(503, 'the broker is stopping')
      this.loaded = new ConsoleApi(this.source, this.requests, this.topicAdminEnabled)
      return this.loaded
    })
    return this.api
  }

  close(): void {
    this.closed = true
    this.loaded?.close()
  }
}

async function highWatermarks(
  api: ConsoleApi,
  partitions: readonly { topic: string; partition: number }[],
): Promise<Map<string, number>> {
  const listed = await api.admin.listOffsets(partitions.map((p) => ({ ...p, spec: 'latest' as const })))
  return new Map(listed.map((o) => [`${o.topic}\0${o.partition}`, o.offset]))
}

function json(value: unknown, status = 200): HttpReply {
  return { status, contentType: 'application/json; charset=utf-8', body: `${JSON.stringify(value)}\n` }
}

/** Console API errors as HTTP errors; Kafka errors (a missing topic...) as 400/503 with their message. */
async function apiCall(
  lazyApi: LazyConsoleApi,
  call: (api: ConsoleApi) => Promise<unknown> | unknown,
): Promise<HttpReply> {
  const api = await lazyApi.get()
  const { ConsoleApiError } = await import('./console-api.js')
  try {
    return json(await call(api))
  } catch (error) {
    if (error instanceof ConsoleApiError) throw new HttpError(error.status, error.message)
    if (error instanceof Error && 'code' in error) {
      const retriable = (error as { retriable?: boolean }).retriable === true
      throw new HttpError(retriable ? 503 : 400, error.message)
    }
    throw error
  }
}

function routes(
  metrics: BrokerMetrics,
  api: LazyConsoleApi,
  source: () => BrokerMetricsSource | null,
  registry: SchemaRegistryService | null,
): RouteTable {
  const file = (name: string, type: string) => staticFile(new URL(name, CONSOLE_DIR), type)
  return {
    '/metrics': {
      GET: () => metrics.metrics(),
    },
    '/healthz': { GET: () => ({ contentType: 'text/plain; charset=utf-8', body: 'ok\n' }) },
    '/readyz': {
      GET: () => {
        const ready = readiness(source())
        return json(ready, ready.ready ? 200 : 503)
      },
    },
    '/': { GET: file('index.html', 'text/html; charset=utf-8') },
    '/console.js': { GET: file('console.js', 'text/javascript; charset=utf-8') },
    '/console.css': { GET: file('console.css', 'text/css; charset=utf-8') },
    '/api/cluster': { GET: () => apiCall(api, (a) => a.cluster()) },
    '/api/topics': {
      GET: (r) => apiCall(api, (a) => a.topics(r.query.get('internal') === 'true')),
      POST: (r) => apiCall(api, (a) => a.createTopic(r.body)),
    },
    '/api/topics/*': {
      DELETE: (r) => apiCall(api, (a) => a.deleteTopic(r.path.slice('/api/topics/'.length))),
    },
    '/api/groups': { GET: () => apiCall(api, (a) => a.groups()) },
    '/api/rates': { GET: () => apiCall(api, (a) => a.rates()) },
    '/api/messages': {
      GET: (r) =>
        apiCall(api, async (a) => {
          const page = (await a.messages(r.query)) as { records?: { value: string | null }[] }
          // ?decode=registry: values in Confluent's wire format decoded by their schemas.
          if (r.query.get('decode') !== 'registry' || !registry || !page.records) return page
          const decoded = await registry.decode(page.records.map((record) => record.value))
          return { ...page, records: page.records.map((record, i) => ({ ...record, decoded: decoded[i] })) }
        }),
    },
  }
}

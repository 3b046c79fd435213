/**
 * The listener (Kafka's SocketServer): accepts byte-stream connections from the injected
 * network and owns the set of live connections, so the broker can close them all on
 * shutdown; everything per connection lives in Connection.
 */
import type { Clock, TimerHandle } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import type { ByteStream, Network, NetworkListener } from '../common/network.js'
import { type KafkaPrincipal, principalText } from '../security/principal.js'
import { Connection, type ConnectionOptions } from './connection.js'

export type ConnectionFactoryOptions = Omit<ConnectionOptions, 'id' | 'stream' | 'onClose'>

/** connections.max.idle.ms and the clock its sweep runs on. */
export interface IdleConnectionSettings {
  /** A connection with no read or write and nothing in flight for this long is closed; <= 0: never. */
  readonly maxIdleMs: number
  readonly clock: Clock
}

/** How often the idle sweep looks, at most: a connection is closed at most this late. */
const IDLE_SWEEP_MAX_INTERVAL_MS = 30_000

export class SocketServer {
  private listener: NetworkListener | null = null
  private readonly connections = new Set<Connection>()
  private nextConnectionId = 1
  /** Per connection: its activity count at the sweep that last saw it change, and that sweep's time. */
  private readonly lastActive = new Map<Connection, { readonly activity: number; readonly atMs: number }>()
  private idleSweep: TimerHandle | null = null

  constructor(
    private readonly network: Network,
    private readonly connectionOptions: ConnectionFactoryOptions,
    private readonly logger: Logger,
    /**
     * The principal a TLS handshake proved (undefined: none), or null when the certificate
     * maps to no principal (ssl.principal.mapping.rules): that connection is refused.
     */
    private readonly principalOf?: (stream: ByteStream) => KafkaPrincipal | null | undefined,
    private readonly idle?: IdleConnectionSettings,
  ) {}

  principals(): string[] {
    return [...this.connections].filter((c) => !c.isClosed).map((c) => principalText(c.principal))
  }

  /** Connections accepted since the listener started (closed ones included). */
  get acceptedCount(): number {
    return this.nextConnectionId - 1
  }

  get connectionCount(): number {
    return this.connections.size
  }

  /** Listens on host:port (port 0 picks a free port) and returns the bound port. */
  async listen(host: string, port: number): Promise<number> {
    this.listener = await this.network.listen(host, port, (stream) => {
      const principal = this.principalOf?.(stream)
      if (principal === null) {
        this.logger.info(
          { remote: stream.remoteAddress },
          'closing connection: no ssl.principal.mapping.rules rule matches its certificate',
        )
        stream.destroy()
        return
      }
      const connection = new Connection({
        ...this.connectionOptions,
        ...(principal ? { principal } : {}),
        id: this.nextConnectionId++,
        stream,
        onClose: (closed) => {
          this.connections.delete(closed)
          this.lastActive.delete(closed)
        },
      })
      this.connections.add(connection)
      // Idle from its acceptance until it reads or writes.
      if (this.idle !== undefined && this.idle.maxIdleMs > 0)
        this.lastActive.set(connection, {
          activity: connection.activityCount,
          atMs: this.idle.clock.monotonicMs(),
        })
      this.armIdleSweep()
    })
    this.logger.debug({ host, port: this.listener.port }, 'listening')
    return this.listener.port
  }

  /**
   * Kafka's connections.max.idle.ms: a sweep, armed only while connections are open, closes
   * each connection that read and wrote nothing and had nothing in flight for maxIdleMs. Its
   * idle time counts from the first sweep that saw its last activity, so it is never closed
   * early, and at most a sweep interval late.
   */
  private armIdleSweep(): void {
    const idle = this.idle
    if (idle === undefined || idle.maxIdleMs <= 0 || this.idleSweep !== null || this.listener === null) return
    const intervalMs = Math.min(IDLE_SWEEP_MAX_INTERVAL_MS, Math.max(1, Math.ceil(idle.maxIdleMs / 10)))
    this.idleSweep = idle.clock.setTimeout(() => {
      this.idleSweep = null
      this.sweepIdle(idle)
      if (this.connections.size > 0) this.armIdleSweep()
    }, intervalMs)
  }

  private sweepIdle(idle: IdleConnectionSettings): void {
    const nowMs = idle.clock.monotonicMs()
    for (const connection of this.connections) {
      const seen = this.lastActive.get(connection)
      if (seen === undefined || seen.activity !== connection.activityCount || connection.isBusy) {
        this.lastActive.set(connection, { activity: connection.activityCount, atMs: nowMs })
      } else if (nowMs - seen.atMs >= idle.maxIdleMs) {
        connection.close(`idle for over connections.max.idle.ms (${idle.maxIdleMs} ms)`, undefined, 'debug')
      }
    }
  }

  /** Stops accepting, closes every connection, and resolves once the listener is closed. */
  async close(): Promise<void> {
    const closing = this.listener?.close()
    this.listener = null
    this.idleSweep?.cancel()
    this.idleSweep = null
    for (const connection of this.connections) connection.close('broker shutting down', undefined, 'debug')
    await closing
  }
}

/**
 * The listener (Kafka's SocketServer): accepts byte-stream connections from the injected
 * network and owns the set of live connections, so the broker can close them all on
 * shutdown; everything per connection lives in Connection.
 */
import type { Logger } from '../common/logger.js'
import type { ByteStream, Network, NetworkListener } from '../common/network.js'
import { type KafkaPrincipal, principalText } from '../security/principal.js'
import { Connection, type ConnectionOptions } from './connection.js'

export type ConnectionFactoryOptions = Omit<ConnectionOptions, 'id' | 'stream' | 'onClose'>

export class SocketServer {
  private listener: NetworkListener | null = null
  private readonly connections = new Set<Connection>()
  private nextConnectionId = 1

  constructor(
    private readonly network: Network,
    private readonly connectionOptions: ConnectionFactoryOptions,
    private readonly logger: Logger,
    /**
     * The principal a TLS handshake proved (undefined: none), or null when the certificate
     * maps to no principal (ssl.principal.mapping.rules): that connection is refused.
     */
    private readonly principalOf?: (stream: ByteStream) => KafkaPrincipal | null | undefined,
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
        onClose: (closed) => this.connections.delete(closed),
      })
      this.connections.add(connection)
    })
    this.logger.debug({ host, port: this.listener.port }, 'listening')
    return this.listener.port
  }

  /** Stops accepting, closes every connection, and resolves once the listener is closed. */
  async close(): Promise<void> {
    const closing = this.listener?.close()
    this.listener = null
    for (const connection of this.connections) connection.close('broker shutting down', undefined, 'debug')
    await closing
  }
}

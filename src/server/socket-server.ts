/**
 * The TCP listener. Owns the set of live connections so the broker can close them all on
 * shutdown; everything per connection lives in Connection.
 */
import { type AddressInfo, createServer, type Server } from 'node:net'
import type { Logger } from '../common/logger.js'
import { Connection, type ConnectionOptions } from './connection.js'

export type ConnectionFactoryOptions = Omit<ConnectionOptions, 'id' | 'socket' | 'onClose'>

export class SocketServer {
  private readonly server: Server
  private readonly connections = new Set<Connection>()
  private nextConnectionId = 1

  constructor(
    private readonly connectionOptions: ConnectionFactoryOptions,
    private readonly logger: Logger,
  ) {
    this.server = createServer({ noDelay: true }, (socket) => {
      const connection = new Connection({
        ...this.connectionOptions,
        id: this.nextConnectionId++,
        socket,
        onClose: (closed) => this.connections.delete(closed),
      })
      this.connections.add(connection)
    })
    this.server.on('error', (error) => this.logger.error({ err: error }, 'listener error'))
  }

  get connectionCount(): number {
    return this.connections.size
  }

  /** Listens on host:port (port 0 picks a free port) and returns the bound port. */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (error: Error): void => reject(error)
      this.server.once('error', onError)
      this.server.listen({ host, port, backlog: 1024 }, () => {
        this.server.off('error', onError)
        resolve((this.server.address() as AddressInfo).port)
      })
    })
  }

  /** Stops accepting, closes every connection, and resolves once the listener is closed. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve())
      for (const connection of this.connections) connection.close('broker shutting down', undefined, 'debug')
    })
  }
}

import type { RequestHeader } from '../protocol/generated/index.js'
import type { PurgatoryTimer } from '../replication/delayed-operations.js'
import type { BrokerServices } from './broker-services.js'

/** What a handler may know and do of the connection a request came on. */
export interface ClientConnection {
  /** `host:port` of the client. */
  readonly remoteAddress: string
  readonly isClosed: boolean
  /** Closes the connection (a failed acks=0 produce), logging why once. */
  close(reason: string): void
}

/** Everything a handler may touch: the request's header and the broker's services. */
export interface RequestContext {
  readonly header: RequestHeader
  readonly apiVersion: number
  readonly connection: ClientConnection
  readonly broker: BrokerServices
  /** Request metrics' purgatory timing, when the broker's metrics are on. */
  readonly purgatoryTimer?: PurgatoryTimer
}

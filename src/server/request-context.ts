import type { RequestHeader } from '../protocol/generated/index.js'
import type { PurgatoryTimer } from '../replication/delayed-operations.js'
import type { BrokerServices } from './broker-services.js'
import type { Connection } from './connection.js'

/** Everything a handler may touch: the request's header and the broker's services. */
export interface RequestContext {
  readonly header: RequestHeader
  readonly apiVersion: number
  readonly connection: Connection
  readonly broker: BrokerServices
  /** Request metrics' purgatory timing, when the broker's metrics are on. */
  readonly purgatoryTimer?: PurgatoryTimer
}

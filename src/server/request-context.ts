import type { RequestHeader } from '../protocol/generated/index.js'
import type { PurgatoryTimer } from '../replication/delayed-operations.js'
import type { AclOperation, ResourceType } from '../security/authorizer/acl.js'
import type { AuthorizedOperations } from '../security/authorizer/standard-authorizer.js'
import type { KafkaPrincipal } from '../security/principal.js'
import type { SaslSession } from '../security/sasl-server.js'
import type { BrokerServices } from './broker-services.js'

/** What a handler may know and do of the connection a request came on. */
export interface ClientConnection {
  /** `host:port` of the client. */
  readonly remoteAddress: string
  readonly isClosed: boolean
  /** The listener the connection came on (Metadata answers with that listener's endpoints). */
  readonly listenerName: string
  /** Who the client proved to be: its SASL user, its certificate's mapped DN, or ANONYMOUS. */
  readonly principal: KafkaPrincipal
  /** The SASL exchange of a SASL listener's connection; null on other listeners. */
  readonly sasl: SaslSession | null
  /**
   * The client's software name and version as its ApiVersions v3+ request gave them, or
   * Kafka's "unknown" (client telemetry matches and labels clients by them).
   */
  readonly clientSoftware: { readonly name: string; readonly version: string }
  /** Remembers the software the client named in ApiVersions. */
  setClientSoftware(name: string, version: string): void
  /** Closes the connection (a failed acks=0 produce), logging why once. */
  close(reason: string): void
  /**
   * Calls `listener` once when the connection closes, from either side (at once if it is
   * closed already). Optional: contexts made outside a socket connection have none.
   */
  whenClosed?(listener: () => void): void
}

/** Everything a handler may touch: the request's header and the broker's services. */
export interface RequestContext {
  readonly header: RequestHeader
  readonly apiVersion: number
  readonly connection: ClientConnection
  readonly broker: BrokerServices
  /** Request metrics' purgatory timing, when the broker's metrics are on. */
  readonly purgatoryTimer?: PurgatoryTimer
  /** The connection's principal, from its address, may do `operation` on the resource. */
  authorize(operation: AclOperation, resourceType: ResourceType, resourceName: string): boolean
  /** Allowed `operation` on at least one resource of the type (Kafka's authorizeByResourceType). */
  authorizeByResourceType(operation: AclOperation, resourceType: ResourceType): boolean
  /** The include_*_authorized_operations bitfield of one resource. */
  authorizedOperations(resourceType: ResourceType, resourceName: string): AuthorizedOperations
}

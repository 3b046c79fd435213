import type { Clock } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import type { ClusterImage } from '../metadata/cluster-image.js'
import type { BrokerConfig } from './broker-config.js'
import type { HandlerRegistry } from './handlers/registry.js'

/** The one door from handlers to the broker's services (Redpanda's request_context idea). */
export interface BrokerServices {
  readonly nodeId: number
  readonly config: BrokerConfig
  readonly handlers: HandlerRegistry
  readonly clock: Clock
  readonly logger: Logger
  /** The latest metadata snapshot this broker has applied. */
  metadataImage(): ClusterImage
  /** Creates missing topics with broker defaults when auto.create.topics.enable allows. */
  autoCreateTopics(names: readonly string[]): Promise<void>
}

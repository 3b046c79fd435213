/**
 * Each topic's effective settings (its overrides over the broker's defaults), resolved once
 * per metadata image (images are immutable): the controller and a controlled shutdown ask
 * once per partition, and with 10,000 partitions resolving them each time was most of
 * CreateTopics' and a controlled shutdown's CPU.
 */
import type { ClusterImage } from '../metadata/cluster-image.js'
import { logConfigFor, resolveTopicConfig } from '../metadata/topic-config.js'
import type { TopicSettings } from '../replication/replica-manager.js'
import type { BrokerConfig } from './broker-config.js'

export interface ResolvedTopic {
  readonly settings: TopicSettings
  readonly uncleanLeaderElection: boolean
}

export class ResolvedTopics {
  private readonly byImage = new WeakMap<ClusterImage, Map<string, ResolvedTopic>>()

  constructor(private readonly config: BrokerConfig) {}

  resolve(image: ClusterImage, topic: string): ResolvedTopic {
    let byTopic = this.byImage.get(image)
    if (byTopic === undefined) {
      byTopic = new Map()
      this.byImage.set(image, byTopic)
    }
    let resolved = byTopic.get(topic)
    if (resolved === undefined) {
      const configs = resolveTopicConfig(image, this.config, topic)
      resolved = {
        settings: {
          logConfig: logConfigFor(image, this.config, topic),
          minInsyncReplicas: Number(configs.get('min.insync.replicas')?.value ?? 1),
        },
        uncleanLeaderElection: configs.get('unclean.leader.election.enable')?.value === 'true',
      }
      byTopic.set(topic, resolved)
    }
    return resolved
  }

  /** The topic's effective settings. */
  settings(image: ClusterImage, topic: string): TopicSettings {
    return this.resolve(image, topic).settings
  }
}

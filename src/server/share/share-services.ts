/** How handlers reach the share-partitions of their broker. */
import { sharePartitionManagerConfig } from '../broker-config.js'
import type { BrokerServices } from '../broker-services.js'
import { groupOverrides, shareGroupSettings } from '../group-configs.js'
import { SharePartitionManager } from './share-partition-manager.js'
import { sharePersisterOf } from './share-persister.js'

/**
 * Each broker's share-partition manager, made on the first share request it serves: share
 * groups cost a broker nothing until used. (Kept beside the broker rather than in it.)
 */
const managers = new WeakMap<BrokerServices, SharePartitionManager>()

export function sharePartitionManagerOf(broker: BrokerServices): SharePartitionManager {
  let manager = managers.get(broker)
  if (!manager) {
    manager = new SharePartitionManager(
      sharePartitionManagerConfig(broker.config),
      broker.clock,
      broker.replicaManager,
      (groupId) => {
        const image = broker.metadataImage()
        // Only the configs the group sets: the manager's own config holds the broker's.
        if (Object.keys(groupOverrides(image, groupId)).length === 0) return {}
        return shareGroupSettings(image, broker.config, groupId)
      },
      sharePersisterOf(broker),
      broker.logger,
    )
    managers.set(broker, manager)
  }
  return manager
}

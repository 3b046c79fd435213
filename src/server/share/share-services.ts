/** How handlers reach the share-partitions of their broker. */
import type { ShareMetricsView } from '../../ops/broker-metrics-source.js'
import type { BrokerServices } from '../broker-services.js'
import { sharePartitionManagerConfig } from '../coordinator-configs.js'
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
      // Its partitions' record locks: one timer per acquisition, on the wheel.
      broker.timingWheel,
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

const ACKNOWLEDGE_TYPE_NAMES = new Map([
  [1, 'Accept'],
  [2, 'Release'],
  [3, 'Reject'],
  [4, 'Renew'],
])

/** What the share metrics read of the broker's manager, without making one (null until a share request made it). */
export function shareMetricsView(broker: BrokerServices): ShareMetricsView | null {
  const manager = managers.get(broker)
  if (!manager) return null
  const recordAcknowledgements = new Map<string, number>()
  for (const [type, count] of manager.stats.recordAcknowledgements)
    recordAcknowledgements.set(ACKNOWLEDGE_TYPE_NAMES.get(type) ?? String(type), count)
  return {
    sessionCount: manager.sessions.size,
    sessionPartitionCount: manager.sessions.partitionCount,
    sessionEvictions: manager.stats.sessionEvictions,
    recordAcknowledgements,
    closedAcquisitionLockTimeouts: manager.stats.closedAcquisitionLockTimeouts,
    topicRequests: manager.stats.topicRequests,
    partitionLoads: manager.stats.partitionLoads,
    sharePartitions: manager.openSharePartitions().map(({ groupId, tp, sharePartition }) => ({
      groupId,
      topic: tp.topic,
      partition: tp.partition,
      inFlightMessages: sharePartition.inFlightCount,
      acquisitionLockTimeouts: sharePartition.acquisitionLockTimeouts,
    })),
  }
}

/**
 * Issue 40 item 8: FindCoordinator names another broker as coordinator only once that
 * broker serves the internal topic's partition (its leadership record lists the partition
 * in the current leader epoch). Before, a fresh cluster's first InitProducerId was sent to
 * a leader that had not created the partition yet and got COORDINATOR_LOAD_IN_PROGRESS.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import { type CoordinatorTopic, locateCoordinator } from '../../src/coordinator/coordinator-locator.js'
import { type ClusterImage, type ServedRecord, servedRecordFrom } from '../../src/metadata/cluster-image.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock } from '../storage/helpers.js'

const TOPIC = '__transaction_state'
const TOPIC_ID = 'tid'

function image(served: ReadonlyMap<number, ServedRecord>): ClusterImage {
  return {
    brokers: new Map([
      [1, { nodeId: 1, host: '127.0.0.1', port: 9092 }],
      [2, { nodeId: 2, host: '127.0.0.1', port: 9093 }],
    ]),
    topics: new Map([
      [TOPIC, { name: TOPIC, topicId: TOPIC_ID, partitions: [{ partition: 0, leader: 2, leaderEpoch: 3 }] }],
    ]),
    servedLeaderEpochs: served,
  } as unknown as ClusterImage
}

function coordinatorTopic(current: () => ClusterImage): CoordinatorTopic {
  return {
    topic: TOPIC,
    nodeId: toBrokerId(1),
    clock: new ManualClock(),
    logger: silentLogger,
    metadataImage: current,
    createTopic: () => Promise.reject(new Error('exists')),
    partitionFor: () => 0,
    isLoaded: () => false,
    isStopped: () => false,
  }
}

test('another broker is named coordinator only once it serves the partition in its current epoch', async () => {
  let current = image(new Map())
  const topic = coordinatorTopic(() => current)
  assert.equal((await locateCoordinator(topic, 'txn')).errorCode, ErrorCode.COORDINATOR_NOT_AVAILABLE)
  // An older epoch served is not enough: the leader has not taken the new leadership yet.
  current = image(new Map([[2, servedRecordFrom([[TOPIC_ID, 0, 2]])]]))
  assert.equal((await locateCoordinator(topic, 'txn')).errorCode, ErrorCode.COORDINATOR_NOT_AVAILABLE)
  current = image(new Map([[2, servedRecordFrom([[TOPIC_ID, 0, 3]])]]))
  const found = await locateCoordinator(topic, 'txn')
  assert.deepEqual(
    { errorCode: found.errorCode, nodeId: found.nodeId, port: found.port },
    { errorCode: ErrorCode.NONE, nodeId: 2, port: 9093 },
  )
})

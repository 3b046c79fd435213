/**
 * Issue 40 item 7: an all-topics Metadata answer leaves out a topic still being created
 * (no partition served yet, all at their first leader epoch), which kafkajs would reject
 * the whole answer for; a topic with any partition served, re-elected or failed on its
 * leader's disk is listed as before.
 */

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { toPartitionEpoch } from '../../src/common/types.js'
import {
  type ClusterImage,
  type PartitionState,
  STORAGE_ERROR_LEADER_EPOCH,
  servedRecordFrom,
} from '../../src/metadata/cluster-image.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { allTopics } from '../../src/server/handlers/metadata.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'

function partition(index: number, leaderEpoch = 0): PartitionState {
  return {
    partition: index,
    replicas: ids(1),
    isr: ids(1),
    leader: toBrokerId(1),
    leaderEpoch,
    partitionEpoch: toPartitionEpoch(0),
  }
}

test('all-topics Metadata lists a topic once its leaders serve it', () => {
  const served = servedRecordFrom([
    ['served-id', 0, 0],
    ['served-id', 1, 0],
    ['half-id', 0, 0],
    ['failed-id', 0, STORAGE_ERROR_LEADER_EPOCH],
  ])
  const topics = [
    { name: 'served', topicId: 'served-id', partitions: [partition(0), partition(1)] },
    { name: 'creating', topicId: 'creating-id', partitions: [partition(0), partition(1)] },
    { name: 'half', topicId: 'half-id', partitions: [partition(0), partition(1)] },
    { name: 'reelected', topicId: 'reelected-id', partitions: [partition(0, 2)] },
    { name: 'failed', topicId: 'failed-id', partitions: [partition(0)] },
  ]
  const image = {
    brokers: new Map([[1, { nodeId: 1, host: '127.0.0.1', port: 9092 }]]),
    topics: new Map(topics.map((t) => [t.name, { ...t, configs: {} }])),
    servedLeaderEpochs: new Map([[1, served]]),
  } as unknown as ClusterImage
  const listed = allTopics(image)
  assert.deepEqual(
    listed.map((t) => t.name),
    ['failed', 'half', 'reelected', 'served'],
  )
  const half = listed.find((t) => t.name === 'half')!
  assert.deepEqual(
    half.partitions.map((p) => p.errorCode),
    [ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE],
  )
  assert.equal(
    listed.find((t) => t.name === 'failed')!.partitions[0].errorCode,
    ErrorCode.KAFKA_STORAGE_ERROR,
  )
})

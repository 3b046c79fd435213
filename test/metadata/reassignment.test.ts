import assert from 'node:assert/strict'
import { test } from 'node:test'
import { toPartitionEpoch } from '../../src/common/types.js'
import type { ClusterImage, PartitionState } from '../../src/metadata/cluster-image.js'
import { imbalancedPartitions } from '../../src/metadata/controller.js'
import {
  cancelReassignment,
  isReassigning,
  maybeCompleteReassignment,
  startReassignment,
} from '../../src/metadata/reassignment.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'

function state(partial: Partial<PartitionState>): PartitionState {
  return {
    partition: 0,
    replicas: ids(1, 2),
    isr: ids(1, 2),
    leader: toBrokerId(1),
    leaderEpoch: 3,
    partitionEpoch: toPartitionEpoch(1),
    ...partial,
  }
}

test('a reassignment adds the target first, completes once the target is in the ISR, and moves the leader', () => {
  const started = startReassignment(state({}), ids(3, 4))
  assert.deepEqual(started.replicas, [3, 4, 1, 2])
  assert.deepEqual(started.addingReplicas, [3, 4])
  assert.deepEqual(started.removingReplicas, [1, 2])
  assert.equal(
    maybeCompleteReassignment(started, new Set(ids(1, 2, 3, 4))),
    null,
    'waits for the new replicas',
  )
  const caughtUp = { ...started, isr: ids(1, 2, 3, 4) }
  const done = maybeCompleteReassignment(caughtUp, new Set(ids(1, 2, 3, 4)))!
  assert.deepEqual(done.replicas, [3, 4])
  assert.deepEqual(done.isr, [3, 4])
  assert.equal(done.leader, 3)
  assert.equal(done.leaderEpoch, 4)
  assert.equal(isReassigning(done), false)
})

test('a reassignment keeping the leader does not bump the epoch; cancel restores the original replicas', () => {
  const started = startReassignment(state({}), ids(1, 3))
  const done = maybeCompleteReassignment({ ...started, isr: ids(1, 2, 3) }, new Set(ids(1, 2, 3)))!
  assert.deepEqual(done.replicas, [1, 3])
  assert.equal(done.leader, 1)
  assert.equal(done.leaderEpoch, 3)
  const cancelled = cancelReassignment({ ...started, isr: ids(1, 2, 3) })!
  assert.deepEqual(cancelled.replicas, [1, 2])
  assert.deepEqual(cancelled.isr, [1, 2])
  assert.equal(cancelReassignment(state({})), null)
})

test('imbalance: partitions whose preferred replica does not lead, for brokers above the percentage', () => {
  const partitions = [0, 1, 2, 3].map((p) =>
    state({ partition: p, replicas: ids(1, 2), leader: toBrokerId(p === 0 ? 2 : 1) }),
  )
  const image: ClusterImage = {
    clusterId: 'c',
    controllerId: toBrokerId(1),
    brokers: new Map(ids(1, 2).map((id) => [id, { nodeId: id, host: 'h', port: 1, rack: null }])),
    topics: new Map([['t', { name: 't', topicId: 'x', partitions, configs: {} }]]),
  }
  assert.deepEqual([...imbalancedPartitions(image, 10)], ['t-0'], '1 of 4 = 25% > 10%')
  assert.deepEqual([...imbalancedPartitions(image, 30)], [], '25% is under 30%')
})

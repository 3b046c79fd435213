/**
 * Transactional offsets across a group coordinator failover (issue 15 item 5), on 3
 * in-process brokers with __consumer_offsets replicated 3 times: tidelog's producer sends
 * offsets in a transaction, the broker coordinating the group is stopped before the
 * commit, the partition's new leader loads the pending (transactional, not yet committed)
 * offsets from the log and keeps them invisible; the commit's marker, written there,
 * makes them the group's committed offsets. An aborted transaction's offsets never show.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Producer } from '../../src/client/producer.js'
import { CONSUMER_OFFSETS_TOPIC, partitionForGroup } from '../../src/coordinator/group.js'
import { ReplicationCluster, waitUntil } from '../replication/in-process-cluster.js'
import { FAST_GROUP_PROPERTIES, kafka, waitFor } from './helpers.js'

const GROUP = 'txn-failover-group'
const OFFSETS_PARTITIONS = 3

async function groupOffset(bootstrap: string): Promise<string> {
  const admin = kafka(bootstrap).admin()
  await admin.connect()
  try {
    const [topic] = await admin.fetchOffsets({ groupId: GROUP, topics: ['in'] })
    return topic.partitions[0].offset
  } finally {
    await admin.disconnect()
  }
}

test('3 brokers: offsets pending in a transaction survive the group coordinator stopping, and commit on the new one', {
  timeout: 180000,
}, async () => {
  const cluster = await ReplicationCluster.start(3, {
    ...FAST_GROUP_PROPERTIES,
    'offsets.topic.num.partitions': OFFSETS_PARTITIONS,
    'transaction.state.log.num.partitions': 3,
  })
  let producer: Producer | null = null
  try {
    await cluster.createTopic('in', 1, 3)
    producer = new Producer({
      bootstrapServers: cluster.bootstrap,
      transactionalId: 'txn-failover',
      lingerMs: 0,
    })
    await producer.initTransactions()
    // An aborted transaction first: its offsets never become visible, before or after the move.
    producer.beginTransaction()
    await producer.sendOffsetsToTransaction([{ topic: 'in', partition: 0, offset: 3 }], GROUP)
    await producer.abortTransaction()
    producer.beginTransaction()
    await producer.sendOffsetsToTransaction([{ topic: 'in', partition: 0, offset: 5 }], GROUP)
    assert.equal(await groupOffset(cluster.bootstrap), '-1')

    const partition = partitionForGroup(GROUP, OFFSETS_PARTITIONS)
    assert.equal(cluster.state(CONSUMER_OFFSETS_TOPIC, partition).replicas.length, 3)
    const coordinator = cluster.state(CONSUMER_OFFSETS_TOPIC, partition).leader
    await cluster.stopBroker(coordinator)
    await waitUntil('new group coordinator', 20000, () => {
      const leader = cluster.state(CONSUMER_OFFSETS_TOPIC, partition).leader
      return leader >= 0 && leader !== coordinator
    })
    // The new coordinator loaded the open transaction's offsets as pending.
    assert.equal(await groupOffset(cluster.bootstrap), '-1')
    await producer.commitTransaction()
    await waitFor('the committed offset visible on the new coordinator', 20000, async () => {
      return (await groupOffset(cluster.bootstrap)) === '5'
    })
    // The stopped broker comes back (and may lead again): the offset stays.
    await cluster.startBroker(coordinator)
    assert.equal(await groupOffset(cluster.bootstrap), '5')
  } finally {
    await producer?.close()
    await cluster.close()
  }
})

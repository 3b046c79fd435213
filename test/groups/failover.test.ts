/**
 * Coordinator failover on a 3-broker in-process cluster: __consumer_offsets is replicated
 * (RF 3), the coordinator broker is stopped while consumers run and commit, the group
 * moves to the partition's new leader, which loads the group and its offsets; consumers
 * resume from committed offsets and no committed offset is lost or goes backwards.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { CONSUMER_OFFSETS_TOPIC, partitionForGroup } from '../../src/coordinator/group.js'
import { consumedAll } from '../helpers/consumed.js'
import { ReplicationCluster, waitUntil } from '../replication/in-process-cluster.js'
import {
  FAST_GROUP_PROPERTIES,
  kafka,
  produce,
  startConsumer,
  type TrackedConsumer,
  waitFor,
} from './helpers.js'

const TOPIC = 'events'
const GROUP = 'failover-group'

async function committed(bootstrap: string): Promise<Map<number, bigint>> {
  const admin = kafka(bootstrap).admin()
  await admin.connect()
  try {
    const [topic] = await admin.fetchOffsets({ groupId: GROUP, topics: [TOPIC] })
    return new Map(topic.partitions.map((p) => [p.partition, BigInt(p.offset)]))
  } finally {
    await admin.disconnect()
  }
}

test('3 brokers: stopping the coordinator moves the group; committed offsets survive and never go backwards', async () => {
  const cluster = await ReplicationCluster.start(3, {
    ...FAST_GROUP_PROPERTIES,
    'offsets.topic.num.partitions': 5,
  })
  const consumers: TrackedConsumer[] = []
  try {
    await cluster.createTopic(TOPIC, 6, 3)
    const first = await produce(cluster.bootstrap, TOPIC, 6, 10, 'first')
    for (let i = 0; i < 3; i++)
      consumers.push(
        // Few retries: a consumer whose coordinator is gone crashes and restarts sooner, and
        // kafkajs' restart is what finds the new coordinator after a connection error.
        await startConsumer(cluster.bootstrap, GROUP, TOPIC, `c${i}`, { retries: 3 }),
      )
    await waitFor('first records consumed', 30000, () =>
      consumedAll(
        consumers.flatMap((c) => c.values),
        first,
      ),
    )
    const offsets = cluster.state(CONSUMER_OFFSETS_TOPIC, 0)
    assert.equal(offsets.replicas.length, 3, '__consumer_offsets is replicated on all 3 brokers')
    const partition = partitionForGroup(GROUP, 5)
    await waitFor('offsets committed', 20000, async () =>
      [...(await committed(cluster.bootstrap)).values()].every((o) => o === 10n),
    )
    const before = await committed(cluster.bootstrap)
    const coordinator = cluster.state(CONSUMER_OFFSETS_TOPIC, partition).leader
    await cluster.stopBroker(coordinator)
    await waitUntil('new coordinator elected', 20000, () => {
      const leader = cluster.state(CONSUMER_OFFSETS_TOPIC, partition).leader
      return leader >= 0 && leader !== coordinator
    })
    const after = await committed(cluster.bootstrap)
    for (const [p, offset] of before) assert.ok((after.get(p) ?? -1n) >= offset, `partition ${p} went back`)
    const second = await produce(cluster.bootstrap, TOPIC, 6, 5, 'second')
    await waitFor('second records consumed', 60000, () =>
      second.every((v) => consumers.some((c) => c.values.includes(v))),
    )
    const firstAgain = consumers.flatMap((c) => c.values).filter((v) => v.startsWith('first')).length
    assert.equal(firstAgain, first.length, 'nothing consumed twice: consumers resumed from committed offsets')
    await waitFor('second offsets committed', 60000, async () => {
      const now = await committed(cluster.bootstrap)
      return [...now.values()].every((o) => o === 15n)
    })
    // The stopped broker comes back; offsets stay where they are.
    await cluster.startBroker(coordinator)
    const final = await committed(cluster.bootstrap)
    for (let p = 0; p < 6; p++) assert.equal(final.get(p), 15n)
  } finally {
    for (const c of consumers) await c.consumer.disconnect().catch(() => undefined)
    await cluster.close()
  }
})

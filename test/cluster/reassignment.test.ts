/**
 * Partition reassignment with kafkajs's admin API on an in-process 4-broker cluster: the
 * partition moves to new brokers, which catch up before the old ones are dropped; every
 * record stays readable; the old broker no longer hosts the partition.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { waitFor } from '../helpers/broker-process.js'
import { startCluster } from '../helpers/cluster.js'
import { kcatConsume, normalize } from '../helpers/compat-clients.js'

test('AlterPartitionReassignments moves a partition to new replicas without losing records', {
  timeout: 90000,
}, async () => {
  const cluster = await startCluster({
    brokers: 4,
    port: 0,
    properties: { 'broker.session.timeout.ms': 3000, 'replica.lag.time.max.ms': 5000 },
  })
  const kafka = new Kafka({ brokers: [cluster.bootstrapServers.split(',')[0]], logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  const producer = kafka.producer()
  try {
    await admin.connect()
    await producer.connect()
    const topic = 'moving'
    await admin.createTopics({
      topics: [{ topic, replicaAssignment: [{ partition: 0, replicas: [0] }] }],
      waitForLeaders: true,
    })
    const messages = Array.from({ length: 200 }, (_, i) => ({ key: `k${i}`, value: `v${i}` }))
    await producer.send({ topic, acks: -1, messages })
    await admin.alterPartitionReassignments({
      topics: [{ topic, partitionAssignment: [{ partition: 0, replicas: [2, 3] }] }],
    })
    await waitFor(
      'the reassignment to complete',
      async () => {
        const { topics } = await admin.listPartitionReassignments({})
        const state = cluster.brokers[1].metadataImage().topics.get(topic)?.partitions[0]
        return topics.length === 0 && state?.replicas.join(',') === '2,3' ? state : undefined
      },
      60000,
      100,
    )
    const state = cluster.brokers[1].metadataImage().topics.get(topic)!.partitions[0]
    assert.equal(state.leader, 2, 'the first target replica leads once the old leader is removed')
    assert.deepEqual([...state.isr].sort(), [2, 3])
    await waitFor(
      'broker 0 to drop its copy',
      async () => (cluster.brokers[0].replicaManager.getPartition(topic, 0) ? undefined : true),
      10000,
      50,
    )
    const consumed = await kcatConsume(cluster.brokers[2].bootstrapServers, topic)
    assert.deepEqual(
      normalize(consumed.records).map((r) => [r.offset, r.key, r.value]),
      messages.map((m, i) => [i, m.key, m.value]),
    )
  } finally {
    await producer.disconnect()
    await admin.disconnect()
    await cluster.stop()
  }
})

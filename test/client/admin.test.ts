/**
 * Admin against a real broker: topics, partitions, configs, cluster, records, offsets, and
 * the answer about groups.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { Producer } from '../../src/client/producer.js'
import { startCluster } from '../helpers/cluster.js'
import { startFakeBroker } from './fake-broker.js'
import { createTopics, withBroker } from './helpers.js'

test('topics: create, list, describe, add partitions, delete; errors carry Kafka codes', async () => {
  await withBroker(async (cluster) => {
    const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
    await admin.createTopics([
      { topic: 'a', numPartitions: 3, replicationFactor: 1 },
      { topic: 'b', numPartitions: 1, configs: { 'cleanup.policy': 'compact' } },
    ])
    await assert.rejects(admin.createTopics([{ topic: 'a', numPartitions: 1 }]), {
      code: 'ERR_KAFKA_TOPIC_ALREADY_EXISTS',
      errorCode: 36,
    })
    await assert.rejects(admin.createTopics([{ topic: 'bad name!' }]), {
      code: 'ERR_KAFKA_INVALID_TOPIC_EXCEPTION',
    })
    await admin.createTopics([{ topic: 'dry', numPartitions: 1 }], { validateOnly: true })
    assert.deepEqual(await admin.listTopics(), ['a', 'b'])
    const [a] = await admin.describeTopics(['a'])
    assert.equal(a.partitions.length, 3)
    for (const p of a.partitions) {
      assert.equal(p.leader, 0)
      assert.deepEqual([p.replicas, p.isr, p.offlineReplicas], [[0], [0], []])
    }
    await admin.createPartitions([{ topic: 'a', count: 5 }])
    assert.equal((await admin.describeTopics(['a']))[0].partitions.length, 5)
    await assert.rejects(admin.createPartitions([{ topic: 'a', count: 2 }]), {
      code: 'ERR_KAFKA_INVALID_PARTITIONS',
    })
    await admin.deleteTopics(['b'])
    assert.deepEqual(await admin.listTopics(), ['a'])
    await assert.rejects(admin.deleteTopics(['nope']), { code: 'ERR_KAFKA_UNKNOWN_TOPIC_OR_PARTITION' })
    await assert.rejects(admin.describeTopics(['nope']), { code: 'ERR_KAFKA_UNKNOWN_TOPIC_OR_PARTITION' })
    admin.close()
  })
})

test('configs: describe topic and broker configs, incremental set and delete', async () => {
  await withBroker(async (cluster) => {
    const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
    await admin.createTopics([{ topic: 'c', numPartitions: 1 }])
    const before = await admin.describeConfigs([{ type: 'topic', name: 'c', keys: ['retention.ms'] }])
    assert.equal(before[0].entries[0].source, 'DEFAULT_CONFIG')
    await admin.incrementalAlterConfigs([
      { type: 'topic', name: 'c', ops: [{ name: 'retention.ms', op: 'set', value: '12345' }] },
    ])
    const set = (await admin.describeConfigs([{ type: 'topic', name: 'c', keys: ['retention.ms'] }]))[0]
      .entries[0]
    assert.deepEqual([set.value, set.source, set.isDefault], ['12345', 'DYNAMIC_TOPIC_CONFIG', false])
    await admin.incrementalAlterConfigs([
      { type: 'topic', name: 'c', ops: [{ name: 'retention.ms', op: 'delete' }] },
    ])
    const back = (await admin.describeConfigs([{ type: 'topic', name: 'c', keys: ['retention.ms'] }]))[0]
      .entries[0]
    assert.equal(back.value, before[0].entries[0].value)
    const broker = await admin.describeConfigs([{ type: 'broker', name: '0' }])
    assert.ok(broker[0].entries.some((e) => e.name === 'num.partitions'))
    admin.close()
  })
})

test('cluster, offsets and record deletion', async () => {
  await withBroker(async (cluster) => {
    const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
    const described = await admin.describeCluster()
    assert.equal(described.controllerId, 0)
    assert.deepEqual(
      described.brokers.map((b) => `${b.host}:${b.port}`),
      [cluster.bootstrapServers],
    )
    assert.ok(described.clusterId)
    await admin.createTopics([{ topic: 'o', numPartitions: 1 }])
    const producer = new Producer({ bootstrapServers: cluster.bootstrapServers })
    for (let i = 0; i < 10; i++) await producer.send({ topic: 'o', value: `${i}`, timestamp: 1000 + i })
    await producer.close()
    const offsets = async () =>
      (await admin.listOffsets([{ topic: 'o', partition: 0, spec: 'earliest' }]))[0].offset
    assert.equal(await offsets(), 0)
    assert.equal((await admin.listOffsets([{ topic: 'o', partition: 0, spec: 'latest' }]))[0].offset, 10)
    assert.equal((await admin.listOffsets([{ topic: 'o', partition: 0, spec: 1004 }]))[0].offset, 4)
    assert.equal((await admin.deleteRecords([{ topic: 'o', partition: 0, offset: 4 }])).get('o/0'), 4)
    assert.equal(await offsets(), 4)
    admin.close()
  })
})

test('groups: listGroups merges every broker\'s groups (3 brokers), and says "not supported" where the APIs are missing', async () => {
  const cluster = await startCluster({
    brokers: 3,
    port: 0,
    properties: { 'offsets.topic.num.partitions': 6 },
  })
  try {
    const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
    await createTopics(cluster.bootstrapServers, [{ topic: 'g' }])
    assert.deepEqual(await admin.listGroups(), [])
    const groupIds = Array.from({ length: 8 }, (_, i) => `group-${i}`)
    const coordinators = new Set<number>()
    for (const groupId of groupIds) {
      await admin.alterGroupOffsets(groupId, [{ topic: 'g', partition: 0, offset: 0 }])
      coordinators.add(await admin.findCoordinator(groupId))
    }
    assert.ok(coordinators.size > 1, 'the groups have coordinators on several brokers')
    assert.deepEqual(
      (await admin.listGroups()).map((g) => g.groupId),
      groupIds,
      'every group, whichever broker coordinates it',
    )
    admin.close()
  } finally {
    await cluster.stop()
  }
  const fake = await startFakeBroker()
  try {
    const admin = new Admin({ bootstrapServers: fake.bootstrap })
    assert.equal(await admin.supportsGroups(), false)
    await assert.rejects(admin.listGroups(), { code: 'ERR_GROUPS_NOT_SUPPORTED' })
    // DescribeCluster is missing too: the admin falls back to Metadata.
    assert.deepEqual(await admin.describeCluster(), {
      clusterId: 'fake',
      controllerId: 0,
      brokers: [{ nodeId: 0, host: '127.0.0.1', port: Number(fake.bootstrap.split(':')[1]), rack: null }],
    })
    admin.close()
  } finally {
    await fake.close()
  }
})

/**
 * Topic admin and config APIs driven by real clients over real sockets: kafkajs,
 * @platformatic/kafka, kcat and python3-confluent-kafka (librdkafka).
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { Admin } from '@platformatic/kafka'
import { Kafka, logLevel } from 'kafkajs'
import { polyfillPromiseWithResolvers, run, startBroker, withBroker } from '../helpers/cluster.js'

/** kafkajs' ConfigResourceTypes (not a named ESM export of the CommonJS package). */
const ConfigResourceTypes = { TOPIC: 2, BROKER: 4 } as const
const TOPIC_CONFIG = 1
const DYNAMIC_BROKER_CONFIG = 2
const DYNAMIC_DEFAULT_BROKER_CONFIG = 3
const STATIC_BROKER_CONFIG = 4
const DEFAULT_CONFIG = 5

async function withKafkajsAdmin<T>(bootstrap: string, fn: (admin: ReturnType<Kafka['admin']>) => Promise<T>) {
  const kafka = new Kafka({ brokers: [bootstrap], logLevel: logLevel.NOTHING, retry: { retries: 0 } })
  const admin = kafka.admin()
  await admin.connect()
  try {
    return await fn(admin)
  } finally {
    await admin.disconnect()
  }
}

/** The first error of a kafkajs aggregate (createTopics) or the error itself. */
async function kafkajsError(promise: Promise<unknown>): Promise<{ type: string; message: string }> {
  try {
    await promise
  } catch (error) {
    const e = error as {
      errors?: { type: string; message: string }[]
      originalError?: { type: string; message: string }
      type: string
      message: string
    }
    // Retriable codes come wrapped in KafkaJSNumberOfRetriesExceeded.
    return e.errors?.[0] ?? e.originalError ?? e
  }
  assert.fail('expected the request to fail')
}

test('kafkajs creates topics with configs, validateOnly creates nothing, metadata shows them', async () => {
  await withBroker(async (cluster) => {
    await withKafkajsAdmin(cluster.bootstrapServers, async (admin) => {
      const validated = await admin.createTopics({
        validateOnly: true,
        waitForLeaders: false,
        topics: [{ topic: 'dry-run', numPartitions: 2 }],
      })
      assert.equal(validated, true)
      assert.deepEqual(await admin.listTopics(), [])

      const created = await admin.createTopics({
        topics: [
          {
            topic: 'orders',
            numPartitions: 3,
            replicationFactor: 1,
            configEntries: [
              { name: 'retention.ms', value: '3600000' },
              { name: 'cleanup.policy', value: 'compact' },
            ],
          },
          { topic: 'defaults' },
        ],
      })
      assert.equal(created, true)
      const metadata = await admin.fetchTopicMetadata({ topics: ['orders', 'defaults'] })
      const orders = metadata.topics.find((t) => t.name === 'orders')!
      assert.equal(orders.partitions.length, 3)
      assert.deepEqual(orders.partitions[0].replicas, [0])
      assert.equal(metadata.topics.find((t) => t.name === 'defaults')!.partitions.length, 1)

      // Creating again: kafkajs reports TOPIC_ALREADY_EXISTS as `false`.
      assert.equal(await admin.createTopics({ topics: [{ topic: 'orders' }] }), false)
    })
  })
})

test('kafkajs createTopics errors carry Kafka codes: names, collisions, RF, partitions, configs', async () => {
  await withBroker(async (cluster) => {
    await withKafkajsAdmin(cluster.bootstrapServers, async (admin) => {
      await admin.createTopics({ topics: [{ topic: 'my.topic' }] })
      const cases: [object, string, RegExp][] = [
        [{ topic: 'x'.repeat(250) }, 'INVALID_TOPIC_EXCEPTION', /./],
        [{ topic: 'bad name!' }, 'INVALID_TOPIC_EXCEPTION', /./],
        [{ topic: 'my_topic' }, 'INVALID_TOPIC_EXCEPTION', /./],
        [{ topic: 'rf', replicationFactor: 3 }, 'INVALID_REPLICATION_FACTOR', /./],
        [{ topic: 'parts', numPartitions: 0 }, 'INVALID_PARTITIONS', /./],
        [{ topic: 'cfg', configEntries: [{ name: 'retention.ms', value: 'soon' }] }, 'INVALID_CONFIG', /./],
        [{ topic: 'cfg2', configEntries: [{ name: 'no.such.config', value: '1' }] }, 'INVALID_CONFIG', /./],
      ]
      for (const [topic, type] of cases) {
        const error = await kafkajsError(admin.createTopics({ topics: [topic as { topic: string }] }))
        assert.equal(error.type, type, JSON.stringify(topic).slice(0, 80))
      }
      assert.deepEqual((await admin.listTopics()).sort(), ['my.topic'])
    })
  })
})

test("createTopics error messages are Kafka's (read with @platformatic/kafka, CreateTopics v7)", async () => {
  polyfillPromiseWithResolvers()
  await withBroker(async (cluster) => {
    const admin = new Admin({ clientId: 'tidelog-test', bootstrapBrokers: [cluster.bootstrapServers] })
    try {
      await admin.createTopics({ topics: ['a.b'], partitions: 1, replicas: 1 })
      const failure = async (options: Parameters<Admin['createTopics']>[0]) => {
        try {
          await admin.createTopics(options)
        } catch (error) {
          const e = error as { response?: { topics: { errorCode: number; errorMessage: string }[] } }
          const topic = e.response?.topics[0]
          return [topic?.errorCode, topic?.errorMessage]
        }
        assert.fail('expected createTopics to fail')
      }
      assert.deepEqual(await failure({ topics: ['a_b'], partitions: 1, replicas: 1 }), [
        17,
        "Topic 'a_b' collides with existing topic: a.b",
      ])
      assert.deepEqual(await failure({ topics: ['a.b'], partitions: 1, replicas: 1 }), [
        36,
        "Topic 'a.b' already exists.",
      ])
      assert.deepEqual(await failure({ topics: ['rf'], partitions: 1, replicas: 2 }), [
        38,
        'Unable to replicate the partition 2 time(s): The target replication factor of 2 cannot be reached because only 1 broker(s) are registered.',
      ])
      assert.deepEqual(
        await failure({
          topics: ['cfg'],
          partitions: 1,
          replicas: 1,
          configs: [{ name: 'retention.ms', value: '-5' }],
        }),
        [40, 'Invalid value -5 for configuration retention.ms: Value must be at least -1'],
      )
      assert.deepEqual(await failure({ topics: ['bad/name'], partitions: 1, replicas: 1 }), [
        17,
        "Topic name \"bad/name\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
      ])
    } finally {
      await admin.close()
    }
  })
})

test('kafkajs createPartitions grows a topic and refuses a shrink', async () => {
  await withBroker(async (cluster) => {
    await withKafkajsAdmin(cluster.bootstrapServers, async (admin) => {
      await admin.createTopics({ topics: [{ topic: 'grow', numPartitions: 2 }] })
      await admin.createPartitions({ validateOnly: true, topicPartitions: [{ topic: 'grow', count: 5 }] })
      let metadata = await admin.fetchTopicMetadata({ topics: ['grow'] })
      assert.equal(metadata.topics[0].partitions.length, 2)
      await admin.createPartitions({ topicPartitions: [{ topic: 'grow', count: 4 }] })
      metadata = await admin.fetchTopicMetadata({ topics: ['grow'] })
      assert.equal(metadata.topics[0].partitions.length, 4)
      const shrink = await kafkajsError(
        admin.createPartitions({ topicPartitions: [{ topic: 'grow', count: 3 }] }),
      )
      assert.equal(shrink.type, 'INVALID_PARTITIONS')
      const unknown = await kafkajsError(
        admin.createPartitions({ topicPartitions: [{ topic: 'nope', count: 3 }] }),
      )
      assert.equal(unknown.type, 'UNKNOWN_TOPIC_OR_PARTITION')
    })
  })
})

test('kafkajs describeConfigs and alterConfigs: topic overrides, sources, broker configs', async () => {
  await withBroker(
    async (cluster) => {
      await withKafkajsAdmin(cluster.bootstrapServers, async (admin) => {
        await admin.createTopics({
          topics: [{ topic: 'cfg', configEntries: [{ name: 'max.message.bytes', value: '2000000' }] }],
        })
        const describe = async () => {
          const { resources } = await admin.describeConfigs({
            includeSynonyms: true,
            resources: [{ type: ConfigResourceTypes.TOPIC, name: 'cfg' }],
          })
          return new Map(resources[0].configEntries.map((e) => [e.configName, e]))
        }
        let entries = await describe()
        assert.equal(entries.get('max.message.bytes')!.configValue, '2000000')
        assert.equal(entries.get('max.message.bytes')!.configSource, TOPIC_CONFIG)
        assert.deepEqual(
          entries.get('max.message.bytes')!.configSynonyms.map((s) => [s.configName, s.configSource]),
          [
            ['max.message.bytes', TOPIC_CONFIG],
            ['message.max.bytes', DEFAULT_CONFIG],
          ],
        )
        // segment.bytes comes from the static broker property set at start.
        assert.equal(entries.get('segment.bytes')!.configValue, '52428800')
        assert.equal(entries.get('segment.bytes')!.configSource, STATIC_BROKER_CONFIG)
        assert.equal(entries.get('cleanup.policy')!.configValue, 'delete')
        assert.equal(entries.get('cleanup.policy')!.configSource, DEFAULT_CONFIG)
        assert.equal(entries.get('retention.ms')!.configValue, '604800000')

        // AlterConfigs replaces the whole set of overrides.
        await admin.alterConfigs({
          validateOnly: false,
          resources: [
            {
              type: ConfigResourceTypes.TOPIC,
              name: 'cfg',
              configEntries: [{ name: 'retention.ms', value: '1000' }],
            },
          ],
        })
        entries = await describe()
        assert.equal(entries.get('retention.ms')!.configValue, '1000')
        assert.equal(entries.get('retention.ms')!.configSource, TOPIC_CONFIG)
        assert.equal(entries.get('max.message.bytes')!.configValue, '1048588')
        assert.equal(entries.get('max.message.bytes')!.configSource, DEFAULT_CONFIG)

        const bad = await kafkajsError(
          admin.alterConfigs({
            validateOnly: false,
            resources: [
              {
                type: ConfigResourceTypes.TOPIC,
                name: 'cfg',
                configEntries: [{ name: 'retention.ms', value: 'x' }],
              },
            ],
          }),
        )
        assert.equal(bad.type, 'INVALID_CONFIG')

        // Broker: dynamic names are accepted and described as DYNAMIC_BROKER_CONFIG ...
        await admin.alterConfigs({
          validateOnly: false,
          resources: [
            {
              type: ConfigResourceTypes.BROKER,
              name: '0',
              configEntries: [{ name: 'log.retention.ms', value: '7200000' }],
            },
          ],
        })
        const { resources } = await admin.describeConfigs({
          includeSynonyms: true,
          resources: [{ type: ConfigResourceTypes.BROKER, name: '0' }],
        })
        const broker = new Map(resources[0].configEntries.map((e) => [e.configName, e]))
        assert.equal(broker.get('log.retention.ms')!.configValue, '7200000')
        assert.equal(broker.get('log.retention.ms')!.configSource, DYNAMIC_BROKER_CONFIG)
        assert.equal(broker.get('log.retention.ms')!.readOnly, false)
        assert.equal(broker.get('log.dirs')!.readOnly, true)
        assert.equal(broker.get('log.segment.bytes')!.configSource, STATIC_BROKER_CONFIG)
        // ... and topics without an override follow them.
        await admin.createTopics({ topics: [{ topic: 'follows' }] })
        const { resources: followed } = await admin.describeConfigs({
          includeSynonyms: false,
          resources: [{ type: ConfigResourceTypes.TOPIC, name: 'follows', configNames: ['retention.ms'] }],
        })
        assert.deepEqual(
          followed[0].configEntries.map((e) => [e.configName, e.configValue, e.configSource]),
          [['retention.ms', '7200000', DYNAMIC_BROKER_CONFIG]],
        )
        // Static-only names are refused as Kafka does.
        const readOnly = await kafkajsError(
          admin.alterConfigs({
            validateOnly: false,
            resources: [
              {
                type: ConfigResourceTypes.BROKER,
                name: '0',
                configEntries: [{ name: 'log.dirs', value: '/tmp/x' }],
              },
            ],
          }),
        )
        assert.equal(readOnly.type, 'INVALID_REQUEST')

        const unknown = await kafkajsError(
          admin.describeConfigs({
            includeSynonyms: false,
            resources: [{ type: ConfigResourceTypes.TOPIC, name: 'missing' }],
          }),
        )
        assert.equal(unknown.type, 'UNKNOWN_TOPIC_OR_PARTITION')
      })
    },
    { properties: { 'log.segment.bytes': '52428800' } },
  )
})

test('kafkajs deleteTopics removes topics; unknown and disabled deletes fail with Kafka codes', async () => {
  await withBroker(async (cluster) => {
    await withKafkajsAdmin(cluster.bootstrapServers, async (admin) => {
      await admin.createTopics({ topics: [{ topic: 'doomed' }, { topic: 'kept' }] })
      await admin.deleteTopics({ topics: ['doomed'] })
      assert.deepEqual(await admin.listTopics(), ['kept'])
      const unknown = await kafkajsError(admin.deleteTopics({ topics: ['doomed'] }))
      assert.equal(unknown.message, 'This server does not host this topic-partition')
    })
  })
  await withBroker(
    async (cluster) => {
      await withKafkajsAdmin(cluster.bootstrapServers, async (admin) => {
        await admin.createTopics({ topics: [{ topic: 'stays' }] })
        // kafkajs sends DeleteTopics v1: Kafka answers INVALID_REQUEST below v3.
        const error = await kafkajsError(admin.deleteTopics({ topics: ['stays'] }))
        assert.equal(error.type, 'INVALID_REQUEST')
        assert.deepEqual(await admin.listTopics(), ['stays'])
      })
    },
    { properties: { 'delete.topic.enable': 'false' } },
  )
})

test('@platformatic/kafka admin: create, describe, alter, incremental alter, delete', async () => {
  polyfillPromiseWithResolvers()
  await withBroker(async (cluster) => {
    const admin = new Admin({ clientId: 'tidelog-test', bootstrapBrokers: [cluster.bootstrapServers] })
    try {
      const created = await admin.createTopics({
        topics: ['plat'],
        partitions: 2,
        replicas: 1,
        configs: [{ name: 'cleanup.policy', value: 'compact' }],
      })
      assert.equal(created[0].name, 'plat')
      assert.equal(created[0].partitions, 2)
      assert.equal(created[0].replicas, 1)
      assert.equal(created[0].configuration['cleanup.policy'], 'compact')
      assert.equal(created[0].configuration['retention.ms'], '604800000')
      assert.notEqual(created[0].id, '00000000-0000-0000-0000-000000000000')

      await admin.incrementalAlterConfigs({
        resources: [
          {
            resourceType: 2,
            resourceName: 'plat',
            configs: [
              { name: 'cleanup.policy', configOperation: 2, value: 'delete' },
              { name: 'retention.bytes', configOperation: 0, value: '1048576' },
            ],
          },
        ],
      })
      const describe = async () => {
        const described = await admin.describeConfigs({
          resources: [{ resourceType: 2, resourceName: 'plat' }],
          includeSynonyms: true,
          includeDocumentation: true,
        })
        return new Map(described[0].configs.map((c) => [c.name, c]))
      }
      let configs = await describe()
      assert.equal(configs.get('cleanup.policy')!.value, 'compact,delete')
      assert.equal(configs.get('retention.bytes')!.value, '1048576')
      assert.equal(configs.get('retention.bytes')!.configType, 5) // LONG
      assert.ok((configs.get('retention.bytes')!.documentation ?? '').length > 0)

      await admin.incrementalAlterConfigs({
        resources: [
          {
            resourceType: 2,
            resourceName: 'plat',
            configs: [
              { name: 'cleanup.policy', configOperation: 3, value: 'compact' },
              { name: 'retention.bytes', configOperation: 1 },
            ],
          },
        ],
      })
      configs = await describe()
      assert.equal(configs.get('cleanup.policy')!.value, 'delete')
      assert.equal(configs.get('cleanup.policy')!.configSource, TOPIC_CONFIG)
      assert.equal(configs.get('retention.bytes')!.configSource, DEFAULT_CONFIG)

      // A LIST operation on a non-list config is INVALID_CONFIG.
      await assert.rejects(
        admin.incrementalAlterConfigs({
          resources: [
            {
              resourceType: 2,
              resourceName: 'plat',
              configs: [{ name: 'retention.ms', configOperation: 2, value: '5' }],
            },
          ],
        }),
      )

      // The cluster-wide dynamic default, reported on '' and on the broker.
      await admin.incrementalAlterConfigs({
        resources: [
          {
            resourceType: 4,
            resourceName: '',
            configs: [{ name: 'log.retention.bytes', configOperation: 0, value: '99' }],
          },
        ],
      })
      const brokers = await admin.describeConfigs({
        resources: [
          { resourceType: 4, resourceName: '' },
          { resourceType: 4, resourceName: '0', configurationKeys: ['log.retention.bytes'] },
        ],
        includeSynonyms: true,
      })
      assert.deepEqual(
        brokers[0].configs.map((c) => [c.name, c.value, c.configSource]),
        [['log.retention.bytes', '99', DYNAMIC_DEFAULT_BROKER_CONFIG]],
      )
      assert.equal(brokers[1].configs[0].configSource, DYNAMIC_DEFAULT_BROKER_CONFIG)
      assert.deepEqual(
        brokers[1].configs[0].synonyms.map((s) => s.source),
        [DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG],
      )

      await assert.rejects(
        admin.alterConfigs({
          resources: [
            { resourceType: 4, resourceName: '0', configs: [{ name: 'log.dirs', value: '/tmp/elsewhere' }] },
          ],
        }),
        (error: {
          errors?: { response?: { responses: { errorCode: number; errorMessage: string }[] } }[]
        }) => {
          const response = error.errors?.[0]?.response?.responses[0]
          assert.equal(response?.errorCode, 42)
          assert.equal(response?.errorMessage, 'Cannot update these configs dynamically: Set(log.dirs)')
          return true
        },
      )
      await admin.alterConfigs({
        resources: [
          { resourceType: 2, resourceName: 'plat', configs: [{ name: 'segment.ms', value: '60000' }] },
        ],
      })
      configs = await describe()
      assert.equal(configs.get('segment.ms')!.value, '60000')
      assert.equal(configs.get('cleanup.policy')!.configSource, DEFAULT_CONFIG)

      await admin.deleteTopics({ topics: ['plat'] })
      assert.deepEqual(await admin.listTopics(), [])
      await assert.rejects(admin.deleteTopics({ topics: ['plat'] }))
    } finally {
      await admin.close()
    }
  })
})

test('kcat -L lists a topic created through the admin API', async () => {
  await withBroker(async (cluster) => {
    await withKafkajsAdmin(cluster.bootstrapServers, (admin) =>
      admin.createTopics({ topics: [{ topic: 'seen-by-kcat', numPartitions: 4 }] }),
    )
    const result = await run('kcat', ['-b', cluster.bootstrapServers, '-L', '-J', '-t', 'seen-by-kcat'])
    assert.equal(result.code, 0, result.stderr)
    const metadata = JSON.parse(result.stdout)
    assert.equal(metadata.topics[0].topic, 'seen-by-kcat')
    assert.equal(metadata.topics[0].partitions.length, 4)
  })
})

const PYTHON_ADMIN = `
import json, sys
from confluent_kafka.admin import AdminClient, NewTopic, ConfigResource
from confluent_kafka import KafkaException
admin = AdminClient({'bootstrap.servers': sys.argv[1]})
out = {}
def outcome(future):
    try:
        future.result()
        return 'ok'
    except KafkaException as e:
        return e.args[0].name()
fs = admin.create_topics([NewTopic('py-topic', num_partitions=3, replication_factor=1, config={'retention.ms': '123456'}),
                          NewTopic('py-bad', num_partitions=1, replication_factor=5)], operation_timeout=5)
out['create'] = {t: outcome(f) for t, f in fs.items()}
res = ConfigResource('topic', 'py-topic')
entries = list(admin.describe_configs([res]).values())[0].result()
out['retention.ms'] = [entries['retention.ms'].value, entries['retention.ms'].source]
out['alter'] = outcome(list(admin.alter_configs([ConfigResource('topic', 'py-topic', set_config={'retention.ms': '654321', 'min.insync.replicas': '1'})]).values())[0])
entries = list(admin.describe_configs([res]).values())[0].result()
out['after'] = [entries['retention.ms'].value, entries['min.insync.replicas'].value, entries['min.insync.replicas'].source]
out['bad_alter'] = outcome(list(admin.alter_configs([ConfigResource('topic', 'py-topic', set_config={'min.insync.replicas': '0'})]).values())[0])
out['delete'] = {t: outcome(f) for t, f in admin.delete_topics(['py-topic', 'py-missing'], operation_timeout=5).items()}
out['topics'] = sorted(admin.list_topics(timeout=5).topics.keys())
print(json.dumps(out))
`

test('python3-confluent-kafka AdminClient: create, describe, alter, delete', async () => {
  await withBroker(async (cluster) => {
    const result = await run('/usr/bin/python3', ['-c', PYTHON_ADMIN, cluster.bootstrapServers])
    assert.equal(result.code, 0, result.stderr)
    const out = JSON.parse(result.stdout)
    assert.deepEqual(out.create, { 'py-topic': 'ok', 'py-bad': 'INVALID_REPLICATION_FACTOR' })
    assert.deepEqual(out['retention.ms'], ['123456', TOPIC_CONFIG])
    assert.equal(out.alter, 'ok')
    assert.deepEqual(out.after, ['654321', '1', TOPIC_CONFIG])
    assert.equal(out.bad_alter, 'INVALID_CONFIG')
    assert.deepEqual(out.delete, { 'py-topic': 'ok', 'py-missing': 'UNKNOWN_TOPIC_OR_PART' })
    assert.deepEqual(out.topics, [])
  })
})

test('topics, their configs and dynamic broker configs survive a restart on the same data dir', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-admin-'))
  try {
    let cluster = await startBroker({ dataDir })
    try {
      await withKafkajsAdmin(cluster.bootstrapServers, async (admin) => {
        await admin.createTopics({
          topics: [
            { topic: 'durable', numPartitions: 2, configEntries: [{ name: 'retention.ms', value: '5000' }] },
          ],
        })
        await admin.alterConfigs({
          validateOnly: false,
          resources: [
            {
              type: ConfigResourceTypes.BROKER,
              name: '0',
              configEntries: [{ name: 'log.retention.bytes', value: '777' }],
            },
          ],
        })
      })
    } finally {
      await cluster.stop()
    }
    cluster = await startBroker({ dataDir })
    try {
      await withKafkajsAdmin(cluster.bootstrapServers, async (admin) => {
        const metadata = await admin.fetchTopicMetadata({ topics: ['durable'] })
        assert.equal(metadata.topics[0].partitions.length, 2)
        const { resources } = await admin.describeConfigs({
          includeSynonyms: false,
          resources: [
            {
              type: ConfigResourceTypes.TOPIC,
              name: 'durable',
              configNames: ['retention.ms', 'retention.bytes'],
            },
          ],
        })
        const entries = new Map(resources[0].configEntries.map((e) => [e.configName, e]))
        assert.equal(entries.get('retention.ms')!.configValue, '5000')
        assert.equal(entries.get('retention.bytes')!.configValue, '777')
        assert.equal(entries.get('retention.bytes')!.configSource, DYNAMIC_BROKER_CONFIG)
      })
    } finally {
      await cluster.stop()
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true })
  }
})

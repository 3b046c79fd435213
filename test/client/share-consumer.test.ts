/**
 * tidelog's ShareConsumer (KIP-932) over real sockets, against a tidelog broker and against
 * Apache Kafka 4.4, the same run on each: two share consumers of one group, explicit
 * acknowledgement, one partition of records keyed by what to answer:
 *   accept-*        ACCEPT: delivered once;
 *   release-once    RELEASE on its first delivery, ACCEPT on the second (count 2);
 *   reject          REJECT: never delivered again;
 *   release-always  RELEASE every time: delivered group.share.delivery.count.limit times, then
 *                   archived;
 *   renew           RENEW (ShareAcknowledge v2, KIP-1222), then ACCEPT before the next poll:
 *                   delivered once.
 * Consumer 1 sends its answers with commitSync (ShareAcknowledge), consumer 2 with its next
 * poll (piggybacked on ShareFetch). Both consumers get records (max.poll.records 2,
 * record_limit), both are members while open (ShareGroupDescribe), and close leaves the
 * group (epoch -1). Both brokers must show the same delivery counts per record.
 * Implicit mode (tidelog only): the next poll accepts, and the accepted records never come back.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { KafkaClient } from '../../src/client/client.js'
import { Consumer } from '../../src/client/consumer.js'
import { KafkaProtocolError } from '../../src/client/errors.js'
import { findGroupCoordinator } from '../../src/client/find-coordinator.js'
import { Producer } from '../../src/client/producer.js'
import { ShareConsumerStateError } from '../../src/client/share/errors.js'
import {
  type AcknowledgementResult,
  type AcknowledgeType,
  ShareConsumer,
  type ShareConsumerRecord,
} from '../../src/client/share-consumer.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { IncrementalAlterConfigsResponse } from '../../src/protocol/generated/apis/incremental-alter-configs.js'
import type { ShareGroupDescribeResponse } from '../../src/protocol/generated/apis/share-group-describe.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import { type Cluster, startCluster } from '../helpers/cluster.js'
import { type KafkaReference, startKafkaReference } from '../helpers/kafka-reference.js'
import { waitUntil } from '../helpers/wait.js'

const DELIVERY_COUNT_LIMIT = 3
const ACCEPTED = 8
const KEYS = [
  ...Array.from({ length: ACCEPTED }, (_, i) => `accept-${i}`),
  'release-once',
  'reject',
  'release-always',
  'renew',
]
/** ConfigResource type GROUP (KIP-848's group configs). */
const GROUP_RESOURCE = 32

const deliveries: Record<string, Record<string, number[]>> = {}

function answerFor(record: ShareConsumerRecord): AcknowledgeType {
  const key = record.key?.toString()
  if (key === 'release-once') return record.deliveryCount === 1 ? 'RELEASE' : 'ACCEPT'
  if (key === 'reject') return 'REJECT'
  if (key === 'release-always') return 'RELEASE'
  if (key === 'renew') return 'RENEW'
  return 'ACCEPT'
}

function complete(delivered: Record<string, number[]>): boolean {
  return (
    KEYS.every((k) => delivered[k] !== undefined) &&
    delivered['release-once'].length >= 2 &&
    delivered['release-always'].length >= DELIVERY_COUNT_LIMIT
  )
}

/** share.auto.offset.reset=earliest for the group, so its share-partition starts at offset 0. */
async function startGroupAtEarliest(client: KafkaClient, groupId: string): Promise<void> {
  const response = await client.request<IncrementalAlterConfigsResponse>(
    'any',
    ApiKey.IncrementalAlterConfigs,
    () => ({
      resources: [
        {
          resourceType: GROUP_RESOURCE,
          resourceName: groupId,
          configs: [{ name: 'share.auto.offset.reset', configOperation: 0, value: 'earliest' }],
        },
      ],
      validateOnly: false,
    }),
  )
  assert.deepEqual(
    response.responses.map((r) => [r.errorCode, r.errorMessage]),
    [[ErrorCode.NONE, null]],
  )
}

async function describeMembers(
  client: KafkaClient,
  groupId: string,
): Promise<{ state: string; members: string[] }> {
  const coordinator = await findGroupCoordinator(client, groupId)
  const response = await client.request<ShareGroupDescribeResponse>(
    coordinator,
    ApiKey.ShareGroupDescribe,
    () => ({
      groupIds: [groupId],
      includeAuthorizedOperations: false,
    }),
  )
  const group = response.groups[0]
  assert.equal(group.errorCode, ErrorCode.NONE, group.errorMessage ?? '')
  return { state: group.groupState, members: group.members.map((m) => m.memberId).sort() }
}

/** The explicit-mode run; returns delivery counts per key. */
async function run(bootstrap: string, label: string): Promise<Record<string, number[]>> {
  const topic = `share-client-${label}`
  const groupId = `share-client-group-${label}`
  const client = new KafkaClient({ bootstrapServers: bootstrap })
  const admin = new Admin({ client })
  const producer = new Producer({ client, lingerMs: 0 })
  const results: AcknowledgementResult[] = []
  const consumers = [1, 2].map(
    (n) =>
      new ShareConsumer({
        bootstrapServers: bootstrap,
        clientId: `share-${n}`,
        groupId,
        acknowledgementMode: 'explicit',
        maxPollRecords: 2,
        shareAcquireMode: 'record_limit',
        fetchMaxWaitMs: 200,
        acknowledgementCommitCallback: (r) => results.push(...r),
      }),
  )
  try {
    await admin.createTopics([{ topic, numPartitions: 1, replicationFactor: 1 }])
    await startGroupAtEarliest(client, groupId)
    for (const key of KEYS) await producer.send({ topic, key, value: `value-${key}` })
    for (const c of consumers) c.subscribe([topic])
    const delivered: Record<string, number[]> = {}
    const perConsumer = [0, 0]
    const renewed: ShareConsumerRecord[][] = [[], []]
    const pollOnce = async (index: number): Promise<number> => {
      const c = consumers[index]
      // A renewed record stays in flight: answered for good before the next poll.
      for (const record of renewed[index].splice(0)) c.acknowledge(record, 'ACCEPT')
      const records = await c.poll(200)
      for (const record of records) {
        const key = record.key?.toString() ?? ''
        delivered[key] = [...(delivered[key] ?? []), record.deliveryCount]
        perConsumer[index]++
        c.acknowledge(record, answerFor(record))
        if (answerFor(record) === 'RENEW') renewed[index].push(record)
      }
      if (index === 0 && records.length > 0)
        for (const r of await c.commitSync())
          assert.equal(r.error, null, `commitSync ${r.topic}-${r.partition}`)
      return records.length
    }
    await waitUntil(
      'every expected delivery',
      45_000,
      async () => {
        for (let i = 0; i < consumers.length; i++) await pollOnce(i)
        return complete(delivered)
      },
      0,
    )
    // Nothing more may come: accepted, rejected and archived records are done.
    const quietUntilMs = Date.now() + 2_500
    let extra = 0
    while (Date.now() < quietUntilMs) for (let i = 0; i < consumers.length; i++) extra += await pollOnce(i)
    assert.equal(extra, 0, `no further deliveries: ${JSON.stringify(delivered)}`)
    for (const c of consumers) await c.commitSync()
    assert.ok(perConsumer[0] > 0 && perConsumer[1] > 0, `both consumers got records: ${perConsumer}`)
    assert.deepEqual(
      results.filter((r) => r.error !== null),
      [],
      'every acknowledgement applied',
    )
    assert.ok(results.length > 0, 'acknowledgement results reported')
    const ids = consumers.map((c) => c.memberId).sort()
    assert.deepEqual((await describeMembers(client, groupId)).members, ids, 'both consumers are members')
    await consumers[0].close()
    await waitUntil('the closed consumer left', 20_000, async () => {
      return (await describeMembers(client, groupId)).members.join() === consumers[1].memberId
    })
    await consumers[1].close()
    await waitUntil('the group is empty', 20_000, async () => {
      const group = await describeMembers(client, groupId)
      return group.members.length === 0 && group.state === 'Empty'
    })
    return delivered
  } finally {
    for (const c of consumers) await c.close()
    await producer.close()
    await admin.close()
    client.close()
  }
}

function assertSemantics(delivered: Record<string, number[]>): void {
  for (let i = 0; i < ACCEPTED; i++)
    assert.deepEqual(delivered[`accept-${i}`], [1], `accept-${i} delivered once`)
  assert.deepEqual(delivered['release-once'], [1, 2], 'a released record is delivered again, counted')
  assert.deepEqual(delivered.reject, [1], 'a rejected record is never delivered again')
  assert.deepEqual(delivered.renew, [1], 'a renewed, then accepted record is delivered once')
  assert.deepEqual(
    delivered['release-always'],
    Array.from({ length: DELIVERY_COUNT_LIMIT }, (_, i) => i + 1),
    'archived at the delivery count limit',
  )
}

describe('ShareConsumer (KIP-932)', () => {
  // Kafka's JVM starts while the tidelog runs go (about 20 s of the file's wall time saved).
  let kafkaStarting: Promise<KafkaReference> | undefined
  before(() => {
    kafkaStarting = startKafkaReference({
      nodes: 1,
      properties: {
        'group.share.delivery.count.limit': DELIVERY_COUNT_LIMIT,
        'group.share.heartbeat.interval.ms': 1000,
        'group.share.min.heartbeat.interval.ms': 1000,
      },
      features: { 'share.version': 1 },
    })
    // Awaited by the reference's tests; a failure to start is theirs to report.
    kafkaStarting.catch(() => undefined)
  })
  after(async () => {
    await (await kafkaStarting?.catch(() => undefined))?.stop()
  })

  describe('tidelog', () => {
    let cluster: Cluster | undefined
    before(async () => {
      cluster = await startCluster({
        brokers: 1,
        port: 0,
        properties: {
          'group.share.delivery.count.limit': DELIVERY_COUNT_LIMIT,
          'group.share.heartbeat.interval.ms': 500,
          'offsets.topic.num.partitions': 3,
        },
      })
    })
    after(async () => {
      await cluster?.stop()
    })

    it('shares a partition, redelivers, rejects and archives', { timeout: 90_000 }, async () => {
      assert.ok(cluster)
      deliveries.tidelog = await run(cluster.bootstrapServers, 'tidelog')
      assertSemantics(deliveries.tidelog)
    })

    it('a classic group of the same id: poll throws GROUP_ID_NOT_FOUND', { timeout: 60_000 }, async () => {
      assert.ok(cluster)
      await wrongGroupTypeRun(cluster.bootstrapServers, 'tidelog')
    })

    it('RENEW keeps a record from another member past its lock duration', { timeout: 60_000 }, async () => {
      await renewRun()
    })

    it('max.poll.records caps a poll; the rest of a fetched batch comes next', {
      timeout: 60_000,
    }, async () => {
      assert.ok(cluster)
      await maxPollRecordsRun(cluster.bootstrapServers)
    })

    it('implicit mode accepts at the next poll; acknowledge() is refused', { timeout: 60_000 }, async () => {
      assert.ok(cluster)
      await implicitRun(cluster.bootstrapServers)
    })
  })

  describe('Apache Kafka 4.4 (the reference)', () => {
    let kafka: KafkaReference | undefined
    before(async () => {
      kafka = await kafkaStarting
    })

    it('shares a partition, redelivers, rejects and archives the same', { timeout: 120_000 }, async () => {
      assert.ok(kafka)
      deliveries.kafka = await run(kafka.bootstrap, 'kafka')
      assertSemantics(deliveries.kafka)
    })

    it('a classic group of the same id: poll throws GROUP_ID_NOT_FOUND', { timeout: 60_000 }, async () => {
      assert.ok(kafka)
      await wrongGroupTypeRun(kafka.bootstrap, 'kafka')
    })
  })

  it('shows the same delivery counts per record on both', () => {
    assert.ok(deliveries.tidelog && deliveries.kafka, 'both runs finished')
    assert.deepEqual(deliveries.tidelog, deliveries.kafka)
  })
})

async function implicitRun(bootstrap: string): Promise<void> {
  const topic = 'share-client-implicit'
  const groupId = 'share-client-implicit-group'
  const client = new KafkaClient({ bootstrapServers: bootstrap })
  const admin = new Admin({ client })
  const producer = new Producer({ client, lingerMs: 0 })
  const results: AcknowledgementResult[] = []
  const first = new ShareConsumer({
    bootstrapServers: bootstrap,
    groupId,
    fetchMaxWaitMs: 200,
    acknowledgementCommitCallback: (r) => results.push(...r),
  })
  let second: ShareConsumer | undefined
  try {
    await admin.createTopics([{ topic, numPartitions: 1, replicationFactor: 1 }])
    await startGroupAtEarliest(client, groupId)
    for (let i = 0; i < 5; i++) await producer.send({ topic, value: `v${i}` })
    first.subscribe([topic])
    const got: ShareConsumerRecord[] = []
    await waitUntil(
      'the records',
      30_000,
      async () => {
        got.push(...(await first.poll(200)))
        return got.length >= 5
      },
      0,
    )
    assert.deepEqual(
      got.map((r) => r.value?.toString()),
      ['v0', 'v1', 'v2', 'v3', 'v4'],
    )
    assert.throws(() => first.acknowledge(got[0], 'REJECT'), ShareConsumerStateError)
    // This poll sends ACCEPT for all five with its fetch.
    assert.deepEqual(await first.poll(300), [])
    assert.deepEqual(
      results.map((r) => [r.topic, r.partition, r.offsets, r.error]),
      [[topic, 0, [0, 1, 2, 3, 4], null]],
      'the poll accepted the last poll’s records',
    )
    await first.close()
    second = new ShareConsumer({ bootstrapServers: bootstrap, groupId, fetchMaxWaitMs: 200 })
    second.subscribe([topic])
    await producer.send({ topic, value: 'v5' })
    const after: string[] = []
    await waitUntil(
      'the new record',
      30_000,
      async () => {
        after.push(...(await second!.poll(200)).map((r) => r.value?.toString() ?? ''))
        return after.includes('v5')
      },
      0,
    )
    assert.deepEqual(after, ['v5'], 'accepted records are not delivered again')
  } finally {
    await first.close()
    await second?.close()
    await producer.close()
    await admin.close()
    client.close()
  }
}

/**
 * A broker of its own with a 3 s acquisition lock: consumer A holds a record for 5 s,
 * renewing every 500 ms (commitSync sends each RENEW); consumer B polls all along and gets
 * the next record but never the held one; A then accepts it and nobody gets it again.
 */
async function renewRun(): Promise<void> {
  const cluster = await startCluster({
    brokers: 1,
    port: 0,
    properties: { 'group.share.record.lock.duration.ms': 3000, 'offsets.topic.num.partitions': 3 },
  })
  const bootstrap = cluster.bootstrapServers
  const topic = 'share-client-renew'
  const groupId = 'share-client-renew-group'
  const client = new KafkaClient({ bootstrapServers: bootstrap })
  const admin = new Admin({ client })
  const producer = new Producer({ client, lingerMs: 0 })
  const options = { bootstrapServers: bootstrap, groupId, fetchMaxWaitMs: 100 } as const
  const holder = new ShareConsumer({ ...options, acknowledgementMode: 'explicit' })
  const other = new ShareConsumer({ ...options, acknowledgementMode: 'explicit' })
  try {
    await admin.createTopics([{ topic, numPartitions: 1, replicationFactor: 1 }])
    await startGroupAtEarliest(client, groupId)
    await producer.send({ topic, value: 'held' })
    holder.subscribe([topic])
    const held: ShareConsumerRecord[] = []
    await waitUntil(
      'the record',
      30_000,
      async () => {
        held.push(...(await holder.poll(200)))
        return held.length > 0
      },
      0,
    )
    assert.equal(held.length, 1)
    other.subscribe([topic])
    // A record for the other member: it does fetch from the partition all along.
    await producer.send({ topic, value: 'free' })
    const got: string[] = []
    const holdUntilMs = Date.now() + 5_000
    while (Date.now() < holdUntilMs) {
      holder.acknowledge(held[0], 'RENEW')
      for (const r of await holder.commitSync()) assert.equal(r.error, null, 'RENEW applied')
      for (const r of await other.poll(500)) {
        got.push(r.value?.toString() ?? '')
        other.acknowledge(r, 'ACCEPT')
      }
    }
    assert.deepEqual(got, ['free'], 'a renewed record stays with its holder; the other member fetches')
    holder.acknowledge(held[0], 'ACCEPT')
    for (const r of await holder.commitSync()) assert.equal(r.error, null, 'ACCEPT applied')
    assert.deepEqual(await other.poll(2_000), [], 'an accepted record is not delivered again')
  } finally {
    await holder.close()
    await other.close()
    await producer.close()
    await admin.close()
    client.close()
    await cluster.stop()
  }
}

/** A share consumer joining a live classic group's id gets the coordinator's refusal from poll, as a Kafka error code. */
async function wrongGroupTypeRun(bootstrap: string, label: string): Promise<void> {
  const topic = `share-client-classic-${label}`
  const groupId = `share-client-classic-group-${label}`
  const admin = new Admin({ bootstrapServers: bootstrap })
  const classic = new Consumer({ bootstrapServers: bootstrap, groupId, autoOffsetReset: 'earliest' })
  const share = new ShareConsumer({ bootstrapServers: bootstrap, groupId, fetchMaxWaitMs: 100 })
  try {
    await admin.createTopics([{ topic, numPartitions: 1, replicationFactor: 1 }])
    classic.subscribe([topic])
    await waitUntil(
      'the classic member',
      30_000,
      async () => {
        await classic.poll(200)
        return classic.assignment().length === 1
      },
      0,
    )
    share.subscribe([topic])
    let thrown: unknown
    await waitUntil(
      'the refusal',
      30_000,
      async () => {
        try {
          await share.poll(200)
          return false
        } catch (error) {
          thrown = error
          return true
        }
      },
      0,
    )
    assert.ok(thrown instanceof KafkaProtocolError, String(thrown))
    assert.equal(thrown.errorCode, ErrorCode.GROUP_ID_NOT_FOUND)
    assert.equal(thrown.code, 'ERR_KAFKA_GROUP_ID_NOT_FOUND')
    assert.match(thrown.message, /is not a share group/)
  } finally {
    await share.close()
    await classic.close()
    await admin.close()
  }
}

/** Six records in one batch; batch_optimized acquires the whole batch, and each poll returns at most two. */
async function maxPollRecordsRun(bootstrap: string): Promise<void> {
  const topic = 'share-client-max-poll'
  const groupId = 'share-client-max-poll-group'
  const client = new KafkaClient({ bootstrapServers: bootstrap })
  const admin = new Admin({ client })
  const producer = new Producer({ client, lingerMs: 50 })
  const consumer = new ShareConsumer({
    bootstrapServers: bootstrap,
    groupId,
    acknowledgementMode: 'explicit',
    maxPollRecords: 2,
    fetchMaxWaitMs: 200,
  })
  try {
    await admin.createTopics([{ topic, numPartitions: 1, replicationFactor: 1 }])
    await startGroupAtEarliest(client, groupId)
    const sends = Array.from({ length: 6 }, (_, i) => producer.send({ topic, value: `v${i}` }))
    await producer.flush()
    const offsets = (await Promise.all(sends)).map((m) => m.offset)
    assert.deepEqual(offsets, [0, 1, 2, 3, 4, 5])
    consumer.subscribe([topic])
    const sizes: number[] = []
    const values: string[] = []
    await waitUntil(
      'six records',
      30_000,
      async () => {
        const records = await consumer.poll(200)
        if (records.length > 0) sizes.push(records.length)
        for (const r of records) {
          values.push(r.value?.toString() ?? '')
          consumer.acknowledge(r, 'ACCEPT')
        }
        return values.length >= 6
      },
      0,
    )
    assert.deepEqual(values, ['v0', 'v1', 'v2', 'v3', 'v4', 'v5'])
    assert.ok(
      sizes.every((n) => n <= 2),
      `polls returned ${sizes}`,
    )
    for (const r of await consumer.commitSync()) assert.equal(r.error, null)
  } finally {
    await consumer.close()
    await producer.close()
    await admin.close()
    client.close()
  }
}

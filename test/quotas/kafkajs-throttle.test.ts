/**
 * Client quotas against kafkajs over real sockets: a producer_byte_rate of 1 MiB/s holds a
 * producer sending as fast as it can within 10% of it, the throttle time reaches the client
 * (kafkajs' client-side throttling, KIP-219), and another client id is not slowed; a
 * consumer_byte_rate holds a consumer likewise.
 * The rate is measured over whole quota periods (period-rate.ts): at least two, in a 27 s run.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { type AlterClientQuotasResponse, ApiKey } from '../../src/protocol/generated/index.js'
import { type Cluster, startBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { type Delivery, periodRate } from './period-rate.js'

const QUOTA_BYTES_PER_SECOND = 1_048_576
/**
 * quota.window.num for these brokers: 6 one-second windows instead of Kafka's 11 make a quota
 * period (one burst to the next) 6 s, so a run takes 27 s rather than 44.
 */
const QUOTA_WINDOWS = 6
const PERIOD_MS = QUOTA_WINDOWS * 1000
/** Bursts come at about 0, 6, 12 and 18 s: three periods fit, two are needed (9 s to spare). */
const RUN_MS = 4.5 * PERIOD_MS
const VALUE = Buffer.alloc(16_384, 'q')

let cluster: Cluster

before(async () => {
  cluster = await startBroker({ port: 0, properties: { 'quota.window.num': QUOTA_WINDOWS } })
})
after(async () => {
  await cluster.stop()
})

async function setQuota(clientId: string, key: string, value: number): Promise<void> {
  const raw = await RawClient.connect(Number(cluster.bootstrapServers.split(':')[1]))
  try {
    const response = await rawCall<AlterClientQuotasResponse>(raw, ApiKey.AlterClientQuotas, 1, {
      entries: [
        { entity: [{ entityType: 'client-id', entityName: clientId }], ops: [{ key, value, remove: false }] },
      ],
      validateOnly: false,
    })
    assert.equal(response.entries[0].errorCode, ErrorCode.NONE)
  } finally {
    raw.close()
  }
}

/** kafkajs with its debug log searched for the throttle times it honoured. */
function kafka(clientId: string, throttleTimesMs: number[]): Kafka {
  return new Kafka({
    clientId,
    brokers: [cluster.bootstrapServers],
    logLevel: logLevel.DEBUG,
    logCreator: () => (entry) => {
      const match = /Client side throttling in effect for (\d+)ms/.exec(entry.log.message)
      if (match) throttleTimesMs.push(Number(match[1]))
    },
  })
}

async function createTopic(topic: string): Promise<void> {
  const admin = kafka('quota-admin', []).admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true })
  await admin.disconnect()
}

/**
 * Sends 64 KiB batches back to back for `durationMs`; returns when each was acknowledged.
 * Small requests keep each throttle under a window: Kafka's Rate pads windows without a
 * sample, so a client recording less than once a window is measured up to 10% short.
 */
async function produceFlat(k: Kafka, topic: string, durationMs: number): Promise<Delivery[]> {
  const producer = k.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const acks: Delivery[] = []
  const startMs = Date.now()
  try {
    while (Date.now() - startMs < durationMs) {
      const messages = Array.from({ length: 4 }, () => ({ value: VALUE }))
      await producer.send({ topic, acks: 1, messages })
      acks.push({ atMs: Date.now() - startMs, bytes: messages.length * VALUE.length })
    }
  } finally {
    await producer.disconnect()
  }
  return acks
}

function rateBetween(samples: readonly Delivery[], fromMs: number, toMs: number): number {
  const bytes = samples.filter((s) => s.atMs > fromMs && s.atMs <= toMs).reduce((sum, s) => sum + s.bytes, 0)
  return bytes / ((toMs - fromMs) / 1000)
}

/** Asserts the deliveries were held within 10% of the quota over at least two quota periods. */
function assertHeld(
  t: { diagnostic(message: string): void },
  who: string,
  deliveries: readonly Delivery[],
): void {
  const held = periodRate(deliveries, QUOTA_BYTES_PER_SECOND, 2)
  assert.ok(held !== null, `${who}: fewer than two quota periods (no throttling?)`)
  const mib = held.bytesPerSecond / QUOTA_BYTES_PER_SECOND
  t.diagnostic(
    `${who}: ${mib.toFixed(3)} MiB/s over ${held.periods} periods (${held.fromMs}-${held.toMs} ms)`,
  )
  assert.ok(Math.abs(mib - 1) < 0.1, `${who} ran at ${mib.toFixed(3)} MiB/s`)
}

test('a producer_byte_rate of 1 MiB/s holds a kafkajs producer within 10% and another client id runs free', async (t) => {
  await createTopic('quota-produce')
  await setQuota('throttled-producer', 'producer_byte_rate', QUOTA_BYTES_PER_SECOND)
  const throttled: number[] = []
  const free: number[] = []
  const [limited, unlimited] = await Promise.all([
    produceFlat(kafka('throttled-producer', throttled), 'quota-produce', RUN_MS),
    // The other client runs while the first is throttled, on its own connection.
    new Promise<Delivery[]>((resolve, reject) =>
      setTimeout(
        () => produceFlat(kafka('free-producer', free), 'quota-produce', 5000).then(resolve, reject),
        PERIOD_MS + 2000,
      ),
    ),
  ])
  assertHeld(t, 'throttled producer', limited)
  const freeRate = rateBetween(unlimited, 0, 5000)
  t.diagnostic(`free producer: ${(freeRate / QUOTA_BYTES_PER_SECOND).toFixed(1)} MiB/s`)
  assert.ok(throttled.length > 0 && throttled.every((ms) => ms > 0), 'kafkajs honoured throttle times')
  // Well above the other's quota however loaded the machine is (tens of MiB/s when idle).
  assert.ok(freeRate > 1.5 * QUOTA_BYTES_PER_SECOND, `free producer ran at ${freeRate} B/s`)
  assert.deepEqual(free, [], 'the other client id was never throttled')
  assert.equal(cluster.brokers[0].clientQuotas.produce.observedRate('ANONYMOUS', 'free-producer', 0), 0)
})

test('a consumer_byte_rate of 1 MiB/s holds a kafkajs consumer within 10%', async (t) => {
  await createTopic('quota-fetch')
  // Enough for the first 5 s burst and the measured periods (36 MiB for 29), from an unlimited
  // client.
  const seeder = kafka('seeder', []).producer()
  await seeder.connect()
  // Batches of 64 KiB: a fetch returns at least one whole batch, and small fetches keep each
  // throttle under a window (see produceFlat).
  for (let i = 0; i < 72; i++)
    await Promise.all(
      Array.from({ length: 8 }, () =>
        seeder.send({
          topic: 'quota-fetch',
          acks: 1,
          messages: Array.from({ length: 4 }, () => ({ value: VALUE })),
        }),
      ),
    )
  await seeder.disconnect()
  await setQuota('throttled-consumer', 'consumer_byte_rate', QUOTA_BYTES_PER_SECOND)

  const throttled: number[] = []
  const consumer = kafka('throttled-consumer', throttled).consumer({
    groupId: 'quota-group',
    maxWaitTimeInMs: 100,
    // Fetches of 64 KiB rather than 1 MiB, for the reason given at produceFlat.
    maxBytesPerPartition: 65_536,
  })
  await consumer.connect()
  await consumer.subscribe({ topic: 'quota-fetch', fromBeginning: true })
  const received: Delivery[] = []
  let startMs = 0
  await consumer.run({
    eachBatch: async ({ batch }) => {
      if (startMs === 0) startMs = Date.now()
      const bytes = batch.messages.reduce((sum, m) => sum + (m.value?.length ?? 0), 0)
      received.push({ atMs: Date.now() - startMs, bytes })
    },
  })
  await new Promise((resolve) => setTimeout(resolve, RUN_MS))
  await consumer.disconnect()
  assertHeld(t, 'throttled consumer', received)
  assert.ok(throttled.length > 0, 'kafkajs honoured the fetch throttle times')
})

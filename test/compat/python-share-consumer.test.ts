/**
 * Issue 33 item 2: librdkafka's share consumer (KIP-932). librdkafka 2.16 has one (in
 * "Preview", as it logs), reached here through confluent-kafka 2.16.1's `ShareConsumer`
 * from PyPI (.build/pyenv). test/compat/python/share_consumer.py runs two share consumers of
 * one group with explicit acknowledgements on one partition: one record RELEASEd once, one
 * REJECTed, the rest ACCEPTed. The same program runs against tidelog and Apache Kafka 4.4;
 * on each, every record ends ACCEPTed or REJECTed exactly once, the released one comes back
 * with delivery count 2, the rejected one never again, and the two brokers agree on what
 * was delivered with which count.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { type Cluster, startCluster } from '../helpers/cluster.js'
import { pypiPython, repoRoot } from '../helpers/compat-clients.js'
import { type KafkaReference, startKafkaReference } from '../helpers/kafka-reference.js'

const RECORDS = 20

interface Delivery {
  readonly consumer: string
  readonly value?: string
  readonly offset?: number
  readonly deliveryCount?: number
  readonly ack?: 'ACCEPT' | 'RELEASE' | 'REJECT'
  readonly error?: string
}

async function run(bootstrap: string, target: string): Promise<Delivery[]> {
  const python = pypiPython()
  const program = join(repoRoot(), 'test', 'compat', 'python', 'share_consumer.py')
  const topic = `share-ck-${target}`
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(
      python,
      [program, bootstrap, topic, `share-ck-group-${target}`],
      { timeout: 180_000, killSignal: 'SIGKILL', maxBuffer: 4 * 1024 * 1024 },
      (error, out, err) => {
        if (error)
          reject(new Error(`share_consumer.py failed: ${error.message}\n${String(err).slice(-4000)}`))
        else resolve(String(out))
      },
    )
  })
  const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as { deliveries: Delivery[] }
  return result.deliveries
}

/** Each record finished exactly once; v3 released once then accepted; v5 rejected once. */
function assertSemantics(deliveries: readonly Delivery[]): void {
  assert.deepEqual(
    deliveries.filter((d) => d.error !== undefined),
    [],
    'no delivery errors',
  )
  const finished = new Map<string, number>()
  for (const d of deliveries)
    if (d.ack !== 'RELEASE') finished.set(d.value!, (finished.get(d.value!) ?? 0) + 1)
  for (let i = 0; i < RECORDS; i++) assert.equal(finished.get(`v${i}`), 1, `v${i} accepted or rejected once`)
  assert.deepEqual(
    deliveries.filter((d) => d.value === 'v3').map((d) => [d.deliveryCount, d.ack]),
    [
      [1, 'RELEASE'],
      [2, 'ACCEPT'],
    ],
    'the released record comes back once, with delivery count 2',
  )
  assert.deepEqual(
    deliveries.filter((d) => d.value === 'v5').map((d) => [d.deliveryCount, d.ack]),
    [[1, 'REJECT']],
    'the rejected record is not delivered again',
  )
  assert.equal(deliveries.length, RECORDS + 1)
  for (const d of deliveries) assert.equal(d.offset, Number(d.value!.slice(1)), `${d.value} at its offset`)
}

/** What was delivered with which count and answer, whichever consumer got it. */
function summary(deliveries: readonly Delivery[]): string[] {
  return deliveries.map((d) => `${d.value} ${d.deliveryCount} ${d.ack}`).sort()
}

describe("librdkafka 2.16's share consumer (confluent-kafka 2.16.1)", () => {
  const seen: { tidelog?: Delivery[]; kafka?: Delivery[] } = {}

  describe('tidelog', () => {
    let cluster: Cluster | undefined
    before(async () => {
      cluster = await startCluster({ brokers: 1, port: 0, properties: { 'offsets.topic.num.partitions': 3 } })
    })
    after(async () => {
      await cluster?.stop()
    })

    it('delivers, redelivers a released record and drops a rejected one', { timeout: 240_000 }, async () => {
      assert.ok(cluster)
      seen.tidelog = await run(cluster.bootstrapServers, 'tidelog')
      assertSemantics(seen.tidelog)
    })
  })

  describe('Apache Kafka 4.4 (the reference)', () => {
    let kafka: KafkaReference | undefined
    before(async () => {
      kafka = await startKafkaReference({ nodes: 1 })
    })
    after(async () => {
      await kafka?.stop()
    })

    it('does the same', { timeout: 240_000 }, async () => {
      assert.ok(kafka)
      seen.kafka = await run(kafka.bootstrap, 'kafka')
      assertSemantics(seen.kafka)
    })
  })

  it('delivers the same records with the same counts on both', () => {
    assert.ok(seen.tidelog && seen.kafka, 'both runs finished')
    assert.deepEqual(summary(seen.tidelog), summary(seen.kafka))
  })
})

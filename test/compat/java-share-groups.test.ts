/**
 * Issue 33 item 2, share groups (KIP-932) with kafka-clients 4.4's KafkaShareConsumer
 * (test/compat/java/ShareGroups.java): two share consumers on one topic, every record
 * delivered, ACCEPT, a RELEASE delivered again, a REJECTed record never again, a record
 * released at group.share.delivery.count.limit archived; the same run against Apache Kafka
 * 4.4 must deliver the same delivery counts per record.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Cluster } from '../../src/server/cluster.js'
import { startCluster } from '../helpers/cluster.js'
import { compileJava, exec, JVM_FLAGS, parseChecks } from '../helpers/java.js'
import { type KafkaReference, startKafkaReference } from '../helpers/kafka-reference.js'

const DELIVERY_COUNT_LIMIT = 3

let classpath = ''
const deliveries: Record<string, string[]> = {}

async function run(bootstrap: string): Promise<string[]> {
  const args = [...JVM_FLAGS, '-cp', classpath, 'ShareGroups', bootstrap, 'share-in', 'share-group']
  const { stdout, stderr } = await exec('java', [...args, String(DELIVERY_COUNT_LIMIT)], 300_000)
  const checks = parseChecks(stdout, stderr)
  const failedChecks = [...checks].filter(([, c]) => !c.pass)
  assert.deepEqual(failedChecks, [], `${stdout}\n${stderr.slice(-4000)}`)
  assert.match(stdout, /^DESCRIBE state=Stable members=2$/m, stdout)
  console.log(stdout.trim())
  return stdout.split('\n').filter((line) => line.startsWith('DELIVERED '))
}

/** What every run must show, whoever got which record. */
function assertSemantics(lines: readonly string[]): void {
  const byKey = new Map(lines.map((line) => [line.split(' ')[1], line.split(' ').slice(2).map(Number)]))
  for (let i = 0; i < 10; i++) assert.deepEqual(byKey.get(`accept-${i}`), [1], `accept-${i} delivered once`)
  assert.deepEqual(byKey.get('release-once'), [1, 2], 'a released record is delivered again, counted')
  assert.deepEqual(byKey.get('reject'), [1], 'a rejected record is never delivered again')
  assert.deepEqual(
    byKey.get('release-always'),
    Array.from({ length: DELIVERY_COUNT_LIMIT }, (_, i) => i + 1),
    'archived at the delivery count limit',
  )
}

describe('Java kafka-clients 4.4 share consumers (KIP-932)', () => {
  before(async () => {
    classpath = await compileJava('ShareGroups', 'clients')
  })

  describe('tidelog', () => {
    let cluster: Cluster | undefined
    before(async () => {
      cluster = await startCluster({
        brokers: 1,
        port: 0,
        properties: {
          'group.share.delivery.count.limit': DELIVERY_COUNT_LIMIT,
          'offsets.topic.num.partitions': 3,
        },
      })
    })
    after(async () => {
      await cluster?.stop()
    })

    it('delivers, redelivers and archives as Kafka', { timeout: 360_000 }, async () => {
      assert.ok(cluster)
      deliveries.tidelog = await run(cluster.bootstrapServers)
      assertSemantics(deliveries.tidelog)
    })
  })

  describe('Apache Kafka 4.4 (the reference)', () => {
    let kafka: KafkaReference | undefined
    before(async () => {
      kafka = await startKafkaReference({
        nodes: 1,
        properties: { 'group.share.delivery.count.limit': DELIVERY_COUNT_LIMIT },
        features: { 'share.version': 1 },
      })
    })
    after(async () => {
      await kafka?.stop()
    })

    it('delivers, redelivers and archives the same', { timeout: 360_000 }, async () => {
      assert.ok(kafka)
      deliveries.kafka = await run(kafka.bootstrap)
      assertSemantics(deliveries.kafka)
    })
  })

  it('shows the same delivery counts per record on both', () => {
    assert.ok(deliveries.tidelog && deliveries.kafka, 'both runs finished')
    assert.deepEqual(deliveries.tidelog, deliveries.kafka)
  })
})

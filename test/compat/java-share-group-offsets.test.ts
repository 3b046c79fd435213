/**
 * Issue 33 item 2, share group offsets (KIP-932) with kafka-clients 4.4's Admin
 * (test/compat/java/ShareGroupOffsets.java): listShareGroupOffsets, alterShareGroupOffsets,
 * deleteShareGroupOffsets and deleteShareGroups, of an unknown group, of a group with a
 * member (NON_EMPTY_GROUP) and of an empty one, and where delivery starts after an alter.
 * The same program runs against Apache Kafka 4.4: every step must have the same outcome.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Cluster } from '../../src/server/cluster.js'
import { startCluster } from '../helpers/cluster.js'
import { compileJava, exec, JVM_FLAGS, parseChecks } from '../helpers/java.js'
import { type KafkaReference, startKafkaReference } from '../helpers/kafka-reference.js'

let classpath = ''
const steps: Record<string, string[]> = {}

async function run(bootstrap: string): Promise<string[]> {
  const args = [...JVM_FLAGS, '-cp', classpath, 'ShareGroupOffsets', bootstrap, 'offsets-in', 'offsets-group']
  const { stdout, stderr } = await exec('java', args, 300_000)
  console.log(stdout.trim())
  const checks = parseChecks(stdout, stderr)
  const failedChecks = [...checks].filter(([, c]) => !c.pass)
  assert.deepEqual(failedChecks, [], `${stdout}\n${stderr.slice(-4000)}`)
  return stdout.split('\n').filter((line) => line.startsWith('STEP '))
}

/** What every run must show. */
function assertSemantics(lines: readonly string[]): void {
  const outcome = new Map(lines.map((line) => [line.split(' ')[1], line.split(' ').slice(2).join(' ')]))
  assert.equal(outcome.get('list-unknown-group'), '{}')
  assert.equal(outcome.get('delete-unknown-group'), 'GroupIdNotFoundException')
  // An alter makes the share group, empty.
  assert.equal(outcome.get('alter-unknown-group'), 'ok')
  // Assigned, fetched, nothing acknowledged yet: no start offset to show.
  assert.equal(outcome.get('list-with-member'), '{offsets-in-0=null, offsets-in-1=null}')
  assert.equal(outcome.get('alter-with-member'), 'GroupNotEmptyException')
  assert.equal(outcome.get('delete-group-with-member'), 'GroupNotEmptyException')
  assert.equal(outcome.get('alter-empty'), 'ok')
  assert.equal(outcome.get('list-after-alter'), '{offsets-in-0=3/7, offsets-in-1=0/10}')
  assert.equal(outcome.get('consumed'), '17 first={0=3, 1=0}')
  assert.equal(outcome.get('lag-after-consume'), '{offsets-in-0=0, offsets-in-1=0}')
  assert.equal(outcome.get('delete-offsets-empty'), 'ok')
  assert.equal(outcome.get('list-after-delete-offsets'), '{}')
  assert.equal(outcome.get('delete-group-empty'), 'ok')
  assert.equal(outcome.get('list-groups-after-delete'), '[no-such-share-group-2:Share:share:Empty]')
  assert.equal(outcome.get('delete-group-again'), 'GroupIdNotFoundException')
}

describe('Java kafka-clients 4.4 Admin on share group offsets (KIP-932)', () => {
  before(async () => {
    classpath = await compileJava('ShareGroupOffsets', 'clients')
  })

  describe('tidelog', () => {
    let cluster: Cluster | undefined
    before(async () => {
      cluster = await startCluster({ brokers: 1, port: 0, properties: { 'offsets.topic.num.partitions': 3 } })
    })
    after(async () => {
      await cluster?.stop()
    })

    it('lists, alters and deletes share group offsets and groups as Kafka', {
      timeout: 360_000,
    }, async () => {
      assert.ok(cluster)
      steps.tidelog = await run(cluster.bootstrapServers)
      assertSemantics(steps.tidelog)
    })
  })

  describe('Apache Kafka 4.4 (the reference)', () => {
    let kafka: KafkaReference | undefined
    before(async () => {
      kafka = await startKafkaReference({ nodes: 1, features: { 'share.version': 1 } })
    })
    after(async () => {
      await kafka?.stop()
    })

    it('gives the same outcomes', { timeout: 360_000 }, async () => {
      assert.ok(kafka)
      steps.kafka = await run(kafka.bootstrap)
      assertSemantics(steps.kafka)
    })
  })

  it('has the same outcome at every step on both', () => {
    assert.ok(steps.tidelog && steps.kafka, 'both runs finished')
    assert.deepEqual(steps.tidelog, steps.kafka)
  })
})

/**
 * Issue 33 items 2 and 7, group configs (ConfigResource.Type.GROUP) with kafka-clients 4.4's
 * Admin (test/compat/java/GroupConfigs.java): incrementalAlterConfigs sets and deletes
 * them, describeConfigs shows each with its source (DYNAMIC_GROUP_CONFIG or DEFAULT_CONFIG), Kafka's
 * refusals (unknown name, outside the broker's bounds, not a number) arrive as
 * InvalidConfigurationException with Kafka's message, and a share group with
 * share.auto.offset.reset=earliest gets the records written before it joined. The same
 * program runs against Apache Kafka 4.4: every step must have the same outcome.
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
  const args = [...JVM_FLAGS, '-cp', classpath, 'GroupConfigs', bootstrap, 'configs-in', 'configs-group']
  const { stdout, stderr } = await exec('java', args, 180_000)
  console.log(stdout.trim())
  const checks = parseChecks(stdout, stderr)
  const failedChecks = [...checks].filter(([, c]) => !c.pass)
  assert.deepEqual(failedChecks, [], `${stdout}\n${stderr.slice(-4000)}`)
  return stdout.split('\n').filter((line) => line.startsWith('STEP '))
}

/** What every run must show. */
function assertSemantics(lines: readonly string[]): void {
  const outcome = new Map(lines.map((line) => [line.split(' ')[1], line.split(' ').slice(2).join(' ')]))
  assert.equal(
    outcome.get('describe-set'),
    '{consumer.session.timeout.ms=50000/DYNAMIC_GROUP_CONFIG, share.auto.offset.reset=earliest/DYNAMIC_GROUP_CONFIG, share.record.lock.duration.ms=30000/DEFAULT_CONFIG}',
  )
  assert.equal(
    outcome.get('unknown-name'),
    'InvalidConfigurationException: Unknown group config name: no.such.group.config',
  )
  assert.equal(
    outcome.get('below-bound'),
    'InvalidConfigurationException: consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.',
  )
  assert.equal(outcome.get('consumed'), '[0, 1, 2, 3, 4]')
}

describe('Java kafka-clients 4.4 Admin on group configs', () => {
  before(async () => {
    classpath = await compileJava('GroupConfigs', 'clients')
  })

  describe('tidelog', () => {
    let cluster: Cluster | undefined
    before(async () => {
      cluster = await startCluster({ brokers: 1, port: 0, properties: { 'offsets.topic.num.partitions': 3 } })
    })
    after(async () => {
      await cluster?.stop()
    })

    it('sets, describes and applies group configs as Kafka', { timeout: 240_000 }, async () => {
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

    it('gives the same outcomes', { timeout: 240_000 }, async () => {
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

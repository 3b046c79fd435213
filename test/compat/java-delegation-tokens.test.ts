/**
 * Issue 33, delegation tokens (KIP-48) with kafka-clients 4.4 (test/compat/java/DelegationTokens.java):
 * SCRAM users, a token created, described (all, by owner, by another user), renewed (by
 * the owner, capped at its max lifetime by a renewer, refused to a stranger), used to log in
 * over SASL_PLAINTEXT/SCRAM-SHA-256 (tokenauth) by an Admin and a producer, refused for
 * token requests from a token login and from PLAINTEXT, expired at once, and then refused.
 * The same program runs against Apache Kafka 4.4 and every line must be the same.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Cluster } from '../../src/server/cluster.js'
import { startBroker } from '../helpers/cluster.js'
import { compileJava, exec, JVM_FLAGS } from '../helpers/java.js'
import { type KafkaReference, startKafkaReference } from '../helpers/kafka-reference.js'

const SECRET = 'tidelog-delegation-token-test-secret'
let classpath = ''
const outputs: Record<string, string[]> = {}

async function run(plaintext: string, sasl: string): Promise<string[]> {
  const { stdout, stderr } = await exec(
    'java',
    [...JVM_FLAGS, '-cp', classpath, 'DelegationTokens', plaintext, sasl],
    240_000,
  )
  assert.match(stdout, /^DONE$/m, stderr.slice(-4000))
  return stdout
    .split('\n')
    .filter((line) => /^(CREATED|OUTCOME|DESCRIBED|RENEWED|RENEWED-BY-BOB) /.test(line))
}

describe('Java kafka-clients 4.4 delegation tokens', () => {
  before(async () => {
    classpath = await compileJava('DelegationTokens', 'clients')
  })

  describe('tidelog', () => {
    let cluster: Cluster | undefined
    before(async () => {
      cluster = await startBroker({
        properties: {
          listeners: 'PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0',
          'sasl.enabled.mechanisms': 'SCRAM-SHA-256,SCRAM-SHA-512',
          'delegation.token.secret.key': SECRET,
          'offsets.topic.replication.factor': '1',
        },
      })
    })
    after(async () => {
      await cluster?.stop()
    })

    it('creates, describes, renews, authenticates with and expires tokens', async () => {
      assert.ok(cluster)
      const broker = cluster.brokers[0]
      outputs.tidelog = await run(
        broker.listenerAddress('PLAINTEXT'),
        broker.listenerAddress('SASL_PLAINTEXT'),
      )
      console.log(`tidelog:\n${outputs.tidelog.join('\n')}`)
      assert.ok(outputs.tidelog.includes('OUTCOME token-login ok'))
      assert.ok(outputs.tidelog.includes('OUTCOME token-produce ok'))
    })
  })

  describe('Apache Kafka 4.4 (the reference)', () => {
    let kafka: KafkaReference | undefined
    before(async () => {
      kafka = await startKafkaReference({
        nodes: 1,
        saslListener: true,
        properties: { 'delegation.token.secret.key': SECRET },
      })
    })
    after(async () => {
      await kafka?.stop()
    })

    it('gives the same outcomes', async () => {
      assert.ok(kafka?.saslBootstrap)
      outputs.kafka = await run(kafka.bootstrap, kafka.saslBootstrap)
      console.log(`kafka:\n${outputs.kafka.join('\n')}`)
    })
  })

  it('answers every step as Kafka 4.4 does', () => {
    assert.ok(outputs.tidelog && outputs.kafka, 'both runs finished')
    assert.deepEqual(outputs.tidelog, outputs.kafka)
  })
})

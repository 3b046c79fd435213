/**
 * `user` quota entities are the authenticated principal: on SASL_PLAINTEXT the SASL user,
 * on PLAINTEXT ANONYMOUS, as in Kafka. Two users with the same client id are told apart.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kafka, type KafkaConfig, logLevel } from 'kafkajs'
import { startBroker } from '../helpers/cluster.js'
import { PLAIN_JAAS } from '../security/helpers.js'

const QUOTA = 20_000
/** 250 KB over the 10 s minimum window: 25 KB/s against 20 KB/s, a throttle of about 2.5 s. */
const VALUE = Buffer.alloc(250_000, 'u')

test('a user quota applies to that SASL user, and to ANONYMOUS on PLAINTEXT', async () => {
  const cluster = await startBroker({
    port: 0,
    properties: {
      listeners: 'PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0',
      'sasl.enabled.mechanisms': 'PLAIN',
      'listener.name.sasl_plaintext.plain.sasl.jaas.config': PLAIN_JAAS,
    },
  })
  try {
    const broker = cluster.brokers[0]
    await broker.clientQuotaStore.alter([
      { entity: { user: 'alice' }, ops: new Map([['producer_byte_rate', QUOTA]]) },
    ])
    /** Produces one large record as this client and returns the throttle times kafkajs honoured. */
    const produce = async (listener: string, extra: Partial<KafkaConfig>): Promise<number[]> => {
      const throttles: number[] = []
      const kafka = new Kafka({
        clientId: 'same-app',
        brokers: [broker.listenerAddress(listener)],
        logLevel: logLevel.DEBUG,
        logCreator: () => (entry) => {
          const match = /Client side throttling in effect for (\d+)ms/.exec(entry.log.message)
          if (match) throttles.push(Number(match[1]))
        },
        ...extra,
      })
      const producer = kafka.producer()
      await producer.connect()
      try {
        await producer.send({ topic: 'users', acks: 1, messages: [{ value: VALUE }] })
      } finally {
        await producer.disconnect()
      }
      return throttles
    }
    const alice = await produce('SASL_PLAINTEXT', {
      sasl: { mechanism: 'plain', username: 'alice', password: 'alice-secret' },
    })
    const admin = await produce('SASL_PLAINTEXT', {
      sasl: { mechanism: 'plain', username: 'admin', password: 'admin-secret' },
    })
    const anonymousBefore = await produce('PLAINTEXT', {})
    assert.ok(alice.length > 0 && alice[0] > 1000, `alice was throttled: ${alice}`)
    assert.deepEqual(admin, [], 'admin, same client id, has no quota')
    assert.deepEqual(anonymousBefore, [], 'ANONYMOUS has no quota yet')
    assert.equal(broker.clientQuotas.produce.quotaLimit('alice', 'same-app'), QUOTA)

    await broker.clientQuotaStore.alter([
      { entity: { user: 'ANONYMOUS' }, ops: new Map([['producer_byte_rate', QUOTA]]) },
    ])
    const anonymous = await produce('PLAINTEXT', {})
    assert.ok(anonymous.length > 0, 'ANONYMOUS is throttled once it has a quota')
  } finally {
    await cluster.stop()
  }
})

/**
 * Issue 16 item 6: tidelog's own Admin, Producer and Consumer over TLS and SASL against a
 * real broker serving SSL, SASL_SSL and SASL_PLAINTEXT (certificates from openssl), and the
 * typed, unretried error a wrong password gets.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import type { ClientOptions } from '../../src/client/client.js'
import { Consumer, type ConsumerRecord } from '../../src/client/consumer.js'
import { SaslAuthenticationFailedError, SslAuthenticationError } from '../../src/client/errors.js'
import { Producer } from '../../src/client/producer.js'
import type { Cluster } from '../../src/server/cluster.js'
import { makeTestCerts, type TestCerts } from '../helpers/certs.js'
import { startBroker } from '../helpers/cluster.js'
import { createScramUser, securedBrokerProperties } from '../security/helpers.js'

let certs: TestCerts
let cluster: Cluster

before(async () => {
  certs = await makeTestCerts()
  cluster = await startBroker({
    // The SSL listener asks for a client certificate (mTLS); SASL_SSL does not.
    properties: securedBrokerProperties(certs, { 'listener.name.ssl.ssl.client.auth': 'required' }),
  })
  await createScramUser(cluster, 'scram-user', 'scram-secret', ['SCRAM-SHA-256', 'SCRAM-SHA-512'])
})

after(async () => {
  await cluster?.stop()
  await certs?.cleanup()
})

type Security = Pick<ClientOptions, 'ssl' | 'sasl'>

/** Creates the topic, produces three records with acks=all and reads them back in a group. */
async function roundTrip(listener: string, security: Security, topic: string): Promise<string[]> {
  const bootstrapServers = cluster.brokers[0].listenerAddress(listener)
  const admin = new Admin({ bootstrapServers, ...security })
  try {
    await admin.createTopics([{ topic, numPartitions: 1, replicationFactor: 1, configs: {} }])
    await admin.client.waitForTopics([topic], { maxWaitMs: 10000 })
  } finally {
    await admin.close()
  }
  const producer = new Producer({ bootstrapServers, acks: 'all', lingerMs: 0, ...security })
  try {
    await Promise.all(['one', 'two', 'three'].map((value) => producer.send({ topic, value })))
  } finally {
    await producer.close()
  }
  const consumer = new Consumer({
    bootstrapServers,
    groupId: `group-${topic}`,
    autoOffsetReset: 'earliest',
    ...security,
  })
  try {
    consumer.subscribe([topic])
    const records: ConsumerRecord[] = []
    const deadline = Date.now() + 15000
    while (records.length < 3 && Date.now() < deadline) records.push(...(await consumer.poll(200)))
    return records.map((r) => Buffer.from(r.value ?? []).toString())
  } finally {
    await consumer.close()
  }
}

test('Producer and Consumer over SASL_SSL with SCRAM-SHA-512', async () => {
  const values = await roundTrip(
    'SASL_SSL',
    {
      ssl: { ca: certs.caPem },
      sasl: { mechanism: 'scram-sha-512', username: 'scram-user', password: 'scram-secret' },
    },
    'sasl-ssl-scram-512',
  )
  assert.deepEqual(values, ['one', 'two', 'three'])
})

test('Producer and Consumer over SSL with a client certificate (ssl.client.auth=required)', async () => {
  const values = await roundTrip(
    'SSL',
    { ssl: { ca: certs.caPem, cert: certs.clientCertPem, key: certs.clientKeyPem } },
    'over-ssl',
  )
  assert.deepEqual(values, ['one', 'two', 'three'])
  const withoutCertificate = new Admin({
    bootstrapServers: cluster.brokers[0].listenerAddress('SSL'),
    ssl: { ca: certs.caPem },
    retryBackoffMaxMs: 50,
  })
  try {
    await assert.rejects(withoutCertificate.listTopics(), /certificate|closed|reset|alert/i)
  } finally {
    await withoutCertificate.close()
  }
})

test('Producer and Consumer over SASL_PLAINTEXT with PLAIN and SCRAM-SHA-256', async () => {
  for (const sasl of [
    { mechanism: 'plain', username: 'alice', password: 'alice-secret' },
    { mechanism: 'scram-sha-256', username: 'scram-user', password: 'scram-secret' },
  ] as const) {
    const values = await roundTrip('SASL_PLAINTEXT', { sasl }, `sasl-plaintext-${sasl.mechanism}`)
    assert.deepEqual(values, ['one', 'two', 'three'], sasl.mechanism)
  }
})

test('a wrong password is SASL_AUTHENTICATION_FAILED, at once and not retried', async () => {
  const bootstrapServers = cluster.brokers[0].listenerAddress('SASL_SSL')
  for (const mechanism of ['scram-sha-512', 'plain'] as const) {
    const producer = new Producer({
      bootstrapServers,
      ssl: { ca: certs.caPem },
      sasl: { mechanism, username: mechanism === 'plain' ? 'alice' : 'scram-user', password: 'wrong' },
      // Retries would take far longer than the assertion below allows.
      deliveryTimeoutMs: 30000,
      requestTimeoutMs: 20000,
    })
    const startedMs = Date.now()
    try {
      await assert.rejects(producer.send({ topic: 'sasl-ssl-scram-512', value: 'x' }), (error: unknown) => {
        assert.ok(error instanceof SaslAuthenticationFailedError, `${mechanism}: ${String(error)}`)
        assert.equal(error.code, 'ERR_KAFKA_SASL_AUTHENTICATION_FAILED')
        assert.equal(error.retriable, false)
        return true
      })
      assert.ok(Date.now() - startedMs < 5000, `${mechanism}: failed after ${Date.now() - startedMs} ms`)
    } finally {
      await producer.close()
    }
  }
})

test('a broker certificate from an untrusted CA is a TLS error, not retried', async () => {
  const admin = new Admin({
    bootstrapServers: cluster.brokers[0].listenerAddress('SSL'),
    ssl: { ca: certs.strangerCertPem },
  })
  try {
    await assert.rejects(admin.listTopics(), SslAuthenticationError)
  } finally {
    await admin.close()
  }
})

test('bad security options fail at construction', () => {
  assert.throws(
    () =>
      new Admin({
        bootstrapServers: '127.0.0.1:9092',
        sasl: { mechanism: 'gssapi' as 'plain', username: 'u', password: 'p' },
      }),
    /sasl.mechanism must be one of plain, scram-sha-256, scram-sha-512/,
  )
  assert.throws(
    () => new Admin({ bootstrapServers: '127.0.0.1:9092', ssl: { cert: certs.clientCertPem } }),
    /ssl.cert and ssl.key go together/,
  )
})

/**
 * Issue 16: brokers replicate over the inter-broker listener, secured like any other. Three
 * brokers whose inter-broker listener is SASL_SSL (PLAIN, the JAAS username/password) serve
 * an acks=all produce with min.insync.replicas=3, which succeeds only once both followers
 * fetch over TLS and SASL; clients meanwhile use the PLAINTEXT listener and are told only
 * PLAINTEXT endpoints.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { credentialFromSaltedPassword, saltedPassword } from '../../src/security/scram.js'
import { makeTestCerts } from '../helpers/certs.js'
import { startCluster } from '../helpers/cluster.js'

const JAAS =
  'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret";'

test('3 brokers replicate over a SASL_SSL inter-broker listener; acks=all with min.insync.replicas=3 succeeds', async () => {
  const certs = await makeTestCerts()
  const cluster = await startCluster({
    brokers: 3,
    properties: {
      listeners: 'PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0',
      'listener.security.protocol.map': 'PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL',
      'inter.broker.listener.name': 'INTERNAL',
      'sasl.enabled.mechanisms': 'PLAIN',
      'sasl.mechanism.inter.broker.protocol': 'PLAIN',
      'listener.name.internal.plain.sasl.jaas.config': JAAS,
      'ssl.keystore.type': 'PEM',
      'ssl.keystore.key': certs.brokerKeyPem,
      'ssl.keystore.certificate.chain': certs.brokerCertPem,
      'ssl.truststore.type': 'PEM',
      'ssl.truststore.certificates': certs.caPem,
      'replica.fetch.wait.max.ms': 100,
    },
  })
  try {
    const kafka = new Kafka({ brokers: [cluster.bootstrapServers.split(',')[0]], logLevel: logLevel.NOTHING })
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic: 'replicated',
          numPartitions: 2,
          replicationFactor: 3,
          configEntries: [{ name: 'min.insync.replicas', value: '3' }],
        },
      ],
    })
    const described = await admin.describeCluster()
    assert.deepEqual(
      described.brokers.map((b) => `${b.host}:${b.port}`).sort(),
      cluster.brokers.map((b) => b.listenerAddress('PLAINTEXT')).sort(),
    )
    await admin.disconnect()
    const producer = kafka.producer()
    await producer.connect()
    const results = await producer.send({
      topic: 'replicated',
      acks: -1,
      timeout: 20_000,
      messages: Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: `v${i}` })),
    })
    assert.ok(results.every((r) => r.errorCode === 0))
    await producer.disconnect()
    for (const broker of cluster.brokers)
      for (const partition of broker.replicaManager.hostedPartitions)
        if (partition.topic === 'replicated') assert.equal(partition.isr.length, 3)
  } finally {
    await cluster.stop()
    await certs.cleanup()
  }
})

test('2 brokers replicate over SASL_PLAINTEXT with SCRAM-SHA-512 between them (credentials in the store)', async () => {
  const cluster = await startCluster({
    brokers: 2,
    properties: {
      listeners: 'PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0',
      'security.inter.broker.protocol': 'SASL_PLAINTEXT',
      'sasl.enabled.mechanisms': 'SCRAM-SHA-512',
      'sasl.mechanism.inter.broker.protocol': 'SCRAM-SHA-512',
      'listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config':
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";',
      'replica.fetch.wait.max.ms': 100,
      'replica.fetch.backoff.ms': 100,
    },
  })
  try {
    // Kafka's bootstrap: the brokers' own SCRAM user is created before they replicate.
    const salt = Buffer.from('0123456789abcdef')
    await cluster.brokers[0].scramCredentials.alter([
      {
        type: 'upsert',
        user: 'broker',
        mechanism: 'SCRAM-SHA-512',
        credential: credentialFromSaltedPassword(
          'SCRAM-SHA-512',
          saltedPassword('SCRAM-SHA-512', 'broker-secret', salt, 4096),
          salt,
          4096,
        ),
      },
    ])
    const kafka = new Kafka({ brokers: [cluster.bootstrapServers.split(',')[0]], logLevel: logLevel.NOTHING })
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic: 'scram-replicated',
          numPartitions: 1,
          replicationFactor: 2,
          configEntries: [{ name: 'min.insync.replicas', value: '2' }],
        },
      ],
    })
    await admin.disconnect()
    const producer = kafka.producer()
    await producer.connect()
    const [result] = await producer.send({
      topic: 'scram-replicated',
      acks: -1,
      timeout: 20_000,
      messages: [{ value: 'both replicas' }],
    })
    assert.equal(result.errorCode, 0)
    await producer.disconnect()
  } finally {
    await cluster.stop()
  }
})

test('transaction markers and verifications travel on the SASL_SSL inter-broker listener, not the clients’ SASL one', async () => {
  const certs = await makeTestCerts()
  const cluster = await startCluster({
    brokers: 3,
    properties: {
      listeners: 'CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0',
      'listener.security.protocol.map': 'CLIENT:SASL_PLAINTEXT,INTERNAL:SASL_SSL',
      'inter.broker.listener.name': 'INTERNAL',
      'sasl.enabled.mechanisms': 'PLAIN',
      'sasl.mechanism.inter.broker.protocol': 'PLAIN',
      'listener.name.internal.plain.sasl.jaas.config': JAAS,
      'listener.name.client.plain.sasl.jaas.config':
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";',
      'ssl.keystore.type': 'PEM',
      'ssl.keystore.key': certs.brokerKeyPem,
      'ssl.keystore.certificate.chain': certs.brokerCertPem,
      'ssl.truststore.type': 'PEM',
      'ssl.truststore.certificates': certs.caPem,
      'replica.fetch.wait.max.ms': 100,
      'transaction.state.log.num.partitions': 3,
      'offsets.topic.num.partitions': 3,
      'group.initial.rebalance.delay.ms': 0,
    },
  })
  try {
    const kafka = new Kafka({
      brokers: cluster.brokers.map((b) => b.listenerAddress('CLIENT')),
      sasl: { mechanism: 'plain', username: 'alice', password: 'alice-secret' },
      logLevel: logLevel.NOTHING,
    })
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic: 'txn-secure', numPartitions: 3, replicationFactor: 3 }],
    })
    await admin.disconnect()
    const producer = kafka.producer({
      transactionalId: 'secure-txn',
      idempotent: true,
      maxInFlightRequests: 1,
    })
    await producer.connect()
    const transaction = await producer.transaction()
    await transaction.send({
      topic: 'txn-secure',
      messages: Array.from({ length: 9 }, (_, i) => ({ partition: i % 3, value: `v${i}` })),
    })
    await transaction.commit()
    await producer.disconnect()
    // The markers reached every partition's leader: a read_committed consumer reads all 9.
    const consumer = kafka.consumer({ groupId: 'secure-txn-reader', readUncommitted: false })
    await consumer.connect()
    const seen: string[] = []
    try {
      await consumer.subscribe({ topic: 'txn-secure', fromBeginning: true })
      const all = new Promise<void>((resolve) => {
        void consumer.run({
          eachMessage: async ({ message }) => {
            seen.push(message.value?.toString() ?? '')
            if (seen.length === 9) resolve()
          },
        })
      })
      await Promise.race([all, new Promise((resolve) => setTimeout(resolve, 20_000))])
    } finally {
      await consumer.disconnect()
    }
    assert.deepEqual(seen.sort(), Array.from({ length: 9 }, (_, i) => `v${i}`).sort())
  } finally {
    await cluster.stop()
    await certs.cleanup()
  }
})

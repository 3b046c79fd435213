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

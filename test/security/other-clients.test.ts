/**
 * Issue 16 with the remaining clients: kafka-python 2.0.2 over SASL_PLAINTEXT (PLAIN and
 * SCRAM-SHA-256; it speaks SaslHandshake v0 and bare tokens, KIP-43) and
 * @platformatic/kafka over SASL_SSL with SCRAM-SHA-512 produce and read back; a wrong
 * password is refused.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { after, before, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { Producer } from '@platformatic/kafka'
import type { Cluster } from '../../src/server/cluster.js'
import { makeTestCerts, type TestCerts } from '../helpers/certs.js'
import { polyfillPromiseWithResolvers, startBroker } from '../helpers/cluster.js'
import { kcatConsume, PYTHON } from '../helpers/compat-clients.js'
import { createTopic } from '../helpers/topics.js'
import { createScramUser, securedBrokerProperties } from './helpers.js'

const run = promisify(execFile)
let certs: TestCerts
let cluster: Cluster

before(async () => {
  polyfillPromiseWithResolvers()
  certs = await makeTestCerts()
  cluster = await startBroker({ properties: securedBrokerProperties(certs) })
  await createScramUser(cluster, 'py-user', 'py-secret', ['SCRAM-SHA-256', 'SCRAM-SHA-512'])
})

after(async () => {
  await cluster?.stop()
  await certs?.cleanup()
})

const KAFKA_PYTHON = `
import json, sys
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
spec = json.loads(sys.argv[1])
conf = dict(bootstrap_servers=spec['bootstrap'], security_protocol='SASL_PLAINTEXT',
            sasl_mechanism=spec['mechanism'], sasl_plain_username=spec['username'],
            sasl_plain_password=spec['password'])
p = KafkaProducer(acks='all', **conf)
for v in ['p1', 'p2', 'p3']:
    p.send(spec['topic'], v.encode(), partition=0).get(timeout=20)
p.close()
c = KafkaConsumer(consumer_timeout_ms=5000, **conf)
c.assign([TopicPartition(spec['topic'], 0)])
c.seek_to_beginning()
print(json.dumps([m.value.decode() for m in c]))
c.close()
`

for (const [mechanism, username, password] of [
  ['PLAIN', 'alice', 'alice-secret'],
  ['SCRAM-SHA-256', 'py-user', 'py-secret'],
] as const) {
  test(`kafka-python SASL_PLAINTEXT ${mechanism} produces and consumes`, async () => {
    const topic = `kafka-python-${mechanism.toLowerCase()}`
    await createTopic(cluster, topic, { partitions: 1 })
    const spec = {
      bootstrap: cluster.brokers[0].listenerAddress('SASL_PLAINTEXT'),
      mechanism,
      username,
      password,
      topic,
    }
    const { stdout } = await run(PYTHON, ['-c', KAFKA_PYTHON, JSON.stringify(spec)], { timeout: 60_000 })
    assert.deepEqual(JSON.parse(stdout.trim().split('\n').at(-1)!), ['p1', 'p2', 'p3'])
  })
}

test('kafka-python with a wrong password fails to authenticate', async () => {
  const spec = {
    bootstrap: cluster.brokers[0].listenerAddress('SASL_PLAINTEXT'),
    mechanism: 'PLAIN',
    username: 'alice',
    password: 'nope',
    topic: 'never',
  }
  await assert.rejects(
    run(PYTHON, ['-c', KAFKA_PYTHON, JSON.stringify(spec)], { timeout: 60_000 }),
    /Authentication failed|AuthenticationFailed|NoBrokersAvailable/,
  )
})

test('@platformatic/kafka SASL_SSL SCRAM-SHA-512 produces; a wrong password is refused', async () => {
  const topic = 'platformatic-sasl'
  await createTopic(cluster, topic, { partitions: 1 })
  const options = (password: string) => ({
    clientId: 'tidelog-security',
    bootstrapBrokers: [cluster.brokers[0].listenerAddress('SASL_SSL')],
    autocreateTopics: false,
    tls: { ca: [certs.caPem] },
    sasl: { mechanism: 'SCRAM-SHA-512' as const, username: 'py-user', password },
    retries: 0,
  })
  const producer = new Producer(options('py-secret'))
  try {
    await producer.send({
      messages: ['x1', 'x2'].map((value) => ({ topic, value: Buffer.from(value), partition: 0 })),
      acks: -1,
    })
  } finally {
    await producer.close()
  }
  const read = await kcatConsume(cluster.brokers[0].listenerAddress('PLAINTEXT'), topic)
  assert.deepEqual(
    read.records.map((r) => r.value),
    ['x1', 'x2'],
  )
  const refused = new Producer(options('wrong'))
  try {
    await assert.rejects(
      refused.send({ messages: [{ topic, value: Buffer.from('no'), partition: 0 }], acks: -1 }),
    )
    // The broker closes a failed connection after connection.failed.authentication.delay.ms;
    // closing the client before that leaves it a socket error to report with nobody listening.
    await sleep(300)
  } finally {
    await refused.close()
  }
})

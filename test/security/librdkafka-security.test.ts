/**
 * Issue 16 with librdkafka clients: kcat and python3 confluent_kafka over SASL_SSL with
 * SCRAM-SHA-512 and PLAIN produce and read back their records; mutual TLS gives the client
 * certificate's DN as principal (ssl.principal.mapping.rules), and a client without a
 * certificate, or with one from a CA the broker does not trust, is refused.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { after, before, test } from 'node:test'
import { promisify } from 'node:util'
import { Kafka, logLevel } from 'kafkajs'
import type { Cluster } from '../../src/server/cluster.js'
import { makeTestCerts, type TestCerts } from '../helpers/certs.js'
import { startBroker } from '../helpers/cluster.js'
import { PYTHON } from '../helpers/compat-clients.js'
import { createTopic } from '../helpers/topics.js'
import { createScramUser, securedBrokerProperties } from './helpers.js'

const run = promisify(execFile)
let certs: TestCerts
let cluster: Cluster

before(async () => {
  certs = await makeTestCerts()
  cluster = await startBroker({
    properties: securedBrokerProperties(certs, {
      'listener.name.ssl.ssl.client.auth': 'required',
      'listener.name.ssl.ssl.principal.mapping.rules': 'RULE:^CN=([^,]+),OU=Ops,.*$/ops-$1/L,DEFAULT',
    }),
  })
  await createScramUser(cluster, 'rd-user', 'rd-secret', ['SCRAM-SHA-512'])
})

after(async () => {
  await cluster?.stop()
  await certs?.cleanup()
})

const CLIENTS = [
  ['SCRAM-SHA-512', 'rd-user', 'rd-secret'],
  ['PLAIN', 'alice', 'alice-secret'],
] as const

for (const [mechanism, username, password] of CLIENTS) {
  test(`kcat SASL_SSL ${mechanism} produces and consumes`, async () => {
    const topic = `kcat-${mechanism.toLowerCase()}`
    await createTopic(cluster, topic, { partitions: 1 })
    const common = [
      '-b',
      cluster.brokers[0].listenerAddress('SASL_SSL'),
      '-X',
      'security.protocol=SASL_SSL',
      '-X',
      `sasl.mechanisms=${mechanism}`,
      '-X',
      `sasl.username=${username}`,
      '-X',
      `sasl.password=${password}`,
      '-X',
      `ssl.ca.location=${certs.caFile}`,
      '-t',
      topic,
    ]
    const producer = execFile('kcat', [...common, '-P', '-X', 'acks=all'], { timeout: 30_000 })
    producer.stdin!.end('k1\nk2\nk3\n')
    await new Promise<void>((resolve, reject) =>
      producer.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`kcat -P exited ${code}`)))),
    )
    const { stdout } = await run('kcat', [...common, '-C', '-o', 'beginning', '-e', '-q'], {
      timeout: 30_000,
    })
    assert.deepEqual(stdout.trim().split('\n'), ['k1', 'k2', 'k3'])
  })

  test(`confluent_kafka SASL_SSL ${mechanism} produces and consumes`, async () => {
    const topic = `ck-${mechanism.toLowerCase()}`
    await createTopic(cluster, topic, { partitions: 1 })
    const script = `
import json, sys
from confluent_kafka import Producer, Consumer
spec = json.loads(sys.argv[1])
conf = {'bootstrap.servers': spec['bootstrap'], 'security.protocol': 'SASL_SSL',
        'sasl.mechanisms': spec['mechanism'], 'sasl.username': spec['username'],
        'sasl.password': spec['password'], 'ssl.ca.location': spec['ca']}
p = Producer(dict(conf, acks='all'))
for v in ['a', 'b', 'c']:
    p.produce(spec['topic'], v.encode())
assert p.flush(20) == 0
c = Consumer(dict(conf, **{'group.id': 'ck-' + spec['topic'], 'auto.offset.reset': 'earliest'}))
c.subscribe([spec['topic']])
got = []
for _ in range(60):
    m = c.poll(0.5)
    if m is not None and m.error() is None:
        got.append(m.value().decode())
    if len(got) == 3:
        break
c.close()
print(json.dumps(got))
`
    const spec = {
      bootstrap: cluster.brokers[0].listenerAddress('SASL_SSL'),
      mechanism,
      username,
      password,
      ca: certs.caFile,
      topic,
    }
    const { stdout } = await run(PYTHON, ['-c', script, JSON.stringify(spec)], { timeout: 60_000 })
    assert.deepEqual(JSON.parse(stdout), ['a', 'b', 'c'])
  })
}

test('mutual TLS: the certificate DN is the principal; no certificate or an untrusted one is refused', async () => {
  const kafka = (ssl: object) =>
    new Kafka({
      brokers: [cluster.brokers[0].listenerAddress('SSL')],
      logLevel: logLevel.NOTHING,
      retry: { retries: 0 },
      ssl: { ca: [certs.caPem], ...ssl },
    })
  const admin = kafka({ key: certs.clientKeyPem, cert: certs.clientCertPem }).admin()
  await admin.connect()
  await admin.listTopics()
  // RULE:^CN=([^,]+),OU=Ops,.*$/ops-$1/L applied to CN=alice,OU=Ops,O=Tide Org,C=NO.
  assert.ok(
    cluster.brokers[0].connectedPrincipals().includes('User:ops-alice'),
    `principals: ${cluster.brokers[0].connectedPrincipals().join(', ')}`,
  )
  await admin.disconnect()
  for (const ssl of [{}, { key: certs.strangerKeyPem, cert: certs.strangerCertPem }]) {
    const refused = kafka(ssl).admin()
    await assert.rejects(refused.connect())
    await refused.disconnect()
  }
})

test('kcat and confluent_kafka over mutual TLS (client key and certificate) produce and consume', async () => {
  const topic = 'mtls-librdkafka'
  await createTopic(cluster, topic, { partitions: 1 })
  const common = [
    '-b',
    cluster.brokers[0].listenerAddress('SSL'),
    '-X',
    'security.protocol=SSL',
    '-X',
    `ssl.ca.location=${certs.caFile}`,
    '-X',
    `ssl.key.location=${certs.clientKeyFile}`,
    '-X',
    `ssl.certificate.location=${certs.clientCertFile}`,
    '-t',
    topic,
  ]
  const producer = execFile('kcat', [...common, '-P'], { timeout: 30_000 })
  producer.stdin!.end('m1\nm2\n')
  await new Promise<void>((resolve, reject) =>
    producer.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`kcat -P exited ${code}`)))),
  )
  const script = `
import json, sys
from confluent_kafka import Consumer, TopicPartition
spec = json.loads(sys.argv[1])
c = Consumer({'bootstrap.servers': spec['bootstrap'], 'security.protocol': 'SSL', 'ssl.ca.location': spec['ca'],
              'ssl.key.location': spec['key'], 'ssl.certificate.location': spec['cert'], 'group.id': 'mtls'})
c.assign([TopicPartition(spec['topic'], 0, 0)])
got = []
for _ in range(60):
    m = c.poll(0.5)
    if m is not None and m.error() is None:
        got.append(m.value().decode())
    if len(got) == 2:
        break
c.close()
print(json.dumps(got))
`
  const spec = {
    bootstrap: cluster.brokers[0].listenerAddress('SSL'),
    ca: certs.caFile,
    key: certs.clientKeyFile,
    cert: certs.clientCertFile,
    topic,
  }
  const { stdout } = await run(PYTHON, ['-c', script, JSON.stringify(spec)], { timeout: 60_000 })
  assert.deepEqual(JSON.parse(stdout), ['m1', 'm2'])
  // Without its certificate kcat cannot even list metadata on the ssl.client.auth=required listener.
  await assert.rejects(
    run(
      'kcat',
      [
        '-b',
        cluster.brokers[0].listenerAddress('SSL'),
        '-X',
        'security.protocol=SSL',
        '-X',
        `ssl.ca.location=${certs.caFile}`,
        '-L',
        '-m',
        '3',
      ],
      {
        timeout: 30_000,
      },
    ),
  )
})

/**
 * Re-records the client sessions the differential test replays (test/differential/sessions):
 * `npm run record:session [-- --client kafkajs|kafkajs-txn|confluent-kafka|java]` starts one
 * tidelog broker set up as the differential brokers are (brokers.ts), puts the recorder's
 * proxy in front of it, runs each client's short session through the proxy (create a topic,
 * produce idempotently with acks=all or in transactions, consume in a group, commit) and
 * writes the session files.
 *
 * Recorded against tidelog: a client then negotiates only versions tidelog serves, which
 * Kafka 4.4 serves too (it serves more), so every recorded request replays on both.
 */
import { existsSync, mkdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Kafka, logLevel } from 'kafkajs'
import { run, startBroker } from '../helpers/cluster.js'
import { repoRoot } from '../helpers/compat-clients.js'
import { exec, JVM_FLAGS } from '../helpers/java.js'
import { installKafkaReference, TIDELOG_AS_REFERENCE } from '../helpers/kafka-reference.js'
import { SHARED_PROPERTIES } from './brokers.js'
import { SessionRecorder } from './recorder.js'

const KAFKAJS_VERSION = '2.2.4'

interface Recording {
  readonly client: string
  readonly scenario: string
  readonly names: readonly string[]
  readonly run: (bootstrap: string) => Promise<string>
}

const SCENARIO =
  'create a 2-partition topic, produce 4 records idempotently (acks=all), consume them in a group, commit, leave'

async function kafkajsSession(bootstrap: string): Promise<string> {
  const kafka = new Kafka({ clientId: 'recorded-kafkajs', brokers: [bootstrap], logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({
    topics: [{ topic: 'rec-kafkajs', numPartitions: 2, replicationFactor: 1 }],
    waitForLeaders: true,
  })
  await admin.disconnect()
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false })
  await producer.connect()
  for (const partition of [0, 1])
    await producer.send({
      topic: 'rec-kafkajs',
      acks: -1,
      messages: [0, 1].map((i) => ({
        partition,
        key: `k${partition}${i}`,
        value: `kafkajs-${partition}-${i}`,
        headers: { h: '1' },
      })),
    })
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: 'rec-kafkajs-group', maxWaitTimeInMs: 100 })
  await consumer.connect()
  await consumer.subscribe({ topic: 'rec-kafkajs', fromBeginning: true })
  const read: string[] = []
  const done = new Promise<void>((resolve) => {
    void consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        read.push(`${partition}:${message.offset}:${String(message.value)}`)
        await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }])
        if (read.length === 4) resolve()
      },
    })
  })
  await done
  await consumer.disconnect()
  return read.sort().join(' ')
}

/** A committed and an aborted transaction, then a read_committed group consumer. */
async function kafkajsTransactionSession(bootstrap: string): Promise<string> {
  const kafka = new Kafka({
    clientId: 'recorded-kafkajs-txn',
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
  })
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({
    topics: [{ topic: 'rec-kafkajs-txn', numPartitions: 1, replicationFactor: 1 }],
    waitForLeaders: true,
  })
  await admin.disconnect()
  const producer = kafka.producer({
    transactionalId: 'rec-kafkajs-txn',
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
  })
  await producer.connect()
  for (const [name, commit] of [
    ['committed', true],
    ['aborted', false],
  ] as const) {
    const txn = await producer.transaction()
    await txn.send({
      topic: 'rec-kafkajs-txn',
      messages: [0, 1].map((i) => ({ key: `k${i}`, value: `${name}-${i}` })),
    })
    await (commit ? txn.commit() : txn.abort())
  }
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: 'rec-kafkajs-txn-group', maxWaitTimeInMs: 100 })
  await consumer.connect()
  await consumer.subscribe({ topic: 'rec-kafkajs-txn', fromBeginning: true })
  const read: string[] = []
  await new Promise<void>((resolve) => {
    void consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        read.push(`${message.offset}:${String(message.value)}`)
        await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }])
        if (read.length === 2) resolve()
      },
    })
  })
  await consumer.disconnect()
  return read.join(' ')
}

async function confluentSession(bootstrap: string): Promise<string> {
  const python = join(repoRoot(), '.build', 'pyenv', 'bin', 'python')
  const script = join(repoRoot(), 'test', 'differential', 'record-confluent.py')
  const result = await run(python, [script, bootstrap, 'rec-ck', 'rec-ck-group'], { timeoutMs: 90_000 })
  if (result.code !== 0) throw new Error(`record-confluent.py exited ${result.code}: ${result.stderr}`)
  return result.stdout.trim()
}

/**
 * The Java client's session (RecordJava.java, compiled as test/helpers/java.ts compiles the
 * conformance programs, against the cached kafka-clients 4.4.0): a KIP-848 consumer.
 */
async function javaSession(bootstrap: string): Promise<string> {
  const cache = await installKafkaReference()
  const classes = join(repoRoot(), '.build', 'java-RecordJava')
  const source = join(repoRoot(), 'test', 'differential', 'RecordJava.java')
  const classpath = `${classes}:${join(cache, 'clients', '*')}`
  const compiled = join(classes, 'RecordJava.class')
  if (!existsSync(compiled) || statSync(compiled).mtimeMs < statSync(source).mtimeMs) {
    mkdirSync(classes, { recursive: true })
    await exec(
      'javac',
      ['--release', '17', '-Xlint:-options', '-d', classes, '-cp', classpath, source],
      180_000,
    )
  }
  const result = await exec(
    'java',
    [...JVM_FLAGS, '-cp', classpath, 'RecordJava', bootstrap, 'rec-java', 'rec-java-group'],
    120_000,
  )
  return result.stdout.trim()
}

const RECORDINGS: Readonly<Record<string, Recording>> = {
  kafkajs: {
    client: `kafkajs ${KAFKAJS_VERSION}`,
    scenario: SCENARIO,
    names: ['rec-kafkajs', 'rec-kafkajs-group'],
    run: kafkajsSession,
  },
  'kafkajs-txn': {
    client: `kafkajs ${KAFKAJS_VERSION}`,
    scenario:
      'create a topic, commit a transaction of 2 records and abort one of 2, consume read_committed in a group, commit, leave',
    names: ['rec-kafkajs-txn', 'rec-kafkajs-txn-group'],
    run: kafkajsTransactionSession,
  },
  'confluent-kafka': {
    client: 'confluent-kafka-python 2.16.1 (librdkafka 2.16.0, .build/pyenv)',
    scenario: SCENARIO,
    names: ['rec-ck', 'rec-ck-group'],
    run: confluentSession,
  },
  java: {
    client: 'kafka-clients 4.4.0 (Java, .build/kafka-4.4.0/clients)',
    scenario:
      'create a 2-partition topic with the Admin, produce 4 records idempotently (acks=all), consume them in a KIP-848 group (group.protocol=consumer), commit, close',
    names: ['rec-java', 'rec-java-group'],
    run: javaSession,
  },
}

const { values } = parseArgs({ options: { client: { type: 'string' } } })
const chosen = values.client === undefined ? Object.keys(RECORDINGS) : [values.client]
for (const name of chosen) {
  const recording = RECORDINGS[name]
  if (!recording) throw new Error(`--client takes ${Object.keys(RECORDINGS).join(' or ')}`)
  const cluster = await startBroker({ properties: { ...TIDELOG_AS_REFERENCE, ...SHARED_PROPERTIES } })
  const recorder = new SessionRecorder()
  try {
    const broker = cluster.brokers[0]
    const outcome = await recording.run(await recorder.front('127.0.0.1', broker.port))
    const path = join(repoRoot(), 'test', 'differential', 'sessions', `${name}.jsonl`)
    recorder.save(path, {
      client: recording.client,
      scenario: recording.scenario,
      broker: 'tidelog (one broker, test/differential/brokers.ts settings)',
      recordedAt: new Date().toISOString(),
      names: recording.names,
    })
    console.log(`${name}: ${recorder.exchanges.length} requests -> ${path} (read ${outcome})`)
  } finally {
    await recorder.close()
    await cluster.stop()
  }
}

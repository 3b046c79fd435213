/**
 * Issue 35 item 4: a log dir written by Apache Kafka 4.4 is served unchanged by tidelog after
 * `tidelog import-kafka-logdir`, and a tidelog log dir is served unchanged by Kafka 4.4 after
 * the procedure of docs/migration.md. The Java client (test/compat/java/LogDirInterop.java)
 * writes the same mix on both sides (keys, headers, explicit timestamps, every codec, an
 * idempotent producer, transactions committed and aborted, a group's committed offsets) and
 * prints what a broker serves: every record as read_uncommitted and read_committed read it,
 * ListOffsets earliest/latest/max-timestamp, DescribeProducers, committed offsets. The
 * printout of the broker that wrote must equal that of the broker that took the files over.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { importKafkaLogDir } from '../../src/cli/commands/import-kafka-logdir.js'
import { startBroker } from '../helpers/cluster.js'
import { repoRoot } from '../helpers/compat-clients.js'
import { compileJava, exec, JVM_FLAGS } from '../helpers/java.js'
import { type KafkaReference, startKafkaReference } from '../helpers/kafka-reference.js'

const TOPIC = 'interop'
/** As the reference nodes: the group's partition of __consumer_offsets is the same on both. */
const TIDELOG_PROPERTIES = {
  'offsets.topic.num.partitions': 5,
  'transaction.state.log.num.partitions': 5,
  'group.initial.rebalance.delay.ms': 0,
}

async function java(classpath: string, ...args: string[]): Promise<string[]> {
  const { stdout } = await exec('java', [...JVM_FLAGS, '-cp', classpath, 'LogDirInterop', ...args], 120_000)
  const lines = stdout.trim().split('\n')
  assert.equal(lines.at(-1), 'DONE', `LogDirInterop ${args[0]} did not finish:\n${stdout}`)
  return lines.slice(0, -1)
}

function referenceScript(...args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      join(repoRoot(), 'scripts', 'kafka-reference.sh'),
      args,
      { timeout: 240_000 },
      (error, _out, stderr) =>
        error
          ? reject(new Error(`kafka-reference.sh ${args.join(' ')}: ${stderr || error.message}`))
          : resolve(),
    )
  })
}

test('a Kafka 4.4 log dir, imported, is served by tidelog as Kafka served it', {
  timeout: 300_000,
}, async () => {
  const classpath = await compileJava('LogDirInterop', 'clients')
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-import-'))
  let kafka: KafkaReference | undefined
  try {
    kafka = await startKafkaReference()
    await java(classpath, 'write', kafka.bootstrap, TOPIC)
    const served = await java(classpath, 'dump', kafka.bootstrap, TOPIC)
    assert.ok(
      served.some((line) => line.startsWith('PRODUCER ')),
      'Kafka names the producers',
    )
    assert.ok(
      served.some((line) => line.includes('value=abort-')),
      'aborted records are in the log',
    )
    // A controlled shutdown: Kafka writes its producer snapshots and the clean-shutdown marker.
    await referenceScript('stop-node', kafka.dir, '1')
    const result = await importKafkaLogDir({
      from: join(kafka.dir, 'node-1', 'data'),
      dataDir,
      includeConsumerOffsets: true,
    })
    assert.deepEqual(
      result.topics.map((t) => [t.name, t.partitions]),
      [
        ['__consumer_offsets', 5],
        [TOPIC, 2],
      ],
    )
    assert.ok(result.maxProducerId >= 0n && result.nextProducerIdBlockStart > result.maxProducerId)
    const broker = await startBroker({ port: 0, dataDir, properties: TIDELOG_PROPERTIES })
    try {
      const again = await java(classpath, 'dump', broker.bootstrapServers, TOPIC)
      assert.deepEqual(again, served)
      // A new producer gets an id Kafka never gave, so every imported producer's state stays
      // as it was (one given an old id would meet, or take over, that producer's sequence).
      const appended = await java(classpath, 'append', broker.bootstrapServers, TOPIC)
      assert.equal(appended.length, 2)
      const producers = (lines: readonly string[]) => lines.filter((line) => line.startsWith('PRODUCER '))
      const after = producers(await java(classpath, 'dump', broker.bootstrapServers, TOPIC))
      assert.deepEqual(
        producers(served).filter((line) => !after.includes(line)),
        [],
        'imported producers unchanged',
      )
      assert.equal(after.length, producers(served).length + 2, 'one new producer on each partition')
    } finally {
      await broker.stop()
    }
  } finally {
    await kafka?.stop()
    await rm(dataDir, { recursive: true, force: true })
  }
})

test('a tidelog log dir is served by Kafka 4.4 as tidelog served it', { timeout: 300_000 }, async () => {
  const classpath = await compileJava('LogDirInterop', 'clients')
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-export-'))
  let kafka: KafkaReference | undefined
  try {
    const broker = await startBroker({ port: 0, dataDir, properties: TIDELOG_PROPERTIES })
    let served: string[]
    try {
      await java(classpath, 'write', broker.bootstrapServers, TOPIC)
      served = await java(classpath, 'dump', broker.bootstrapServers, TOPIC)
    } finally {
      await broker.stop()
    }
    // Kafka knows a topic only from its KRaft metadata, with an id it picks: the topic is
    // created there, Kafka stopped, and tidelog's partition files put in its directories
    // (Kafka's partition.metadata kept: a directory naming another topic id is stray).
    kafka = await startKafkaReference()
    await java(classpath, 'create', kafka.bootstrap, TOPIC)
    await referenceScript('stop-node', kafka.dir, '1')
    const kafkaData = join(kafka.dir, 'node-1', 'data')
    for (const partition of [0, 1]) {
      const from = join(dataDir, `${TOPIC}-${partition}`)
      const to = join(kafkaData, `${TOPIC}-${partition}`)
      for (const name of await readdir(to)) if (name !== 'partition.metadata') await rm(join(to, name))
      for (const name of await readdir(from)) await cp(join(from, name), join(to, name))
    }
    // Without the marker Kafka recovers every log from its recovery point (0 for these).
    await rm(join(kafkaData, '.kafka_cleanshutdown'), { force: true })
    await referenceScript('start-node', kafka.dir, '1')
    const again = await java(classpath, 'dump', kafka.bootstrap, TOPIC)
    // The group's offsets stay in tidelog's __consumer_offsets, not moved here.
    const withoutGroup = (lines: string[]) => lines.filter((line) => !line.startsWith('COMMITTED '))
    assert.deepEqual(withoutGroup(again), withoutGroup(served))
  } finally {
    await kafka?.stop()
    await rm(dataDir, { recursive: true, force: true })
  }
})

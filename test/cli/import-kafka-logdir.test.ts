/**
 * `tidelog import-kafka-logdir` without a broker: what it registers, and what it refuses
 * (copying nothing). The source is a Kafka-style log dir made from the committed fixture's
 * partition files plus a partition.metadata (tidelog writes none). The end-to-end import of
 * a real Kafka 4.4 log dir is test/storage/kafka-logdir-interop.test.ts.
 */
import assert from 'node:assert/strict'
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { ImportError, importKafkaLogDir } from '../../src/cli/commands/import-kafka-logdir.js'
import { systemClock } from '../../src/common/clock.js'
import { DirectoryLockedError, lockDirectory } from '../../src/common/file-system.js'
import { KEYS } from '../../src/metadata/cluster-metadata.js'
import { PRODUCER_ID_BLOCK_KEY } from '../../src/metadata/producer-id-manager.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { repoRoot } from '../helpers/compat-clients.js'

const FIXTURE = join(repoRoot(), 'test', 'fixtures', 'logdir', 'current', 'data')
const TOPIC_ID = 'q2p9Yw0XTJm5yDgkYQ6zVw'
let root: string

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'import-kafka-logdir-'))
})
after(async () => {
  await rm(root, { recursive: true, force: true })
})

/** A Kafka-style log dir holding `partitions` of topic `name` (fixture-p files), with ids. */
async function kafkaDir(name: string, partitions: readonly number[], withIds = true): Promise<string> {
  const dir = await mkdtemp(join(root, 'kafka-'))
  for (const p of partitions) {
    await cp(join(FIXTURE, `fixture-${p}`), join(dir, `${name}-${p}`), { recursive: true })
    if (withIds)
      await writeFile(join(dir, `${name}-${p}`, 'partition.metadata'), `version: 0\ntopic_id: ${TOPIC_ID}\n`)
  }
  await cp(join(FIXTURE, '__transaction_state-0'), join(dir, '__transaction_state-0'), { recursive: true })
  await writeFile(join(dir, 'log-start-offset-checkpoint'), `0\n1\n${name} 1 3\n`)
  return dir
}

async function readStore(dataDir: string): Promise<Map<string, string>> {
  const store = await EmbeddedStore.open({
    clock: systemClock,
    persistPath: join(dataDir, '__tidelog_metadata.log'),
    fs: nodeFileSystem,
  })
  try {
    const { kvs } = await store.range('')
    return new Map(kvs.map((kv) => [kv.key, kv.value]))
  } finally {
    await store.close()
  }
}

test('registers the topic with its id, partition count, next leader epoch and producer ids past the logs', async () => {
  const from = await kafkaDir('orders', [0, 1])
  const dataDir = await mkdtemp(join(root, 'tidelog-'))
  await writeFile(join(dataDir, '.kafka_cleanshutdown'), '')
  const result = await importKafkaLogDir({ from, dataDir, nodeId: 3 })
  assert.deepEqual(result.topics, [
    { name: 'orders', topicId: TOPIC_ID, partitions: 2, leaderEpochs: [1, 1] },
  ])
  assert.deepEqual(result.skipped, [
    { dir: '__transaction_state-0', reason: 'internal topic tidelog keeps its own way' },
  ])
  assert.ok(result.maxProducerId >= 0n)
  assert.equal(result.nextProducerIdBlockStart % 1000n, 0n)
  assert.ok(result.nextProducerIdBlockStart > result.maxProducerId)

  const kvs = await readStore(dataDir)
  assert.deepEqual(JSON.parse(kvs.get(KEYS.topic('orders'))!), {
    topicId: TOPIC_ID,
    configs: {},
    replicas: [[3], [3]],
  })
  assert.deepEqual(JSON.parse(kvs.get(KEYS.partition('orders', 1))!), { leader: 3, leaderEpoch: 1, isr: [3] })
  assert.equal(
    JSON.parse(kvs.get(PRODUCER_ID_BLOCK_KEY)!).nextBlockStart,
    String(result.nextProducerIdBlockStart),
  )
  const names = await readdir(dataDir)
  assert.ok(names.includes('orders-0') && names.includes('orders-1'))
  assert.ok(!names.includes('.kafka_cleanshutdown'), 'the next start recovers the imported logs')
  assert.ok(!names.includes('__transaction_state-0'))
  assert.match(await readFile(join(dataDir, 'log-start-offset-checkpoint'), 'utf8'), /^0\n1\norders 1 3\n$/)

  // Importing it again finds the topic there.
  await assert.rejects(importKafkaLogDir({ from, dataDir, nodeId: 3 }), ImportError)
})

test('refuses, copying nothing, a topic with a partition missing or without topic ids', async () => {
  const dataDir = await mkdtemp(join(root, 'tidelog-'))
  await assert.rejects(
    importKafkaLogDir({ from: await kafkaDir('gap', [1]), dataDir }),
    (error: Error) =>
      error instanceof ImportError && /partitions 0\.\.0 needed, 0 missing/.test(error.message),
  )
  await assert.rejects(
    importKafkaLogDir({ from: await kafkaDir('noid', [0, 1], false), dataDir }),
    (error: Error) => error instanceof ImportError && /has no partition.metadata/.test(error.message),
  )
  await assert.rejects(
    importKafkaLogDir({ from: await kafkaDir('some', [0]), dataDir, topics: ['other'] }),
    (error: Error) =>
      error instanceof ImportError && /no partition directory of topic other/.test(error.message),
  )
  assert.deepEqual(await readdir(dataDir), [])
})

test('refuses a data directory a running broker holds', async () => {
  const from = await kafkaDir('busy', [0])
  const dataDir = await mkdtemp(join(root, 'tidelog-'))
  const lock = await lockDirectory(nodeFileSystem, dataDir)
  try {
    await assert.rejects(importKafkaLogDir({ from, dataDir }), DirectoryLockedError)
    assert.deepEqual(await readdir(dataDir), ['.lock'])
  } finally {
    await lock.release()
  }
})

/**
 * `tidelog import-kafka-logdir`: moves the topics of an Apache Kafka log dir into the data
 * directory of a stopped single-broker tidelog (docs/migration.md). The partition files are
 * Kafka's own formats in both (segments, indexes, producer snapshots, leader-epoch-checkpoint),
 * so they are copied as they are; what Kafka keeps in its KRaft metadata log
 * (__cluster_metadata), which tidelog cannot read, is rebuilt from the files:
 *
 * - each topic is registered in tidelog's embedded metadata with the topic id of its
 *   partition.metadata and the partition count found on disk (partitions 0..N-1, all
 *   needed), one replica each, on this broker;
 * - each partition's leader epoch continues after the last one its leader-epoch-checkpoint
 *   names, as after a leader election, so new batches never carry an epoch the log has;
 * - the producer id blocks start past every producer id the logs hold: a new producer given
 *   an id Kafka gave before would meet that producer's sequence and be refused
 *   (OUT_OF_ORDER_SEQUENCE_NUMBER);
 * - log start offsets (DeleteRecords, retention) come from Kafka's log-start-offset-checkpoint;
 * - the clean-shutdown marker of the data directory is removed, so the next start recovers
 *   the imported logs from offset 0: every batch is read and its CRC checked.
 *
 * Kafka itself treats a partition directory its metadata does not name (or names under
 * another topic id) as stray and does not serve it, so nothing here is implicit: a topic is
 * served only once this command registered it. It refuses a tidelog that is running (the
 * metadata journal's lock), topics that exist, and directories already there; with none
 * copied on a refusal. Not carried: topic configs, ACLs, SCRAM users, quotas and transaction
 * coordinator state (__transaction_state); consumer group offsets only with
 * --include-consumer-offsets.
 */
import { cp, open, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { systemClock } from '../../common/clock.js'
import { TidelogError } from '../../common/errors.js'
import { lockDirectory } from '../../common/file-system.js'
import { KEYS } from '../../metadata/cluster-metadata.js'
import { PRODUCER_ID_BLOCK_KEY, PRODUCER_ID_BLOCK_SIZE } from '../../metadata/producer-id-manager.js'
import { EmbeddedStore } from '../../metadata/store/embedded-store.js'
import type { StoreOp, VersionCompare } from '../../metadata/store/metadata-store.js'
import {
  BATCH_LENGTH_OFFSET,
  LOG_OVERHEAD,
  MAGIC_OFFSET,
  PRODUCER_ID_OFFSET,
  RECORD_BATCH_OVERHEAD,
} from '../../protocol/batch-header.js'
import { nodeFileSystem } from '../../runtime/node-file-system.js'
import { EXIT_OK, EXIT_USAGE, guarded, out, printJson, UsageError } from './common.js'

/** The embedded metadata journal of a single-broker data directory (broker.ts's METADATA_FILE). */
const METADATA_FILE = '__tidelog_metadata.log'
const CLEAN_SHUTDOWN_FILE = '.kafka_cleanshutdown'
const LOG_START_OFFSET_CHECKPOINT_FILE = 'log-start-offset-checkpoint'
const PARTITION_DIR = /^(.+)-(\d+)$/
const SEGMENT_LOG = /^\d{20}\.log$/
/** Directories Kafka leaves behind that are not live partitions. */
const NOT_A_PARTITION = /-(delete|future|stray)$|\.[0-9a-f]{32}-(delete|future|stray)$/
/** KRaft's metadata log, and the transaction coordinator's state, which tidelog does not adopt. */
const NEVER_IMPORTED = new Set(['__cluster_metadata', '__transaction_state'])
const CONSUMER_OFFSETS = '__consumer_offsets'

export interface ImportedTopic {
  readonly name: string
  readonly topicId: string
  readonly partitions: number
  /** The leader epoch tidelog starts each partition at: one past the log's last. */
  readonly leaderEpochs: readonly number[]
}

export interface ImportResult {
  readonly topics: readonly ImportedTopic[]
  /** Directories of the source not imported, with why. */
  readonly skipped: readonly { readonly dir: string; readonly reason: string }[]
  /** The largest producer id the imported logs hold, -1 if none. */
  readonly maxProducerId: bigint
  /** Where tidelog's next producer id block starts. */
  readonly nextProducerIdBlockStart: bigint
}

export interface ImportOptions {
  /** The Kafka log dir (one of its log.dirs), of a stopped broker. */
  readonly from: string
  /** The tidelog data directory (`tidelog start --data-dir`), its broker stopped. */
  readonly dataDir: string
  /** The node.id of the tidelog broker that will serve the topics (default 0, as `tidelog start`). */
  readonly nodeId?: number
  /** Only these topics (default: every topic found but the internal ones). */
  readonly topics?: readonly string[]
  /** Also __consumer_offsets (needs offsets.topic.num.partitions equal to its partition count). */
  readonly includeConsumerOffsets?: boolean
}

export class ImportError extends TidelogError {
  constructor(message: string) {
    super('IMPORT_REFUSED', message)
  }
}

interface FoundTopic {
  readonly name: string
  readonly dirs: Map<number, string>
}

export async function importKafkaLogDir(options: ImportOptions): Promise<ImportResult> {
  const nodeId = options.nodeId ?? 0
  const { found, skipped } = await findPartitionDirs(options)
  // Everything is read and checked before anything is written.
  const { planned, maxProducerId } = await planImport(found, options.from)

  // A running broker holds both locks: the log dir's, and the journal's (taken by open()).
  const dirLock = await lockDirectory(nodeFileSystem, options.dataDir)
  let store: EmbeddedStore
  try {
    store = await EmbeddedStore.open({
      clock: systemClock,
      persistPath: join(options.dataDir, METADATA_FILE),
      fs: nodeFileSystem,
    })
  } catch (error) {
    await dirLock.release()
    throw error
  }
  try {
    const { compares, ops } = await topicOps(store, planned, options.dataDir, nodeId)
    const nextProducerIdBlockStart = await producerIdBlockOps(store, maxProducerId, compares, ops)
    for (const { dirs, topic } of planned) {
      for (let p = 0; p < dirs.length; p++) {
        await cp(dirs[p], join(options.dataDir, `${topic.name}-${p}`), {
          recursive: true,
          errorOnExist: true,
          force: false,
          preserveTimestamps: true,
        })
      }
    }
    await carryLogStartOffsets(options.from, options.dataDir, new Set(planned.map((x) => x.topic.name)))
    // The next start recovers the imported logs from offset 0 (they are in no recovery-point checkpoint).
    await rm(join(options.dataDir, CLEAN_SHUTDOWN_FILE), { force: true })
    const result = await store.txn(compares, ops)
    if (!result.succeeded)
      throw new ImportError(`the metadata of ${options.dataDir} changed during the import`)
    return { topics: planned.map((x) => x.topic), skipped, maxProducerId, nextProducerIdBlockStart }
  } finally {
    await store.close()
    await dirLock.release()
  }
}

/** The partition directories of `options.from` to import, by topic, and those left out with why. */
async function findPartitionDirs(options: ImportOptions) {
  const skipped: { dir: string; reason: string }[] = []
  const found = new Map<string, FoundTopic>()
  const entries = (await readdir(options.from, { withFileTypes: true })).sort((a, b) =>
    a.name < b.name ? -1 : 1,
  )
  for (const entry of entries) {
    if (!entry.isDirectory()) continue
    const match = PARTITION_DIR.exec(entry.name)
    if (match === null || NOT_A_PARTITION.test(entry.name)) {
      skipped.push({ dir: entry.name, reason: 'not a partition directory' })
      continue
    }
    const [, topic, partition] = match
    const reason = skipReason(topic, options)
    if (reason !== null) {
      skipped.push({ dir: entry.name, reason })
      continue
    }
    const t = found.get(topic) ?? { name: topic, dirs: new Map<number, string>() }
    t.dirs.set(Number(partition), join(options.from, entry.name))
    found.set(topic, t)
  }
  for (const wanted of options.topics ?? [])
    if (!found.has(wanted))
      throw new ImportError(`no partition directory of topic ${wanted} in ${options.from}`)
  return { found, skipped }
}

/** Why a topic's directories are not imported, or null. */
function skipReason(topic: string, options: ImportOptions): string | null {
  if (NEVER_IMPORTED.has(topic)) return 'internal topic tidelog keeps its own way'
  if (topic === CONSUMER_OFFSETS && !options.includeConsumerOffsets)
    return 'consumer offsets (--include-consumer-offsets)'
  if (topic !== CONSUMER_OFFSETS && options.topics !== undefined && !options.topics.includes(topic))
    return 'not among --topic'
  return null
}

/** Each topic's partitions 0..N-1, topic id and next leader epochs, and the largest producer id seen. */
async function planImport(found: ReadonlyMap<string, FoundTopic>, from: string) {
  const planned: { topic: ImportedTopic; dirs: string[] }[] = []
  let maxProducerId = -1n
  for (const t of found.values()) {
    const count = t.dirs.size
    const dirs: string[] = []
    for (let p = 0; p < count; p++) {
      const dir = t.dirs.get(p)
      if (dir === undefined)
        throw new ImportError(`topic ${t.name}: partitions 0..${count - 1} needed, ${p} missing in ${from}`)
      dirs.push(dir)
    }
    const ids = new Set<string>()
    const leaderEpochs: number[] = []
    for (const dir of dirs) {
      ids.add(await readTopicId(dir))
      leaderEpochs.push((await readLatestLeaderEpoch(dir)) + 1)
      const pid = await maxProducerIdIn(dir)
      if (pid > maxProducerId) maxProducerId = pid
    }
    if (ids.size !== 1) throw new ImportError(`topic ${t.name}: its partitions name different topic ids`)
    const topicId = [...ids][0]
    planned.push({ topic: { name: t.name, topicId, partitions: count, leaderEpochs }, dirs })
  }
  return { planned, maxProducerId }
}

/** The metadata writes registering each topic on `nodeId`; refuses a topic or directory already there. */
async function topicOps(
  store: EmbeddedStore,
  planned: readonly { topic: ImportedTopic }[],
  dataDir: string,
  nodeId: number,
): Promise<{ compares: VersionCompare[]; ops: StoreOp[] }> {
  const existing = new Set((await readdir(dataDir)).map(String))
  const compares: VersionCompare[] = []
  const ops: StoreOp[] = []
  for (const { topic } of planned) {
    if ((await store.get(KEYS.topic(topic.name))) !== null)
      throw new ImportError(`topic ${topic.name} exists in ${dataDir}`)
    for (let p = 0; p < topic.partitions; p++)
      if (existing.has(`${topic.name}-${p}`))
        throw new ImportError(`${join(dataDir, `${topic.name}-${p}`)} exists`)
    compares.push({ key: KEYS.topic(topic.name), version: 0 })
    const configs: Record<string, string> =
      topic.name === CONSUMER_OFFSETS ? { 'cleanup.policy': 'compact', 'compression.type': 'producer' } : {}
    const replicas = Array.from({ length: topic.partitions }, () => [nodeId])
    ops.push({
      type: 'put',
      key: KEYS.topic(topic.name),
      value: JSON.stringify({ topicId: topic.topicId, configs, replicas }),
    })
    topic.leaderEpochs.forEach((leaderEpoch, p) => {
      ops.push({
        type: 'put',
        key: KEYS.partition(topic.name, p),
        value: JSON.stringify({ leader: nodeId, leaderEpoch, isr: [nodeId] }),
      })
    })
  }
  return { compares, ops }
}

/**
 * Blocks are claimed whole (ProducerIdManager): the next one starts past every id seen in
 * the imported logs. Adds its write to `compares` and `ops`; returns where it starts.
 */
async function producerIdBlockOps(
  store: EmbeddedStore,
  maxProducerId: bigint,
  compares: VersionCompare[],
  ops: StoreOp[],
): Promise<bigint> {
  const block = await store.get(PRODUCER_ID_BLOCK_KEY)
  const current =
    block === null ? 0n : BigInt((JSON.parse(block.value) as { nextBlockStart: string }).nextBlockStart)
  const blockSize = BigInt(PRODUCER_ID_BLOCK_SIZE)
  const pastImported = maxProducerId < 0n ? 0n : ((maxProducerId + blockSize) / blockSize) * blockSize
  const nextProducerIdBlockStart = current > pastImported ? current : pastImported
  compares.push({ key: PRODUCER_ID_BLOCK_KEY, version: block?.version ?? 0 })
  ops.push({
    type: 'put',
    key: PRODUCER_ID_BLOCK_KEY,
    value: JSON.stringify({ version: 1, nextBlockStart: nextProducerIdBlockStart.toString() }),
  })
  return nextProducerIdBlockStart
}

/** partition.metadata: `version: 0` then `topic_id: <base64url uuid>`. */
async function readTopicId(dir: string): Promise<string> {
  let text: string
  try {
    text = await readFile(join(dir, 'partition.metadata'), 'utf8')
  } catch {
    throw new ImportError(`${dir} has no partition.metadata: its topic id is unknown`)
  }
  const match = /^topic_id:\s*(\S+)\s*$/m.exec(text)
  if (match === null || !/^version:\s*0\s*$/m.test(text))
    throw new ImportError(`${dir}/partition.metadata is not version 0 with a topic_id`)
  return match[1]
}

/** The last epoch of leader-epoch-checkpoint (`0`, count, `epoch startOffset` lines); -1 if none. */
async function readLatestLeaderEpoch(dir: string): Promise<number> {
  let text: string
  try {
    text = await readFile(join(dir, 'leader-epoch-checkpoint'), 'utf8')
  } catch {
    return -1
  }
  const lines = text.trim().split('\n')
  const last = lines.length > 2 ? lines[lines.length - 1].trim().split(/\s+/) : []
  return last.length === 2 ? Number(last[0]) : -1
}

/** The largest producer id of any v2 batch in the partition's segments (headers only). */
async function maxProducerIdIn(dir: string): Promise<bigint> {
  let max = -1n
  const header = Buffer.alloc(RECORD_BATCH_OVERHEAD)
  for (const name of (await readdir(dir)).filter((n) => SEGMENT_LOG.test(n))) {
    const file = await open(join(dir, name), 'r')
    try {
      const size = (await file.stat()).size
      let position = 0
      while (position + RECORD_BATCH_OVERHEAD <= size) {
        const { bytesRead } = await file.read(header, 0, RECORD_BATCH_OVERHEAD, position)
        if (bytesRead < RECORD_BATCH_OVERHEAD) break
        const batchBytes = LOG_OVERHEAD + header.readInt32BE(BATCH_LENGTH_OFFSET)
        if (batchBytes <= LOG_OVERHEAD) break // preallocated zeros past the last batch
        if (header.readInt8(MAGIC_OFFSET) === 2) {
          const pid = header.readBigInt64BE(PRODUCER_ID_OFFSET)
          if (pid > max) max = pid
        }
        position += batchBytes
      }
    } finally {
      await file.close()
    }
  }
  return max
}

/** Appends Kafka's log start offsets of the imported topics to tidelog's checkpoint (same format). */
async function carryLogStartOffsets(
  from: string,
  dataDir: string,
  topics: ReadonlySet<string>,
): Promise<void> {
  const read = async (dir: string): Promise<string[]> => {
    try {
      return (await readFile(join(dir, LOG_START_OFFSET_CHECKPOINT_FILE), 'utf8')).trim().split('\n').slice(2)
    } catch {
      return []
    }
  }
  const carried = (await read(from)).filter((line) => topics.has(line.trim().split(/\s+/)[0] ?? ''))
  if (carried.length === 0) return
  const lines = [...(await read(dataDir)).filter((line) => line.trim() !== ''), ...carried]
  await writeFile(
    join(dataDir, LOG_START_OFFSET_CHECKPOINT_FILE),
    `0\n${lines.length}\n${lines.join('\n')}\n`,
  )
}

const USAGE = `Usage: tidelog import-kafka-logdir --from KAFKA_LOG_DIR --data-dir DIR [options]

Copies the topics of an Apache Kafka log dir (its broker stopped cleanly) into the data
directory of a stopped single-broker tidelog and registers them there, with Kafka's topic ids
and partition counts; start tidelog on DIR afterwards (docs/migration.md).

  --from DIR                  One log dir of the Kafka broker (its log.dirs)
  --data-dir DIR              tidelog's data directory (tidelog start --data-dir)
  --node-id N                 node.id of the tidelog broker (default 0, as tidelog start)
  --topic T                   Only topic T (repeatable; default every non-internal topic)
  --include-consumer-offsets  Also __consumer_offsets: committed group offsets (start tidelog
                              with offsets.topic.num.partitions equal to its partition count)
  --json                      Print the result as JSON
`

export async function importKafkaLogDirCommand(argv: readonly string[]): Promise<number> {
  return guarded('import-kafka-logdir', async () => {
    const { values } = parseArgs({
      args: [...argv],
      options: {
        from: { type: 'string' },
        'data-dir': { type: 'string' },
        'node-id': { type: 'string', default: '0' },
        topic: { type: 'string', multiple: true },
        'include-consumer-offsets': { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
    })
    if (values.help) {
      process.stdout.write(USAGE)
      return EXIT_OK
    }
    if (values.from === undefined || values['data-dir'] === undefined)
      throw new UsageError('import-kafka-logdir needs --from and --data-dir')
    const nodeId = Number(values['node-id'])
    if (!Number.isSafeInteger(nodeId) || nodeId < 0) throw new UsageError('--node-id must be an integer >= 0')
    let result: ImportResult
    try {
      result = await importKafkaLogDir({
        from: values.from,
        dataDir: values['data-dir'],
        nodeId,
        ...(values.topic === undefined ? {} : { topics: values.topic }),
        includeConsumerOffsets: values['include-consumer-offsets'],
      })
    } catch (error) {
      if (error instanceof ImportError) {
        process.stderr.write(`tidelog import-kafka-logdir: ${error.message}\n`)
        return EXIT_USAGE
      }
      throw error
    }
    if (values.json) {
      printJson({
        ...result,
        maxProducerId: String(result.maxProducerId),
        nextProducerIdBlockStart: String(result.nextProducerIdBlockStart),
      })
    } else {
      for (const t of result.topics)
        out(`imported ${t.name} (${t.partitions} partitions, topic id ${t.topicId})`)
      for (const s of result.skipped) out(`skipped ${s.dir}: ${s.reason}`)
      out(`producer ids start at ${result.nextProducerIdBlockStart}`)
    }
    return EXIT_OK
  })
}

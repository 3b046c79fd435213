/**
 * `tidelog consume`: prints records of a topic (all partitions or --partition N) from the
 * end (default), the beginning, an offset or a time, like kafka-console-consumer and
 * `kcat -C`. Stops after --max-messages, at the end with --exit-at-end, after --timeout-ms
 * without a record, or on Ctrl-C, then prints "Processed a total of N messages" to stderr.
 *
 * With --group G it is a member of consumer group G instead (as kafka-console-consumer
 * --group): the group hands out the partitions, reading starts at the group's committed
 * offsets (else the end, or the beginning with --from-beginning), offsets are auto-committed
 * and committed once more on exit, up to the last record printed.
 */
import { parseArgs } from 'node:util'
import { Admin } from '../../client/admin.js'
import { Consumer, type ConsumerRecord } from '../../client/consumer.js'
import { GroupsNotSupportedError } from '../../client/errors.js'
import { type TopicPartition, tpKey } from '../../client/leader-requests.js'
import type { IsolationLevel } from '../../client/offsets.js'
import {
  COMMON_OPTIONS,
  clientOptions,
  EXIT_FAILED,
  EXIT_OK,
  guarded,
  oneTopic,
  parseInteger,
  UsageError,
} from './common.js'

export const CONSUME_USAGE = `Usage: tidelog consume [--topic] T [options]

  --topic T            Topic to read (required; or T as the argument)
  --partition N        Only this partition (default: all)
  --from-beginning     Start at the earliest offset (default: the end)
  --offset O           Start at offset O, or 'earliest' / 'latest'
  --timestamp TIME     Start at the first record at or after TIME (ms since epoch or ISO 8601)
  --max-messages N     Exit after N records
  --exit-at-end, -e    Exit once every partition's end (as of start) is reached
  --timeout-ms N       Exit when no record arrives for N ms
  --group G            Join consumer group G: the group assigns the partitions, reading starts
                       at its committed offsets (else the end, or the beginning with
                       --from-beginning); offsets are committed every 5 s and on exit
  --isolation-level L  read_uncommitted (default) or read_committed: only committed
                       transactions' records, up to the last stable offset
  --format FMT         kcat-style: %t topic %p partition %o offset %k key %s value %T timestamp %h headers
  --print-key, --print-offset, --print-partition, --print-timestamp, --print-headers
  --key-separator SEP  Between printed fields (default tab)
  --json               One JSON object per record (JSON Lines)
  --bootstrap-server HOST:PORT (default 127.0.0.1:9092), --command-config FILE
`

const OPTIONS = {
  ...COMMON_OPTIONS,
  topic: { type: 'string', short: 't' },
  partition: { type: 'string', short: 'p' },
  'from-beginning': { type: 'boolean', default: false },
  offset: { type: 'string', short: 'o' },
  timestamp: { type: 'string' },
  'max-messages': { type: 'string', short: 'c' },
  'exit-at-end': { type: 'boolean', short: 'e', default: false },
  'timeout-ms': { type: 'string' },
  group: { type: 'string', short: 'g' },
  'isolation-level': { type: 'string', default: 'read_uncommitted' },
  format: { type: 'string', short: 'f' },
  'print-key': { type: 'boolean', default: false },
  'print-offset': { type: 'boolean', default: false },
  'print-partition': { type: 'boolean', default: false },
  'print-timestamp': { type: 'boolean', default: false },
  'print-headers': { type: 'boolean', default: false },
  'key-separator': { type: 'string', default: '\t' },
} as const

type Values = ReturnType<typeof parse>['values']

function parse(args: readonly string[]) {
  return parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true, strict: true })
}

export async function consumeCommand(argv: readonly string[]): Promise<number> {
  return guarded('consume', async () => {
    const { values, positionals } = parse(argv)
    if (values.help) {
      process.stdout.write(CONSUME_USAGE)
      return EXIT_OK
    }
    const topic = oneTopic(values.topic, positionals)
    isolationLevel(values)
    const limit = parseInteger(values['max-messages'], '--max-messages', 1)
    const idleMs = parseInteger(values['timeout-ms'], '--timeout-ms', 1)
    if (values.group !== undefined) return consumeInGroup(values, topic, values.group, { limit, idleMs })
    const consumer = new Consumer({
      ...clientOptions(values['bootstrap-server'], 'tidelog-console-consumer', values['command-config']),
      autoOffsetReset: 'latest',
      isolationLevel: isolationLevel(values),
    })
    const stop = onInterrupt(() => consumer.stop())
    let count = 0
    try {
      const ends = await position(consumer, topic, values)
      count = await printLoop(consumer, values, { limit, idleMs, ends })
    } finally {
      stop()
      await consumer.close()
    }
    process.stderr.write(`Processed a total of ${count} messages\n`)
    return EXIT_OK
  })
}

function isolationLevel(values: Values): IsolationLevel {
  const level = values['isolation-level']
  if (level !== 'read_uncommitted' && level !== 'read_committed')
    throw new UsageError(`--isolation-level must be read_uncommitted or read_committed, got '${level}'`)
  return level
}

/** --group: a member of the group; commits what it printed on exit. */
async function consumeInGroup(
  values: Values,
  topic: string,
  groupId: string,
  limits: { limit: number | undefined; idleMs: number | undefined },
): Promise<number> {
  for (const flag of ['partition', 'offset', 'timestamp'] as const)
    if (values[flag] !== undefined) throw new UsageError(`--${flag} cannot be used with --group`)
  await requireGroups(values)
  const consumer = new Consumer({
    ...clientOptions(values['bootstrap-server'], 'tidelog-console-consumer', values['command-config']),
    groupId,
    // As kafka-console-consumer: without committed offsets, the end unless --from-beginning.
    autoOffsetReset: values['from-beginning'] ? 'earliest' : 'latest',
    isolationLevel: isolationLevel(values),
    enableAutoCommit: true,
  })
  consumer.subscribe([topic])
  const stop = onInterrupt(() => consumer.stop())
  let count = 0
  let code = EXIT_OK
  try {
    const ends = values['exit-at-end'] ? new Map<string, number>() : null
    count = await printLoop(consumer, values, { ...limits, ends, group: true })
  } finally {
    stop()
    code = await commitOnExit(consumer)
    await consumer.close()
  }
  process.stderr.write(`Processed a total of ${count} messages\n`)
  return code
}

/** The final commit; a failure is reported (exit 1) since the group would read those records again. */
async function commitOnExit(consumer: Consumer): Promise<number> {
  if (consumer.assignment().length === 0) return EXIT_OK
  try {
    await consumer.commit()
    return EXIT_OK
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    process.stderr.write(`tidelog consume: could not commit offsets on exit: ${message}\n`)
    return EXIT_FAILED
  }
}

/** A clear answer (exit 4) when the broker does not serve the group APIs. */
async function requireGroups(values: Values): Promise<void> {
  const admin = new Admin(clientOptions(values['bootstrap-server'], 'tidelog-cli', values['command-config']))
  try {
    if (!(await admin.supportsGroups())) throw new GroupsNotSupportedError('FindCoordinator/JoinGroup')
  } finally {
    admin.close()
  }
}

/** Assigns the partitions and moves to the start; returns the end offsets when --exit-at-end. */
async function position(
  consumer: Consumer,
  topic: string,
  values: Values,
): Promise<Map<string, number> | null> {
  const partition = parseInteger(values.partition, '--partition')
  const all = await consumer.assignTopics([topic])
  const chosen = partition === undefined ? all : all.filter((tp) => tp.partition === partition)
  if (chosen.length === 0) throw new UsageError(`topic ${topic} has no partition ${partition}`)
  consumer.assign(chosen)
  const start = values.offset ?? (values['from-beginning'] ? 'earliest' : undefined)
  if (values.timestamp !== undefined) consumer.seekToTimestamp(parseTime(values.timestamp))
  else if (start === 'earliest') consumer.seekToBeginning()
  else if (start === 'latest' || start === undefined) consumer.seekToEnd()
  else for (const tp of chosen) consumer.seek(tp, parseInteger(start, '--offset')!)
  return values['exit-at-end'] ? consumer.endOffsets(chosen) : null
}

function parseTime(text: string): number {
  const ms = /^\d+$/.test(text) ? Number(text) : Date.parse(text)
  if (!Number.isFinite(ms))
    throw new UsageError(`--timestamp expects ms since the epoch or an ISO 8601 time, got '${text}'`)
  return ms
}

interface Limits {
  limit: number | undefined
  idleMs: number | undefined
  /** --exit-at-end: each partition's end offset when first seen (a group fills it as partitions come). */
  ends: Map<string, number> | null
  /** A group member: no partitions is normal (between rebalances), not a reason to stop. */
  group?: boolean
}

async function printLoop(consumer: Consumer, values: Values, limits: Limits): Promise<number> {
  const format = formatter(values)
  let count = 0
  let lastRecordAt = Date.now()
  for (;;) {
    if (limits.ends && limits.group) await learnEnds(consumer, limits.ends)
    if (limits.ends && atEnd(consumer, limits.ends)) return count
    const records = await consumer.poll(500)
    if (records.length === 0) {
      if ((!limits.group && consumer.assignment().length === 0) || interrupted) return count
      if (limits.idleMs !== undefined && Date.now() - lastRecordAt >= limits.idleMs) return count
      continue
    }
    lastRecordAt = Date.now()
    const take = limits.limit === undefined ? records : records.slice(0, limits.limit - count)
    // Records past the limit are not printed: rewind to them so the exit commit leaves them unread.
    if (limits.group && take.length < records.length) rewind(consumer, records.slice(take.length))
    if (!(await write(take.map(format).join('')))) return count + take.length
    count += take.length
    if (limits.limit !== undefined && count >= limits.limit) return count
  }
}

/** Moves each partition back to its first record in `unprinted`. */
function rewind(consumer: Consumer, unprinted: readonly ConsumerRecord[]): void {
  const first = new Map<string, TopicPartition & { offset: number }>()
  for (const r of unprinted) {
    const key = tpKey(r)
    if (!first.has(key)) first.set(key, { topic: r.topic, partition: r.partition, offset: r.offset })
  }
  for (const tp of first.values()) consumer.seek(tp, tp.offset)
}

/** --exit-at-end in a group: the end offsets of newly assigned partitions, as of now. */
async function learnEnds(consumer: Consumer, ends: Map<string, number>): Promise<void> {
  const unknown = consumer.assignment().filter((tp) => !ends.has(tpKey(tp)))
  if (unknown.length === 0) return
  for (const [key, offset] of await consumer.endOffsets(unknown)) ends.set(key, offset)
}

/** Set by Ctrl-C: the loop ends after the records in hand. */
let interrupted = false

function atEnd(consumer: Consumer, ends: Map<string, number>): boolean {
  const assigned = consumer.assignment()
  if (assigned.length === 0) return false
  for (const tp of assigned) {
    const position = consumer.position(tp)
    if (position === null || position < (ends.get(tpKey(tp)) ?? 0)) return false
  }
  return true
}

function onInterrupt(stop: () => void): () => void {
  const handler = (): void => {
    interrupted = true
    stop()
  }
  process.once('SIGINT', handler)
  process.once('SIGTERM', handler)
  return () => {
    process.off('SIGINT', handler)
    process.off('SIGTERM', handler)
  }
}

/** Resolves false when stdout is gone (e.g. piped into `head`). */
function write(text: string): Promise<boolean> {
  if (text === '') return Promise.resolve(true)
  return new Promise((resolve) => {
    process.stdout.write(text, (error) => resolve(!error))
  })
}

const text = (b: Buffer | null): string | null => (b === null ? null : b.toString('utf8'))

function formatter(values: Values): (r: ConsumerRecord) => string {
  if (values.json) {
    return (r) =>
      `${JSON.stringify({
        topic: r.topic,
        partition: r.partition,
        offset: r.offset,
        timestamp: r.timestamp,
        timestampType: r.timestampType,
        key: text(r.key),
        value: text(r.value),
        headers: r.headers.map((h) => [h.key, text(h.value)]),
      })}\n`
  }
  if (values.format !== undefined) return kcatFormat(values.format)
  const sep = values['key-separator']
  return (r) => {
    const fields: string[] = []
    if (values['print-timestamp']) fields.push(`${r.timestampType}:${r.timestamp}`)
    if (values['print-partition']) fields.push(`Partition:${r.partition}`)
    if (values['print-offset']) fields.push(`Offset:${r.offset}`)
    if (values['print-headers']) fields.push(headersText(r) || 'NO_HEADERS')
    if (values['print-key']) fields.push(text(r.key) ?? 'null')
    fields.push(text(r.value) ?? 'null')
    return `${fields.join(sep)}\n`
  }
}

function headersText(r: ConsumerRecord): string {
  return r.headers.map((h) => `${h.key}:${text(h.value) ?? 'null'}`).join(',')
}

function kcatFormat(format: string): (r: ConsumerRecord) => string {
  const unescaped = format.replace(/\\n/g, '\n').replace(/\\t/g, '\t')
  return (r) =>
    unescaped.replace(/%[tpokvsTh%]/g, (spec) => {
      switch (spec) {
        case '%t':
          return r.topic
        case '%p':
          return String(r.partition)
        case '%o':
          return String(r.offset)
        case '%k':
          return text(r.key) ?? ''
        case '%s':
        case '%v':
          return text(r.value) ?? ''
        case '%T':
          return String(r.timestamp)
        case '%h':
          return headersText(r)
        default:
          return '%'
      }
    })
}

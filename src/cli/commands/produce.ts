/**
 * `tidelog produce`: one record per stdin line, like kafka-console-producer. With
 * --key-separator each line is `key<sep>value`; --header k=v adds headers to every record.
 * Records are sent asynchronously and flushed at the end of input (--sync: each line is
 * acknowledged before the next is sent). Exit 1 if any record failed.
 */
import { createInterface } from 'node:readline'
import { parseArgs } from 'node:util'
import type { KafkaClientError } from '../../client/errors.js'
import { type Acks, type CompressionName, Producer, type ProducerRecord } from '../../client/producer.js'
import {
  COMMON_OPTIONS,
  clientOptions,
  EXIT_FAILED,
  EXIT_OK,
  guarded,
  oneTopic,
  parseInteger,
  parsePairs,
  printJson,
  reportError,
  UsageError,
} from './common.js'

export const PRODUCE_USAGE = `Usage: tidelog produce [--topic] T [options] < lines

  --topic T              Topic to write to (required; or T as the argument)
  --key-separator SEP    Split each line into key SEP value (first occurrence)
  --header k=v           Header on every record, repeatable
  --partition N          Send every record to partition N (default: by key, else sticky)
  --acks 0|1|all         Acknowledgement level (default all)
  --compression C        none|gzip|snappy|lz4|zstd (default none)
  --linger-ms N          Batching delay (default 5)
  --sync                 producer.type=sync: each record acknowledged before the next
  --bootstrap-server HOST:PORT (default 127.0.0.1:9092), --command-config FILE, --json (summary as JSON)
`

const OPTIONS = {
  ...COMMON_OPTIONS,
  topic: { type: 'string', short: 't' },
  'key-separator': { type: 'string' },
  header: { type: 'string', short: 'H', multiple: true },
  partition: { type: 'string', short: 'p' },
  acks: { type: 'string', default: 'all' },
  compression: { type: 'string', default: 'none' },
  'linger-ms': { type: 'string', default: '5' },
  sync: { type: 'boolean', default: false },
} as const

export async function produceCommand(argv: readonly string[]): Promise<number> {
  return guarded('produce', async () => {
    const { values, positionals } = parseArgs({
      args: [...argv],
      options: OPTIONS,
      allowPositionals: true,
      strict: true,
    })
    if (values.help) {
      process.stdout.write(PRODUCE_USAGE)
      return EXIT_OK
    }
    const topic = oneTopic(values.topic, positionals)
    const headers = parsePairs(values.header, '--header')
    const partition = parseInteger(values.partition, '--partition')
    const separator = values['key-separator']
    if (separator === '') throw new UsageError('--key-separator must not be empty')
    const producer = new Producer({
      ...clientOptions(values['bootstrap-server'], 'tidelog-console-producer', values['command-config']),
      acks: parseAcks(values.acks),
      compression: values.compression as CompressionName,
      lingerMs: parseInteger(values['linger-ms'], '--linger-ms'),
      producerType: values.sync ? 'sync' : 'async',
    })
    const started = Date.now()
    let sent = 0
    let failed = 0
    let firstError: KafkaClientError | null = null
    const window = new SendWindow(UNACKNOWLEDGED_MAX)
    const onResult = (error: KafkaClientError | null): void => {
      window.release()
      if (!error) return
      failed++
      firstError ??= error
    }
    try {
      for await (const line of createInterface({
        input: process.stdin,
        crlfDelay: Number.POSITIVE_INFINITY,
      })) {
        const record = toRecord(topic, line, separator, headers, partition)
        sent++
        await window.acquire()
        const pending = producer.send(record, onResult)
        // Sync style: the next line waits for this acknowledgement (errors go to onResult).
        if (values.sync) await pending.catch(() => undefined)
      }
      await producer.flush()
    } finally {
      await producer.close()
    }
    return summarize(values.json, topic, sent, failed, firstError, Date.now() - started)
  })
}

/** Lines read ahead of their acknowledgements, so a huge stdin does not fill memory. */
const UNACKNOWLEDGED_MAX = 20000

class SendWindow {
  private outstanding = 0
  private waiter: (() => void) | null = null

  constructor(private readonly max: number) {}

  acquire(): Promise<void> | undefined {
    this.outstanding++
    if (this.outstanding <= this.max) return undefined
    return new Promise((resolve) => {
      this.waiter = resolve
    })
  }

  release(): void {
    this.outstanding--
    if (this.waiter && this.outstanding <= this.max / 2) {
      const waiter = this.waiter
      this.waiter = null
      waiter()
    }
  }
}

function parseAcks(value: string): Acks {
  if (value === 'all' || value === '-1') return 'all'
  if (value === '0' || value === '1') return Number(value) as 0 | 1
  throw new UsageError(`--acks expects 0, 1 or all, got '${value}'`)
}

function toRecord(
  topic: string,
  line: string,
  separator: string | undefined,
  headers: [string, string][],
  partition: number | undefined,
): ProducerRecord {
  let key: string | null = null
  let value = line
  if (separator !== undefined) {
    const at = line.indexOf(separator)
    if (at < 0) throw new UsageError(`line without key separator '${separator}': ${line.slice(0, 60)}`)
    key = line.slice(0, at)
    value = line.slice(at + separator.length)
  }
  return { topic, key, value, headers, ...(partition !== undefined ? { partition } : {}) }
}

function summarize(
  json: boolean,
  topic: string,
  sent: number,
  failed: number,
  firstError: KafkaClientError | null,
  elapsedMs: number,
): number {
  if (json)
    printJson({
      topic,
      sent,
      acknowledged: sent - failed,
      failed,
      elapsedMs,
      error: firstError?.message ?? null,
    })
  else
    process.stderr.write(`Produced ${sent - failed} of ${sent} record(s) to ${topic} in ${elapsedMs} ms.\n`)
  if (firstError) {
    reportError(firstError, 'produce')
    return EXIT_FAILED
  }
  return EXIT_OK
}

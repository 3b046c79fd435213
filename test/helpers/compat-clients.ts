/**
 * Drivers for real Kafka clients in the compatibility tests: kcat (librdkafka) and the
 * Python confluent-kafka / kafka-python scripts in test/compat/python. Records are compared
 * in one normalized text form so every client's view can be checked against the same
 * expectation.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { run } from './cluster.js'

/** The system Python, which has python3-confluent-kafka and python3-kafka. */
export const PYTHON = '/usr/bin/python3'

/**
 * The virtualenv Python with the PyPI clients (confluent-kafka 2.16.1 bundling librdkafka
 * 2.16, aiokafka), installed by scripts/install-python-clients.sh once; the script returns at
 * once when the venv is current.
 */
export function pypiPython(): string {
  const script = join(repoRoot(), 'scripts', 'install-python-clients.sh')
  return execFileSync(script, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim()
}

/** A record as every client reports it; header values and key/value are UTF-8 text or null. */
export interface Rec {
  partition: number
  offset: number
  key: string | null
  value: string | null
  headers: [string, string | null][]
}

/** The repository root (works from the sources and from any compiled outDir). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json')) || !existsSync(join(dir, 'test', 'compat'))) {
    const parent = dirname(dir)
    if (parent === dir) throw new Error('repository root not found')
    dir = parent
  }
  return dir
}

export function pythonScript(name: string): string {
  return join(repoRoot(), 'test', 'compat', 'python', name)
}

/** Sorted by partition, then offset, with only the compared fields. */
export function normalize(records: readonly Rec[]): Rec[] {
  return records
    .map((r) => ({
      partition: r.partition,
      offset: r.offset,
      key: r.key,
      value: r.value,
      headers: r.headers.map(([k, v]): [string, string | null] => [k, v]),
    }))
    .sort((a, b) => a.partition - b.partition || a.offset - b.offset)
}

/** Each partition's offsets are consecutive from `start` (default 0). */
export function offsetsConsecutive(records: readonly Rec[], start = 0): boolean {
  const next = new Map<number, number>()
  for (const r of normalize(records)) {
    const expected = next.get(r.partition) ?? start
    if (r.offset !== expected) return false
    next.set(r.partition, expected + 1)
  }
  return true
}

// ---------------------------------------------------------------------------------- kcat

interface KcatJson {
  partition: number
  offset: number
  key: string | null
  payload: string | null
  headers?: (string | null)[]
  ts: number
  tstype: string
}

export interface KcatConsumeOptions {
  partition?: number
  /** kcat -o: 'beginning', 'end', or an absolute offset. */
  offset?: string | number
  /** Stop after this many records (-c) instead of at the end of every partition (-e). */
  count?: number
  extra?: readonly string[]
  timeoutMs?: number
}

/** Consumes with `kcat -C -J` (no group); returns the records and the raw result. */
export async function kcatConsume(
  bootstrap: string,
  topic: string,
  options: KcatConsumeOptions = {},
): Promise<{ records: Rec[]; timestamps: number[]; code: number; stderr: string }> {
  const args = ['-b', bootstrap, '-C', '-t', topic, '-J', '-q', '-o', String(options.offset ?? 'beginning')]
  if (options.partition !== undefined) args.push('-p', String(options.partition))
  if (options.count !== undefined) args.push('-c', String(options.count))
  else args.push('-e')
  args.push(...(options.extra ?? []))
  const result = await run('kcat', args, { timeoutMs: options.timeoutMs ?? 30000 })
  const lines = result.stdout.split('\n').filter((line) => line.trim() !== '')
  const parsed = lines.map((line) => JSON.parse(line) as KcatJson)
  const records = parsed.map((m): Rec => {
    const flat = m.headers ?? []
    const headers: [string, string | null][] = []
    for (let i = 0; i < flat.length; i += 2) headers.push([String(flat[i]), flat[i + 1] ?? null])
    return { partition: m.partition, offset: m.offset, key: m.key, value: m.payload, headers }
  })
  return { records, timestamps: parsed.map((m) => m.ts), code: result.code, stderr: result.stderr }
}

export interface KcatProduceOptions {
  partition?: number
  /** -K delimiter; lines are then `key<delim>value`. */
  keyDelimiter?: string
  headers?: readonly [string, string][]
  compression?: string
  extra?: readonly string[]
}

/** Produces newline-separated messages with `kcat -P` and waits for delivery. */
export function kcatProduce(
  bootstrap: string,
  topic: string,
  lines: readonly string[],
  options: KcatProduceOptions = {},
) {
  const args = ['-b', bootstrap, '-P', '-t', topic]
  if (options.partition !== undefined) args.push('-p', String(options.partition))
  if (options.keyDelimiter !== undefined) args.push('-K', options.keyDelimiter)
  for (const [k, v] of options.headers ?? []) args.push('-H', `${k}=${v}`)
  if (options.compression !== undefined) args.push('-z', options.compression)
  args.push(...(options.extra ?? []))
  return run('kcat', args, { input: `${lines.join('\n')}\n`, timeoutMs: 30000 })
}

// ------------------------------------------------------------------------ confluent-kafka

/** Runs `script command` (test/compat/python) with a JSON spec on stdin; returns its last JSON line. */
export async function pythonJson<T>(
  script: string,
  command: string,
  spec: unknown,
  timeoutMs = 45000,
): Promise<T> {
  const result = await run(PYTHON, [pythonScript(script), command], {
    input: JSON.stringify(spec),
    timeoutMs,
  })
  if (result.code !== 0) throw new Error(`${script} ${command} exited ${result.code}: ${result.stderr}`)
  const last = result.stdout.trim().split('\n').pop() ?? ''
  return JSON.parse(last) as T
}

/** Runs a ck.py (confluent-kafka) command with a JSON spec; throws with stderr when it fails. */
export function confluent<T>(command: string, spec: unknown, timeoutMs = 45000): Promise<T> {
  return pythonJson<T>('ck.py', command, spec, timeoutMs)
}

export interface ClientError {
  code: number
  name: string
  str: string
}

export interface ConsumeResult {
  records: (Rec & { timestamp: number; timestampType: number })[]
  errors: ClientError[]
  timedOut: boolean
}

export function confluentConsume(
  bootstrap: string,
  topic: string,
  assign: readonly [number, number][],
  extra: { config?: Record<string, unknown>; count?: number; timeout?: number; stopOnError?: boolean } = {},
): Promise<ConsumeResult> {
  return confluent<ConsumeResult>('consume', { bootstrap, topic, assign, timeout: 20, ...extra })
}

export interface ProduceMessage {
  key?: string | null
  value: string | null
  headers?: [string, string | null][]
  partition?: number
}

export interface ProduceReport {
  partition: number
  offset: number
  error: ClientError | null
}

export function confluentProduce(
  bootstrap: string,
  topic: string,
  messages: readonly ProduceMessage[],
  config: Record<string, unknown> = {},
): Promise<{ reports: ProduceReport[]; undelivered: number }> {
  return confluent('produce', { bootstrap, topic, messages, config })
}

/** A long-running ck.py longpoll consumer; lines arrive as parsed JSON. */
export class LongPollConsumer {
  private readonly lines: { value: Record<string, unknown>; at: number }[] = []
  private waiters: (() => void)[] = []
  private buffered = ''
  private stderr = ''
  private exited = false

  private constructor(private readonly child: ChildProcess) {
    child.stdout!.setEncoding('utf8')
    child.stdout!.on('data', (chunk: string) => {
      this.buffered += chunk
      let newline = this.buffered.indexOf('\n')
      while (newline >= 0) {
        const line = this.buffered.slice(0, newline).trim()
        this.buffered = this.buffered.slice(newline + 1)
        if (line !== '') this.lines.push({ value: JSON.parse(line), at: Date.now() })
        newline = this.buffered.indexOf('\n')
      }
      for (const waiter of this.waiters.splice(0)) waiter()
    })
    child.stderr!.setEncoding('utf8')
    child.stderr!.on('data', (chunk: string) => {
      this.stderr += chunk
    })
    child.on('exit', () => {
      this.exited = true
      for (const waiter of this.waiters.splice(0)) waiter()
    })
  }

  static start(spec: Record<string, unknown>): LongPollConsumer {
    const child = spawn(PYTHON, [pythonScript('ck.py'), 'longpoll'], { stdio: ['pipe', 'pipe', 'pipe'] })
    child.stdin!.write(`${JSON.stringify(spec)}\n`)
    return new LongPollConsumer(child)
  }

  /** Waits for the next line matching `predicate`; returns it with its arrival time (Date.now()). */
  async next(
    predicate: (line: Record<string, unknown>) => boolean,
    timeoutMs: number,
  ): Promise<{ value: Record<string, unknown>; at: number }> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const index = this.lines.findIndex((line) => predicate(line.value))
      if (index >= 0) return this.lines.splice(index, 1)[0]
      if (this.exited) throw new Error(`longpoll consumer exited: ${this.stderr}`)
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`timed out waiting for the longpoll consumer; stderr: ${this.stderr}`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
  }

  /**
   * Closes stdin (the script then closes its consumer) and waits for exit; kills it after
   * `graceMs`, since librdkafka's close waits for a parked fetch (up to fetch.wait.max.ms).
   */
  async stop(graceMs = 500): Promise<void> {
    if (this.exited) return
    this.child.stdin!.end()
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()))
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs)
    await exited
    clearTimeout(timer)
  }
}

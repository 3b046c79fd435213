/**
 * What one new partition log costs (issue 38: 33,000 replicas per broker must be created in
 * seconds and hold <= 4 KiB of heap each), small enough to run on a laptop:
 *   - storage: a LogManager on real files (log.segment.open.files.max 4096, as a broker's)
 *     creates --logs logs, 16 at a time as the replica manager applies them: CPU µs per
 *     log (this process, the libuv pool included), FileSystem calls per log by kind, heap
 *     bytes per log after forced collections (the logs kept).
 *   - broker: one in-process broker (startCluster, embedded store) creates a topic of
 *     --partitions partitions RF 1 (CreateTopics from tidelog's Admin in this process):
 *     time and CPU until every partition is hosted, FileSystem calls and heap per replica;
 *     with --heap-snapshot, snapshots before and after, and what grew, by constructor,
 *     in bytes per replica (bench/heap-summary.ts).
 *   - --strace: each section again in a child under `strace -f -c`, with the count and
 *     with none, and the syscalls of the difference per log: the creation only (the
 *     children end without a shutdown). Their CPU figures are strace's, not printed.
 *
 *   node --expose-gc dist/bench/new-log.bench.js [--sections storage,broker] [--logs 3000]
 *     [--partitions 3000] [--heap-snapshot] [--strace] [--runs 1]
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { writeHeapSnapshot } from 'node:v8'
import { Admin } from '../src/client/admin.js'
import { forEachConcurrently } from '../src/common/concurrency.js'
import type { FileHandle, FileSystem } from '../src/common/file-system.js'
import { silentLogger } from '../src/common/logger.js'
import { nodeFileSystem } from '../src/runtime/node-file-system.js'
import { startCluster } from '../src/server/cluster.js'
import { LogManager } from '../src/storage/log-manager.js'
import { heapGrowth } from './heap-summary.js'

const { values } = parseArgs({
  options: {
    sections: { type: 'string', default: 'storage,broker' },
    logs: { type: 'string', default: '3000' },
    partitions: { type: 'string', default: '3000' },
    runs: { type: 'string', default: '1' },
    'heap-snapshot': { type: 'boolean', default: false },
    strace: { type: 'boolean', default: false },
    /** Set in the children --strace starts: print only the lines the parent parses. */
    child: { type: 'boolean', default: false },
  },
})
const sections = values.sections.split(',').filter(Boolean)
const logCount = Number(values.logs)
const partitionCount = Number(values.partitions)
const runs = Number(values.runs)
/** How many logs the replica manager creates at once (replica-manager.ts applies 16 partitions at a time). */
const CREATE_CONCURRENCY = 16
const TOPIC = 'newlog'

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with node --expose-gc')

/** Heap used after collections enough that what is left is held. */
function heldHeapBytes(): number {
  for (let i = 0; i < 3; i++) gc!()
  return process.memoryUsage().heapUsed
}

function cpuMicros(): number {
  const { user, system } = process.cpuUsage()
  return user + system
}

/** Counts each call of a handle; a class, so a counted handle costs the heap one small object. */
class CountingHandle implements FileHandle {
  constructor(
    private readonly inner: FileHandle,
    private readonly count: (name: string) => void,
  ) {}
  read(buffer: Buffer, offset: number, length: number, position: number): Promise<number> {
    this.count('handle.read')
    return this.inner.read(buffer, offset, length, position)
  }
  write(buffer: Buffer, position: number): Promise<number> {
    this.count('handle.write')
    return this.inner.write(buffer, position)
  }
  writev(buffers: readonly Buffer[], position: number): Promise<number> {
    this.count('handle.writev')
    return this.inner.writev(buffers, position)
  }
  sync(): Promise<void> {
    this.count('handle.sync')
    return this.inner.sync()
  }
  truncate(length: number): Promise<void> {
    this.count('handle.truncate')
    return this.inner.truncate(length)
  }
  stat() {
    this.count('handle.stat')
    return this.inner.stat()
  }
  close(): Promise<void> {
    this.count('handle.close')
    return this.inner.close()
  }
}

/** A FileSystem that counts each call (handles' too) by name, around `inner`. */
function countingFileSystem(inner: FileSystem): { fs: FileSystem; counts: Map<string, number> } {
  const counts = new Map<string, number>()
  const count = (name: string) => counts.set(name, (counts.get(name) ?? 0) + 1)
  /** `call` after counting it under `name`. */
  const counted =
    <A extends unknown[], R>(name: string, call: (...args: A) => R) =>
    (...args: A): R => {
      count(name)
      return call(...args)
    }
  const fs: FileSystem = {
    open: async (path, flags) => {
      count(`open ${flags}`)
      return new CountingHandle(await inner.open(path, flags), count)
    },
    rename: counted('rename', (from: string, to: string) => inner.rename(from, to)),
    unlink: counted('unlink', (path: string) => inner.unlink(path)),
    mkdir: counted('mkdir', (path: string) => inner.mkdir(path)),
    rmdir: counted('rmdir', (path: string) => inner.rmdir(path)),
    readdir: counted('readdir', (path: string) => inner.readdir(path)),
    stat: counted('stat', (path: string) => inner.stat(path)),
    syncDir: counted('syncDir', (path: string) => inner.syncDir(path)),
    statfs: (path) => inner.statfs(path),
    lockExclusive: (path) => inner.lockExclusive(path),
    syncAppendStalls: () => inner.syncAppendStalls?.() ?? 0,
  }
  return { fs, counts }
}

function perEach(counts: Map<string, number>, n: number): string {
  if (n === 0) return ''
  return [...counts]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, c]) => `${name} ${(c / n).toFixed(2)}`)
    .join(', ')
}

function row(name: string, value: string, note = ''): void {
  console.log(`${name.padEnd(40)} ${value.padStart(16)}   ${note}`)
}

async function storageSection(n: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tidelog-newlog-'))
  const { fs, counts } = countingFileSystem(nodeFileSystem)
  const manager = await LogManager.open({ logDirs: [dir], fs, maxOpenFiles: 4096 })
  try {
    const heapBefore = heldHeapBytes()
    counts.clear()
    const tps = Array.from({ length: n }, (_, partition) => ({ topic: TOPIC, partition }))
    const cpuBefore = cpuMicros()
    const started = performance.now()
    await forEachConcurrently(tps, CREATE_CONCURRENCY, async (tp) => {
      await manager.getOrCreateLog(tp)
    })
    const elapsedMs = performance.now() - started
    const cpuUs = cpuMicros() - cpuBefore
    const heapAfter = heldHeapBytes()
    // Under strace only the creation counts: no shutdown, no removal (the parent removes the dir).
    if (values.child) exitChild(dir)
    row(`storage: ${n} logs created`, `${elapsedMs.toFixed(0)} ms`, `load ${loadAverage()}`)
    row('  CPU per log', `${n ? (cpuUs / n).toFixed(0) : '-'} µs`, 'this process, libuv pool included')
    row('  heap per log', `${n ? ((heapAfter - heapBefore) / n).toFixed(0) : '-'} B`, 'after forced GC')
    row('  FileSystem calls per log', '', perEach(counts, n))
  } finally {
    await manager.shutdown()
    rmSync(dir, { recursive: true, force: true })
  }
}

async function waitHosted(
  cluster: { brokers: readonly { replicaManager: { hostedPartitionCount: number } }[] },
  n: number,
) {
  const deadline = performance.now() + 600_000
  while (cluster.brokers[0].replicaManager.hostedPartitionCount < n) {
    if (performance.now() > deadline) throw new Error('partitions not hosted within 600 s')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

async function brokerSection(n: number): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tidelog-newlog-broker-'))
  const { fs, counts } = countingFileSystem(nodeFileSystem)
  const cluster = await startCluster({
    brokers: 1,
    port: 0,
    dataDir,
    logger: silentLogger,
    brokerParts: { fileSystem: fs },
  })
  const admin = new Admin({ bootstrapServers: cluster.bootstrapServers, requestTimeoutMs: 600_000 })
  try {
    // The admin's connection and metadata exist before the baseline: only the topic grows after.
    await admin.createTopics([{ topic: `${TOPIC}-warm`, numPartitions: 1, replicationFactor: 1 }])
    await waitHosted(cluster, 1)
    await new Promise((resolve) => setTimeout(resolve, 500))
    const snapshotDir = values['heap-snapshot'] ? mkdtempSync(join(tmpdir(), 'tidelog-heap-')) : undefined
    const heapBefore = heldHeapBytes()
    const before = snapshotDir && writeHeapSnapshot(join(snapshotDir, 'before.heapsnapshot'))
    const rssBefore = process.memoryUsage().rss
    counts.clear()
    const cpuBefore = cpuMicros()
    const started = performance.now()
    if (n > 0) {
      await admin
        .createTopics([{ topic: TOPIC, numPartitions: n, replicationFactor: 1 }])
        .catch((error: unknown) => {
          // Past the request's 30 s the answer is REQUEST_TIMED_OUT: the leaders are awaited here.
          if ((error as { errorCode?: number }).errorCode !== 7) throw error
        })
      await waitHosted(cluster, n + 1)
    }
    const elapsedMs = performance.now() - started
    const cpuUs = cpuMicros() - cpuBefore
    // Let the first rounds after creation (checkpoints, leader epochs) settle before measuring.
    await new Promise((resolve) => setTimeout(resolve, 2000))
    const heapAfter = heldHeapBytes()
    const rssAfter = process.memoryUsage().rss
    if (values.child) exitChild(dataDir)
    row(`broker: ${n} partitions RF 1 hosted`, `${elapsedMs.toFixed(0)} ms`, `load ${loadAverage()}`)
    row(
      '  CPU per replica',
      `${n ? (cpuUs / n).toFixed(0) : '-'} µs`,
      'whole process: client, controller, broker',
    )
    row('  heap per replica', `${n ? ((heapAfter - heapBefore) / n).toFixed(0) : '-'} B`, 'after forced GC')
    row('  RSS per replica', `${n ? ((rssAfter - rssBefore) / n / 1024).toFixed(1) : '-'} KiB`, 'one reading')
    row('  FileSystem calls per replica', '', perEach(counts, n))
    if (snapshotDir !== undefined && before) {
      const after = writeHeapSnapshot(join(snapshotDir, 'after.heapsnapshot'))
      console.log(`  heap growth by constructor (self bytes per replica; snapshots in ${snapshotDir}):`)
      for (const g of heapGrowth(before, after).slice(0, 40))
        console.log(
          `    ${(g.selfBytes / n).toFixed(0).padStart(6)} B  ${(g.count / n).toFixed(2).padStart(6)}x  ${g.group}`,
        )
    }
  } finally {
    admin.close()
    await cluster.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/** Ends a child run under strace at once, naming the directory it leaves for the parent to remove. */
function exitChild(dir: string): never {
  writeSync(1, `CHILD-DIR ${dir}\n`)
  process.exit(0)
}

function loadAverage(): string {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')
}

/** Syscall counts of one child run of `section` with `n` logs, from `strace -f -c`. */
function straceCounts(section: string, n: number): Map<string, number> {
  const out = join(mkdtempSync(join(tmpdir(), 'tidelog-strace-')), 'strace.txt')
  const count = section === 'storage' ? ['--logs', String(n)] : ['--partitions', String(n)]
  const stdout = execFileSync(
    'strace',
    [
      '-f',
      '-c',
      '-o',
      out,
      process.execPath,
      '--expose-gc',
      fileURLToPath(import.meta.url),
      '--child',
      '--sections',
      section,
      ...count,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' },
  )
  const left = /^CHILD-DIR (.+)$/m.exec(stdout)?.[1]
  if (left === undefined) throw new Error(`the strace child did not finish: ${stdout}`)
  rmSync(left, { recursive: true, force: true })
  const counts = new Map<string, number>()
  for (const line of readFileSync(out, 'utf8').split('\n')) {
    // % time  seconds  usecs/call  calls  [errors]  syscall
    const fields = line.trim().split(/\s+/)
    if (fields.length < 5 || !/^\d/.test(fields[0])) continue
    const name = fields[fields.length - 1]
    if (name === 'total') continue
    counts.set(name, Number(fields[3]))
  }
  return counts
}

function straceSection(section: string, n: number): void {
  const none = straceCounts(section, 0)
  const some = straceCounts(section, n)
  const perLog = [...some]
    .map(([name, c]) => [name, (c - (none.get(name) ?? 0)) / n] as const)
    .filter(([, c]) => c >= 0.05)
    .sort((a, b) => b[1] - a[1])
  const total = perLog.reduce((sum, [, c]) => sum + c, 0)
  row(`${section}: syscalls per log (strace -f -c)`, total.toFixed(1), `${n} logs less none`)
  console.log(`    ${perLog.map(([name, c]) => `${name} ${c.toFixed(2)}`).join(', ')}`)
}

async function main(): Promise<void> {
  if (!values.child)
    console.log(`new-log bench: node ${process.version}, load average ${loadAverage()} at start`)
  for (let run = 0; run < runs; run++) {
    if (sections.includes('storage')) await storageSection(logCount)
    if (sections.includes('broker')) await brokerSection(partitionCount)
  }
  if (values.strace && !values.child) {
    if (sections.includes('storage')) straceSection('storage', logCount)
    if (sections.includes('broker')) straceSection('broker', partitionCount)
  }
}

await main()

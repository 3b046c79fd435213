/**
 * Profile of the replicated write path (RF 3, acks=all, min.insync.replicas=2) with
 * librdkafka as the load generator (bench/native/rdkafka-perf.c) against an in-process
 * 3-broker cluster, so each stage of a produce can be timed where it happens:
 *
 *   produce received -> leader appended -> 1st/last follower appended -> the follower's
 *   next fetch reporting it -> high watermark -> response
 *
 * Runs `--runs` steady runs one after another on a topic created `--created-ms` earlier
 * (the slow start of issue 19), then one unlimited run, each with the event loop's delay
 * histogram (perf_hooks.monitorEventLoopDelay). Run under `node --cpu-prof` for the costs.
 * In-process brokers share one event loop: absolute figures include its contention.
 *
 *   node [--cpu-prof] dist/bench/replication-profile.bench.js [--rate 2000] [--seconds 2] [--runs 4]
 */
import { spawn } from 'node:child_process'
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { Admin } from '../src/client/index.js'
import { Partition } from '../src/replication/partition.js'
import { startCluster } from '../src/server/cluster.js'
import { produceHandler } from '../src/server/handlers/produce.js'
import { perf, perfBinary } from './load-generator.js'

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '2' },
    runs: { type: 'string', default: '4' },
    'created-ms': { type: 'string', default: '5000' },
    'unlimited-records': { type: 'string', default: '100000' },
    partitions: { type: 'string', default: '1' },
    set: { type: 'string', multiple: true, default: [] },
    /** One broker, RF 1, acks=1: the same breakdown without replication, for comparison. */
    rf1: { type: 'boolean', default: false },
  },
})
const brokers = values.rf1 ? 1 : 3
const acks = values.rf1 ? '1' : '-1'
const rate = Number(values.rate)
const seconds = Number(values.seconds)
const runs = Number(values.runs)
const partitions = Number(values.partitions)

// ---- stage tracing: per partition, traces in offset order with a cursor per stage --------
interface Trace {
  target: number
  received: number
  appended: number
  followerAppended: number[]
  followerFetched: number[]
  hw?: number
  responded?: number
}
const now = (): number => performance.now()
let tracing = false
interface PartitionTraces {
  list: Trace[]
  byFirstOffset: Map<number, Trace>
  /** Produce requests received and not yet appended, in order. */
  received: number[]
  cursors: Map<string, number>
}
const traced = new Map<number, PartitionTraces>()
const done: Trace[] = []
function tracesOf(partition: number): PartitionTraces {
  let t = traced.get(partition)
  if (!t) {
    t = { list: [], byFirstOffset: new Map(), received: [], cursors: new Map() }
    traced.set(partition, t)
  }
  return t
}
/** Applies `f` once to each trace of `partition` with a target <= offset, per stage `stage`. */
function advance(partition: number, stage: string, offset: number, f: (t: Trace) => void): void {
  const t = tracesOf(partition)
  let cursor = t.cursors.get(stage) ?? 0
  while (cursor < t.list.length && t.list[cursor].target <= offset) f(t.list[cursor++])
  t.cursors.set(stage, cursor)
}

type AnyFn = (...args: never[]) => unknown
const proto = Partition.prototype as unknown as Record<string, AnyFn>
function wrap(
  name: string,
  before: (self: Partition, args: unknown[]) => void,
  after: (self: Partition, args: unknown[], result: unknown) => void,
): void {
  const original = proto[name] as (...args: unknown[]) => unknown
  proto[name] = function (this: Partition, ...args: unknown[]) {
    if (tracing) before(this, args)
    const result = original.apply(this, args)
    if (tracing) {
      if (result instanceof Promise)
        result.then(
          (r) => after(this, args, r),
          () => undefined,
        )
      else after(this, args, result)
    }
    return result
  } as AnyFn
}
const nodeOf = new WeakMap<Partition, number>()
/** Follower fetch offsets recorded (one per partition per follower fetch) while tracing. */
let followerFetches = 0
wrap(
  'appendRecordsToLeader',
  (self) => tracesOf(self.partition).received.push(now()),
  (self, _args, info) => {
    const { firstOffset, lastOffset } = info as { firstOffset: number; lastOffset: number }
    const t = tracesOf(self.partition)
    const trace: Trace = {
      target: lastOffset + 1,
      received: t.received.shift() ?? now(),
      appended: now(),
      followerAppended: [],
      followerFetched: [],
    }
    t.list.push(trace)
    t.byFirstOffset.set(firstOffset, trace)
  },
)
wrap(
  'appendAsFollower',
  () => undefined,
  (self) => {
    const t = now()
    advance(self.partition, `append${nodeOf.get(self)}`, self.log.logEndOffset, (trace) =>
      trace.followerAppended.push(t),
    )
  },
)
wrap(
  'updateFollowerFetchState',
  () => undefined,
  (self, args) => {
    const t = now()
    followerFetches++
    advance(self.partition, `fetch${args[0]}`, args[1] as number, (trace) => trace.followerFetched.push(t))
  },
)
wrap(
  'maybeIncrementHighWatermark',
  () => undefined,
  (self) => {
    if (!self.isLeader) return
    const t = now()
    advance(self.partition, 'hw', self.highWatermark, (trace) => {
      trace.hw = t
    })
  },
)
// The response: the produce handler's promise settles once every partition is acknowledged.
const originalHandle = produceHandler.handle
produceHandler.handle = async (context, request) => {
  const response = await originalHandle(context, request)
  if (tracing && response) {
    const t = now()
    for (const topic of response.responses)
      for (const p of topic.partitionResponses) {
        const traces = tracesOf(p.index)
        const trace = traces.byFirstOffset.get(Number(p.baseOffset))
        if (trace === undefined) continue
        traces.byFirstOffset.delete(Number(p.baseOffset))
        trace.responded = t
        done.push(trace)
      }
  }
  return response
}

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}
function stats(xs: (number | undefined)[]): string {
  const s = xs.filter((x): x is number => x !== undefined && Number.isFinite(x)).sort((a, b) => a - b)
  const f = (x: number): string => x.toFixed(2).padStart(8)
  return `${f(pct(s, 50))} ${f(pct(s, 99))} ${f(s.at(-1) ?? Number.NaN)}`
}

function report(label: string, eld: ReturnType<typeof monitorEventLoopDelay>, probe: string): void {
  console.log(`\n${label}: ${done.length} produce requests traced (ms: p50 p99 max)`)
  const rows: [string, (t: Trace) => number | undefined][] = [
    ['received -> leader appended', (t) => t.appended - t.received],
    ['appended -> 1st follower appended', (t) => (t.followerAppended[0] ?? Number.NaN) - t.appended],
    ['appended -> 2nd follower appended', (t) => (t.followerAppended[1] ?? Number.NaN) - t.appended],
    [
      '1st follower appended -> its next fetch',
      (t) => (t.followerFetched[0] ?? Number.NaN) - (t.followerAppended[0] ?? Number.NaN),
    ],
    ['appended -> 2nd follower fetch reports it', (t) => (t.followerFetched[1] ?? Number.NaN) - t.appended],
    ['appended -> high watermark', (t) => (t.hw ?? Number.NaN) - t.appended],
    ['high watermark -> response', (t) => (t.responded ?? Number.NaN) - (t.hw ?? Number.NaN)],
    ['received -> response (total)', (t) => (t.responded ?? Number.NaN) - t.received],
  ]
  for (const [name, f] of rows) console.log(`  ${name.padEnd(42)} ${stats(done.map(f))}`)
  const ms = (ns: number): string => (ns / 1e6).toFixed(2)
  console.log(
    `  event-loop delay (ms): p50 ${ms(eld.percentile(50))} p99 ${ms(eld.percentile(99))} max ${ms(eld.max)}`,
  )
  const kinds = [...gc].map(
    ([kind, g]) => `${kind} ${g.count}x ${g.totalMs.toFixed(0)} ms (max ${g.maxMs.toFixed(1)})`,
  )
  console.log(`  GC: ${kinds.join(', ') || 'none'}`)
  console.log(`  a bare node process beside it (the machine's noise floor): ${probe}`)
}

const GC_KINDS: Record<number, string> = { 1: 'minor', 2: 'major', 4: 'incremental', 8: 'weak callbacks' }
const gc = new Map<string, { count: number; totalMs: number; maxMs: number }>()
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const kind = GC_KINDS[(entry as unknown as { detail?: { kind?: number } }).detail?.kind ?? 0] ?? 'other'
    const g = gc.get(kind) ?? { count: 0, totalMs: 0, maxMs: 0 }
    g.count++
    g.totalMs += entry.duration
    g.maxMs = Math.max(g.maxMs, entry.duration)
    gc.set(kind, g)
  }
}).observe({ entryTypes: ['gc'] })

/**
 * A bare node process measuring its own event-loop delay while a run lasts: what the
 * machine (other processes on 2 shared cores) does to any event loop, tidelog or not.
 */
async function startProbe(): Promise<{ stop: () => Promise<string> }> {
  const code = `const { monitorEventLoopDelay } = require('node:perf_hooks')
const h = monitorEventLoopDelay({ resolution: 1 }); setInterval(() => {}, 1000)
process.on('message', (m) => { if (m === 'start') { h.enable(); return }
  const ms = (ns) => (ns / 1e6).toFixed(2)
  process.send('event-loop delay p50 ' + ms(h.percentile(50)) + ' p99 ' + ms(h.percentile(99)) + ' max ' + ms(h.max) + ' ms', () => process.exit(0)) })
process.send('ready')`
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  // Started, and its start-up's CPU spent, before the run it watches.
  await new Promise((resolve) => child.once('message', resolve))
  await new Promise((resolve) => setTimeout(resolve, 300))
  child.send('start')
  return {
    stop: () =>
      new Promise((resolve) => {
        child.once('message', (m) => resolve(String(m)))
        child.send('stop')
      }),
  }
}

async function main(): Promise<void> {
  const binary = perfBinary()
  const properties: Record<string, string | number> = {
    'default.replication.factor': brokers,
    'min.insync.replicas': Math.min(2, brokers),
    'num.partitions': partitions,
    ...Object.fromEntries(
      values.set.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    ),
  }
  const cluster = await startCluster({ brokers, port: 0, properties })
  try {
    const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
    await admin.createTopics([{ topic: 'profile', numPartitions: partitions, replicationFactor: brokers }])
    await admin.close()
    await new Promise((resolve) => setTimeout(resolve, Number(values['created-ms'])))
    cluster.brokers.forEach((broker, node) => {
      for (let i = 0; i < partitions; i++) {
        const p = broker.replicaManager.getPartition('profile', i)
        if (p) nodeOf.set(p, node)
      }
    })
    const run = async (label: string, args: string[]): Promise<void> => {
      traced.clear()
      done.length = 0
      const probe = await startProbe()
      gc.clear()
      const eld = monitorEventLoopDelay({ resolution: 1 })
      eld.enable()
      tracing = true
      followerFetches = 0
      const cpuBefore = process.cpuUsage()
      const result = await perf(binary, args)
      const cpu = process.cpuUsage(cpuBefore)
      tracing = false
      eld.disable()
      console.log(
        `\n${label}: librdkafka ${result.mbPerSec} MB/s, ${result.recordsPerSec} records/s, latency p50 ${result.p50Ms} p99 ${result.p99Ms} max ${result.maxMs} ms`,
      )
      report(label, eld, await probe.stop())
      // Less at the mercy of the machine's other load than latency: what the brokers spent.
      const perRecord = (us: number): string => (us / result.records).toFixed(1)
      console.log(
        `  brokers' CPU per record: ${perRecord(cpu.user + cpu.system)} us (user ${perRecord(cpu.user)}, system ${perRecord(cpu.system)})`,
      )
      // How much each follower fetch round trip carries: fewer, larger ones cost less per byte.
      const mb = (result.records * 1024) / 1e6
      console.log(`  follower fetches (per partition) per MB produced: ${(followerFetches / mb).toFixed(1)}`)
    }
    for (let i = 1; i <= runs; i++)
      await run(`steady run ${i} at ${rate}/s`, [
        'produce',
        cluster.bootstrapServers,
        'profile',
        String(rate * seconds),
        '1024',
        acks,
        String(rate),
        '0',
      ])
    await run('unlimited', [
      'produce',
      cluster.bootstrapServers,
      'profile',
      values['unlimited-records'],
      '1024',
      acks,
      '0',
      '5',
    ])
  } finally {
    await cluster.stop()
  }
}

await main()

/**
 * acks=all latency on an in-process 3-broker cluster (RF=3, one partition), with a
 * per-request breakdown: leader append done, each follower's append of the records, each
 * follower's next fetch carrying the new offset, high-watermark advance, client ack.
 * In-process brokers share one event loop, so absolute figures include its contention.
 *
 *   node .build/x/bench/acks-latency.bench.js [--rates 1000,2000] [--seconds 5] [--unlimited-records 100000]
 */
import { parseArgs } from 'node:util'
import { Admin, Producer } from '../src/client/index.js'
import { Partition } from '../src/replication/partition.js'
import { startCluster } from '../src/server/cluster.js'

const { values } = parseArgs({
  options: {
    rates: { type: 'string', default: '1000,2000' },
    seconds: { type: 'string', default: '5' },
    'unlimited-records': { type: 'string', default: '100000' },
    'record-size': { type: 'string', default: '1024' },
    acks: { type: 'string', default: 'all' },
    partitions: { type: 'string', default: '1' },
  },
})
const rates = values.rates.split(',').map(Number)
const seconds = Number(values.seconds)
const unlimitedRecords = Number(values['unlimited-records'])
const recordSize = Number(values['record-size'])
const partitions = Number(values.partitions)

// ---- tracing: per target offset (last offset + 1 of an acks=all append) ----------------
interface Trace {
  sent: number
  appended?: number
  followerAppended: Map<number, number>
  followerFetched: Map<number, number>
  hw?: number
  acked?: number
}
const now = (): number => performance.now()
let tracing = false
const traces = new Map<string, Trace>() // by partition and target offset
const tkey = (partition: number, target: number): string => `${partition}:${target}`
let pendingSent: number[] = []
const clientLatency: number[] = []

type AnyFn = (...args: never[]) => unknown
const proto = Partition.prototype as unknown as Record<string, AnyFn>
function wrap(name: string, after: (self: Partition, args: unknown[], result: unknown) => void): void {
  const original = proto[name] as (...args: unknown[]) => unknown
  proto[name] = function (this: Partition, ...args: unknown[]) {
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
/** Whether trace `key` is of `partition` with its target offset at most `offset`. */
function inPartition(key: string, partition: Partition, offset: number): boolean {
  const colon = key.indexOf(':')
  return Number(key.slice(0, colon)) === partition.partition && Number(key.slice(colon + 1)) <= offset
}
wrap('appendRecordsToLeader', (self, _args, info) => {
  const target = (info as { lastOffset: number }).lastOffset + 1
  const sent = pendingSent.shift() ?? now()
  traces.set(tkey(self.partition, target), {
    sent,
    appended: now(),
    followerAppended: new Map(),
    followerFetched: new Map(),
  })
})
wrap('appendAsFollower', (self) => {
  const t = now()
  const end = self.log.logEndOffset
  const node = nodeOf.get(self) ?? -1
  for (const [key, trace] of traces)
    if (inPartition(key, self, end) && !trace.followerAppended.has(node)) trace.followerAppended.set(node, t)
})
wrap('updateFollowerFetchState', (self, args) => {
  const [replicaId, fetchOffset] = args as [number, number]
  const t = now()
  for (const [key, trace] of traces)
    if (inPartition(key, self, fetchOffset) && !trace.followerFetched.has(replicaId))
      trace.followerFetched.set(replicaId, t)
})
wrap('setHighWatermark', (self) => {
  if (!self.isLeader) return
  const t = now()
  for (const [key, trace] of traces)
    if (inPartition(key, self, self.highWatermark) && trace.hw === undefined) trace.hw = t
})

const done: Trace[] = []
function finish(t: Trace, key: string): void {
  t.acked = now()
  traces.delete(key)
  done.push(t)
}

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}
function stats(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b)
  return `p50 ${pct(s, 50).toFixed(2)} p99 ${pct(s, 99).toFixed(2)} max ${(s.at(-1) ?? Number.NaN).toFixed(2)}`
}

function report(label: string): void {
  const phase = (f: (t: Trace) => number | undefined): number[] =>
    done.map(f).filter((x): x is number => x !== undefined && Number.isFinite(x))
  console.log(`\n${label}: ${done.length} requests`)
  console.log(`  send -> ack (total)           ${stats(phase((t) => t.acked! - t.sent))}`)
  console.log(`  send -> leader appended       ${stats(phase((t) => t.appended! - t.sent))}`)
  console.log(
    `  appended -> 1st follower append ${stats(phase((t) => Math.min(...t.followerAppended.values()) - t.appended!))}`,
  )
  console.log(
    `  appended -> last follower append ${stats(phase((t) => Math.max(...t.followerAppended.values()) - t.appended!))}`,
  )
  console.log(
    `  appended -> last follower fetch ${stats(phase((t) => Math.max(...t.followerFetched.values()) - t.appended!))}`,
  )
  console.log(
    `  last follower append -> its fetch ${stats(
      phase((t) => Math.max(...t.followerFetched.values()) - Math.max(...t.followerAppended.values())),
    )}`,
  )
  console.log(`  appended -> HW                ${stats(phase((t) => t.hw! - t.appended!))}`)
  console.log(`  HW -> ack at client           ${stats(phase((t) => t.acked! - t.hw!))}`)
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

async function main(): Promise<void> {
  const cluster = await startCluster({
    brokers: 3,
    port: 0,
    properties: { 'default.replication.factor': 3, 'min.insync.replicas': 2, 'num.partitions': 1 },
  })
  try {
    const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
    await admin.createTopics([{ topic: 'lat', numPartitions: partitions, replicationFactor: 3 }])
    await admin.close()
    await sleep(1000)
    cluster.brokers.forEach((broker, node) => {
      for (let i = 0; i < partitions; i++) {
        const p = broker.replicaManager.getPartition('lat', i)
        if (p) nodeOf.set(p, node)
      }
    })
    const value = Buffer.alloc(recordSize, 'x')
    const producer = new Producer({
      bootstrapServers: cluster.bootstrapServers,
      acks: values.acks === 'all' ? 'all' : 1,
      lingerMs: 0,
    })
    for (let i = 0; i < 200; i++) await producer.send({ topic: 'lat', partition: i % partitions, value }) // warm up
    for (const rate of rates) {
      traces.clear()
      done.length = 0
      clientLatency.length = 0
      tracing = true
      const interval = 1000 / rate
      const start = now()
      const total = Math.round(rate * seconds)
      const inflight: Promise<void>[] = []
      for (let i = 0; i < total; i++) {
        const due = start + i * interval
        const wait = due - now()
        if (wait > 1) await sleep(wait)
        const sent = now()
        pendingSent.push(sent)
        inflight.push(
          producer.send({ topic: 'lat', partition: i % partitions, value }).then((meta) => {
            const key = tkey(meta.partition, Number(meta.offset) + 1)
            const t = traces.get(key)
            if (t) finish(t, key)
            clientLatency.push(now() - sent)
          }),
        )
      }
      await Promise.all(inflight)
      tracing = false
      pendingSent = []
      const elapsed = (now() - start) / 1000
      console.log(`\nclient send -> ack, every record: ${stats(clientLatency)}`)
      report(`rate ${rate}/s (achieved ${(total / elapsed).toFixed(0)}/s)`)
    }
    // unlimited
    traces.clear()
    done.length = 0
    tracing = true
    const start = now()
    let acked = 0
    await new Promise<void>((resolve, reject) => {
      for (let i = 0; i < unlimitedRecords; i++)
        producer.produce({ topic: 'lat', partition: i % partitions, value }, (err, meta) => {
          if (err) reject(err)
          else {
            const key = tkey(meta!.partition, Number(meta!.offset) + 1)
            const t = traces.get(key)
            if (t) finish(t, key)
            if (++acked === unlimitedRecords) resolve()
          }
        })
    })
    tracing = false
    report('unlimited (send times meaningless)')
    const elapsed = (now() - start) / 1000
    console.log(
      `\nunlimited: ${unlimitedRecords} records in ${elapsed.toFixed(2)} s: ${(
        (unlimitedRecords * recordSize) / 2 ** 20 / elapsed
      ).toFixed(1)} MB/s`,
    )
    await producer.close()
  } finally {
    await cluster.stop()
  }
}

await main()

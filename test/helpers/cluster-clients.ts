/**
 * Client-side checks shared by the multi-process cluster tests: produce one record to
 * each of some partitions with kafkajs and read them back with kcat, and the leader a
 * clean election must pick.
 */
import assert from 'node:assert/strict'
import { Kafka, logLevel } from 'kafkajs'
import { kcatConsume, kcatProduce } from './compat-clients.js'
import type { MetadataView, PartitionView } from './metadata-view.js'

export function kafka(bootstrap: string): Kafka {
  return new Kafka({
    clientId: 'tidelog-cluster-test',
    brokers: bootstrap.split(','),
    logLevel: logLevel.NOTHING,
    retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 1000 },
  })
}

/** kafkajs producer (acks=all): one record per partition; returns the values by partition. */
export async function produceOnePerPartition(
  bootstrap: string,
  topic: string,
  partitions: readonly number[],
  tag: string,
): Promise<Map<number, string>> {
  const producer = kafka(bootstrap).producer({ allowAutoTopicCreation: false })
  await producer.connect()
  try {
    const values = new Map(partitions.map((p) => [p, `${tag}-${topic}-${p}`]))
    await producer.send({
      topic,
      acks: -1,
      timeout: 10000,
      messages: [...values].map(([partition, value]) => ({ partition, key: `k${partition}`, value })),
    })
    return values
  } finally {
    await producer.disconnect()
  }
}

/**
 * kcat producer (librdkafka, acks=all by default): one record per partition. Unlike
 * kafkajs, which fails a whole send while any partition of the topic reports
 * LEADER_NOT_AVAILABLE, librdkafka produces to the partitions that have a leader.
 */
export async function kcatProduceOnePerPartition(
  bootstrap: string,
  topic: string,
  partitions: readonly number[],
  tag: string,
): Promise<Map<number, string>> {
  const values = new Map(partitions.map((p) => [p, `${tag}-${topic}-${p}`]))
  for (const [partition, value] of values) {
    const result = await kcatProduce(bootstrap, topic, [value], { partition, extra: ['-X', 'acks=all'] })
    assert.equal(result.code, 0, `kcat produce to ${topic}-${partition}: ${result.stderr}`)
  }
  return values
}

/** Short long-polls, so kcat -e sees the end of a partition quickly. */
const KCAT_FAST_EOF = ['-X', 'fetch.wait.max.ms=20']

/**
 * Every value in `expected` is in its partition, read by kcat from the beginning: in one
 * run when `expected` covers all `partitionCount` partitions (-e waits for the end of each,
 * so not while one is offline), otherwise one run per partition.
 */
export async function assertReadBack(
  bootstrap: string,
  topic: string,
  expected: ReadonlyMap<number, readonly string[]>,
  partitionCount: number,
): Promise<void> {
  const runs = expected.size === partitionCount ? [undefined] : [...expected.keys()]
  const seen = new Map<number, Set<string | null>>()
  for (const partition of runs) {
    const { records, code, stderr } = await kcatConsume(bootstrap, topic, {
      ...(partition === undefined ? {} : { partition }),
      extra: KCAT_FAST_EOF,
      timeoutMs: 20000,
    })
    assert.equal(code, 0, `kcat consume ${topic}${partition === undefined ? '' : `-${partition}`}: ${stderr}`)
    for (const r of records) seen.set(r.partition, (seen.get(r.partition) ?? new Set()).add(r.value))
  }
  for (const [partition, values] of expected) {
    const got = seen.get(partition) ?? new Set()
    for (const value of values) assert.ok(got.has(value), `${topic}-${partition} lacks ${value}: ${[...got]}`)
  }
}

/** Adds `values` (partition → value) to `into` (partition → values). */
export function remember(into: Map<number, string[]>, values: ReadonlyMap<number, string>): void {
  for (const [partition, value] of values) into.set(partition, [...(into.get(partition) ?? []), value])
}

/** The leader a clean election picks once `dead` are gone: first replica in assignment order in the live ISR. */
export function cleanLeader(before: PartitionView, dead: ReadonlySet<number>): number {
  return before.replicas.find((id) => !dead.has(id) && before.isr.includes(id)) ?? -1
}

/** Partition indexes of `topic` whose leader is live (not -1 and not in `dead`). */
export function withLiveLeader(view: MetadataView, topic: string, dead: ReadonlySet<number> = new Set()) {
  return view.topics
    .get(topic)!
    .filter((p) => p.leader >= 0 && !dead.has(p.leader))
    .map((p) => p.partition)
}

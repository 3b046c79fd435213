/**
 * The cluster metadata as real clients see it, in one shape for kcat (`kcat -L -J`,
 * librdkafka) and kafkajs (admin.describeCluster + fetchTopicMetadata), so cluster tests
 * can compare the two and poll either for a failover.
 */
import type { Admin } from 'kafkajs'
import { run } from './cluster.js'

export interface PartitionView {
  readonly partition: number
  /** -1 when the partition has no leader. */
  readonly leader: number
  readonly replicas: readonly number[]
  readonly isr: readonly number[]
  /** The partition's error as the client reports it (kcat: a name, kafkajs: a code), or null. */
  readonly error: string | null
}

export interface MetadataView {
  readonly controllerId: number
  /** Node ids, sorted. */
  readonly brokers: readonly number[]
  readonly topics: ReadonlyMap<string, readonly PartitionView[]>
}

interface KcatMetadataJson {
  controllerid?: number
  brokers: { id: number; name: string }[]
  topics: {
    topic: string
    error?: string
    partitions: {
      partition: number
      leader: number
      error?: string
      replicas: { id: number }[]
      isrs: { id: number }[]
    }[]
  }[]
}

/** `kcat -L -J` against `bootstrap` (a list of live brokers); all topics unless `topic` is given. */
export async function kcatMetadata(bootstrap: string, topic?: string): Promise<MetadataView> {
  const args = ['-b', bootstrap, '-L', '-J', '-m', '5']
  if (topic !== undefined) args.push('-t', topic)
  const result = await run('kcat', args, { timeoutMs: 10000 })
  if (result.code !== 0) throw new Error(`kcat -L exited ${result.code}: ${result.stderr}`)
  const json = JSON.parse(result.stdout) as KcatMetadataJson
  const topics = new Map<string, PartitionView[]>()
  for (const t of json.topics) {
    topics.set(
      t.topic,
      t.partitions
        .map((p) => ({
          partition: p.partition,
          leader: p.leader,
          replicas: p.replicas.map((r) => r.id),
          isr: p.isrs.map((r) => r.id),
          error: p.error ?? null,
        }))
        .sort((a, b) => a.partition - b.partition),
    )
  }
  return {
    controllerId: json.controllerid ?? -1,
    brokers: json.brokers.map((b) => b.id).sort((a, b) => a - b),
    topics,
  }
}

/**
 * The same view through a connected kafkajs admin (it refreshes metadata on each call).
 * kafkajs rejects a whole Metadata response in which any partition has an error (an
 * offline partition's LEADER_NOT_AVAILABLE), so ask only for topics that are all online
 * and see `kafkajsMetadataError` for the others; describeCluster (brokers, controller)
 * asks for all topics, so skip it while any partition in the cluster is offline.
 */
export async function kafkajsMetadata(
  admin: Admin,
  topics: readonly string[],
  options: { describeCluster?: boolean } = {},
): Promise<MetadataView> {
  const metadata = await admin.fetchTopicMetadata({ topics: [...topics] })
  // describeCluster asks for every topic, so it fails while any partition is offline;
  // without it the view has no brokers and controller -1.
  const cluster =
    options.describeCluster === false ? { brokers: [], controller: -1 } : await admin.describeCluster()
  return {
    controllerId: cluster.controller ?? -1,
    brokers: cluster.brokers.map((b) => b.nodeId).sort((a, b) => a - b),
    topics: new Map(
      metadata.topics.map((t) => [
        t.name,
        t.partitions
          .map((p) => ({
            partition: p.partitionId,
            leader: p.leader,
            replicas: [...p.replicas],
            isr: [...p.isr],
            error: p.partitionErrorCode ? String(p.partitionErrorCode) : null,
          }))
          .sort((a, b) => a.partition - b.partition),
      ]),
    ),
  }
}

/** The error type (e.g. LEADER_NOT_AVAILABLE) kafkajs fails with when asked for `topics`, or null. */
export async function kafkajsMetadataError(admin: Admin, topics: readonly string[]): Promise<string | null> {
  try {
    await admin.fetchTopicMetadata({ topics: [...topics] })
    return null
  } catch (error) {
    // Retries exhausted wrap the protocol error (with its `type`) as `cause`.
    let cause: unknown = error
    while (cause instanceof Error && !('type' in cause) && cause.cause !== undefined) cause = cause.cause
    return (cause as { type?: string }).type ?? String(error)
  }
}

/** Partitions (as `topic-index`) without a live leader, or led by `dead` or with it in their ISR. */
export function notFailedOver(view: MetadataView, dead: number): string[] {
  const left: string[] = []
  for (const [topic, partitions] of view.topics)
    for (const p of partitions)
      if (p.leader === dead || p.leader < 0 || p.isr.includes(dead)) left.push(`${topic}-${p.partition}`)
  return left
}

/** Partitions (as `topic-index`) led by `nodeId`. */
export function ledBy(view: MetadataView, nodeId: number): string[] {
  const led: string[] = []
  for (const [topic, partitions] of view.topics)
    for (const p of partitions) if (p.leader === nodeId) led.push(`${topic}-${p.partition}`)
  return led
}

export function partitionOf(view: MetadataView, topic: string, partition: number): PartitionView {
  const found = view.topics.get(topic)?.[partition]
  if (!found) throw new Error(`${topic}-${partition} not in the metadata`)
  return found
}

/** Count per broker of `pick(partition)` over every partition of `topics`. */
export function countPerBroker(
  view: MetadataView,
  topics: readonly string[],
  pick: (p: PartitionView) => readonly number[],
): Map<number, number> {
  const counts = new Map<number, number>(view.brokers.map((id) => [id, 0]))
  for (const topic of topics)
    for (const p of view.topics.get(topic) ?? [])
      for (const id of pick(p)) counts.set(id, (counts.get(id) ?? 0) + 1)
  return counts
}

/**
 * Test helpers for topics: create one directly through the broker's metadata (so a test
 * does not depend on the CreateTopics handler) and wait until its partitions are hosted.
 */
import { BatchHeader, LOG_OVERHEAD } from '../../src/protocol/batch-header.js'
import type { Cluster } from '../../src/server/cluster.js'
import { waitUntil } from './wait.js'

export interface TestTopic {
  partitions?: number
  configs?: Record<string, string>
}

/** Creates `name` on the cluster's only broker and waits until every partition is served. */
export async function createTopic(cluster: Cluster, name: string, spec: TestTopic = {}): Promise<void> {
  const broker = cluster.brokers[0]
  const partitions = spec.partitions ?? 1
  await broker.metadata.update((image) => {
    if (image.topics.has(name)) throw new Error(`topic ${name} exists`)
    const topic = broker.metadata.createTopicImage({
      name,
      partitions,
      replicationFactor: 1,
      configs: spec.configs ?? {},
    })
    return { ...image, topics: new Map(image.topics).set(name, topic) }
  })
  await waitForPartitions(cluster, name, partitions)
}

/** Waits until the broker hosts partitions 0..count-1 of `topic` (the image is applied async). */
export async function waitForPartitions(
  cluster: Cluster,
  topic: string,
  count: number,
  timeoutMs = 5000,
): Promise<void> {
  const replicaManager = cluster.brokers[0].replicaManager
  let hosted = 0
  await waitUntil(
    `${topic}: ${count} partitions hosted`,
    timeoutMs,
    () => {
      hosted = 0
      for (let p = 0; p < count; p++) if (replicaManager.getPartition(topic, p)) hosted++
      return hosted === count
    },
    10,
  ).catch((error: unknown) => {
    throw new Error(`${topic}: ${hosted}/${count} partitions hosted after ${timeoutMs} ms`, { cause: error })
  })
}

/** True when the broker advertises (serves) the API key. */
export function serves(cluster: Cluster, apiKey: number): boolean {
  return cluster.brokers[0].apiVersionRanges().some((range) => range.apiKey === apiKey)
}

/** Codec ids (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd) of the batches stored in a partition, in order. */
export async function storedCodecs(cluster: Cluster, topic: string, partition: number): Promise<number[]> {
  const hosted = cluster.brokers[0].replicaManager.getPartition(topic, partition)
  if (!hosted) throw new Error(`${topic}-${partition} is not hosted`)
  const log = hosted.log
  const codecs: number[] = []
  let offset = log.logStartOffset
  while (offset < log.logEndOffset) {
    const info = await log.read(offset, {
      maxBytes: 1 << 20,
      maxOffset: log.logEndOffset,
      minOneMessage: true,
    })
    if (info.sizeInBytes === 0) break
    for (const chunk of info.records) {
      for (let at = 0; at + LOG_OVERHEAD <= chunk.length; ) {
        const header = new BatchHeader(chunk, at)
        codecs.push(header.compression)
        at += header.sizeInBytes
      }
    }
    offset = info.nextOffset
  }
  return codecs
}

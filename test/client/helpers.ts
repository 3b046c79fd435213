/**
 * Helpers for the client tests: a broker per test, topics made with tidelog's own Admin,
 * and reading a whole topic back with tidelog's Consumer.
 */
import { Admin } from '../../src/client/admin.js'
import { Consumer, type ConsumerRecord } from '../../src/client/consumer.js'
import type { Cluster, StartClusterOptions } from '../../src/server/cluster.js'
import { startBroker } from '../helpers/cluster.js'

export async function withBroker<T>(
  fn: (cluster: Cluster) => Promise<T>,
  options: Omit<StartClusterOptions, 'brokers'> = {},
): Promise<T> {
  const cluster = await startBroker(options)
  try {
    return await fn(cluster)
  } finally {
    await cluster.stop()
  }
}

export async function createTopics(
  bootstrap: string,
  topics: readonly {
    topic: string
    partitions?: number
    replicationFactor?: number
    configs?: Record<string, string>
  }[],
): Promise<void> {
  const admin = new Admin({ bootstrapServers: bootstrap })
  try {
    await admin.createTopics(
      topics.map((t) => ({
        topic: t.topic,
        numPartitions: t.partitions ?? 1,
        replicationFactor: t.replicationFactor ?? 1,
        configs: t.configs ?? {},
      })),
    )
    await admin.client.waitForTopics(
      topics.map((t) => t.topic),
      { maxWaitMs: 10000 },
    )
  } finally {
    admin.close()
  }
}

/** Every record of the topic from the beginning to its end offsets (as of the call). */
export async function readAll(
  bootstrap: string,
  topic: string,
  timeoutMs = 20000,
): Promise<ConsumerRecord[]> {
  const consumer = new Consumer({
    bootstrapServers: bootstrap,
    autoOffsetReset: 'earliest',
    fetchMaxWaitMs: 100,
  })
  try {
    const partitions = await consumer.assignTopics([topic])
    const ends = await consumer.endOffsets(partitions)
    const records: ConsumerRecord[] = []
    const deadline = Date.now() + timeoutMs
    const done = () =>
      partitions.every(
        (tp) => (consumer.position(tp) ?? -1) >= (ends.get(`${tp.topic}/${tp.partition}`) ?? 0),
      )
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`readAll ${topic}: timed out with ${records.length} records`)
      records.push(...(await consumer.poll(500)))
    }
    return records.sort((a, b) => a.partition - b.partition || a.offset - b.offset)
  } finally {
    await consumer.close()
  }
}

export const text = (b: Buffer | null): string | null => (b === null ? null : b.toString('utf8'))

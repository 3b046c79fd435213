/** What the multi-process benches ask a running cluster: partition sizes and ISR sizes. */
import type { DescribeLogDirsResponse } from '../src/protocol/generated/describe-log-dirs-response.js'
import { ApiKey } from '../src/protocol/generated/index.js'
import { BrokerClient } from '../src/replication/broker-client.js'
import { nodeNetwork } from '../src/runtime/node-network.js'
import type { EtcdCluster } from '../test/helpers/broker-process.js'
import { kcatMetadata } from '../test/helpers/metadata-view.js'

/** Total partition bytes per partition (0-3) of `topic` on one broker, from DescribeLogDirs. */
export async function partitionSizes(address: string, topic: string): Promise<Map<number, bigint>> {
  const [host, port] = address.split(':')
  const client = new BrokerClient(host, Number(port), 'tidelog-bench', nodeNetwork)
  try {
    const response = await client.request<DescribeLogDirsResponse>(ApiKey.DescribeLogDirs, 1, {
      topics: [{ topic, partitions: [0, 1, 2, 3] }],
    })
    const sizes = new Map<number, bigint>()
    for (const dir of response.results)
      for (const t of dir.topics) for (const p of t.partitions) sizes.set(p.partitionIndex, p.partitionSize)
    return sizes
  } finally {
    client.close()
  }
}

/** Waits (up to 60 s, polling kcat's metadata every 100 ms) until every partition of `topic` has `size` ISR members. */
export async function waitForIsr(cluster: EtcdCluster, topic: string, size: number): Promise<void> {
  await waitForIsrAt(cluster.liveBootstrap, topic, size)
}

/** waitForIsr for any cluster by its bootstrap servers (Apache Kafka's too). */
export async function waitForIsrAt(bootstrap: string, topic: string, size: number): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const view = await kcatMetadata(bootstrap, topic)
    const partitions = view.topics.get(topic)
    if (partitions && partitions.length > 0 && partitions.every((p) => p.isr.length >= size)) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`ISR of ${topic} never reached ${size}`)
}

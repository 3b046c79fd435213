/**
 * Metadata for every topic at scale (issue 38, item 1's Metadata target, p99 <= 100 ms): the
 * real handler (src/server/handlers/metadata.ts) and the real frame encoder on an image of
 * --partitions partitions at RF 3 on three brokers, in --topics topics, every leader serving.
 * No network and no store: what one request costs the broker's event loop.
 *   - steady:  the same image for every request (an idle cluster)
 *   - changing: one partition's ISR changed before each request, as AlterPartition changes it
 *     (each request then meets a new image with one topic changed)
 * Prints p50/p99/max of the wall time and p50/p99 of the process's CPU time per request (less
 * sensitive to a loaded machine's scheduling, GC threads included), the answer's size and
 * the load average, and (with --expose-gc, as the npm script runs it) the heap kept between
 * requests once the image is counted out.
 *
 *   npm run bench:metadata-all -- [--partitions 10000] [--topics 1,100] [--requests 200]
 *     [--version 12] [--authorized-operations]
 */
import { loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { type BrokerId, toBrokerId, toPartitionEpoch } from '../src/common/types.js'
import {
  type BrokerRegistration,
  type ClusterImage,
  type PartitionState,
  servedRecordFrom,
  type TopicImage,
} from '../src/metadata/cluster-image.js'
import { encodeResponseFrame } from '../src/protocol/frame-encoder.js'
import { defaultMetadataRequest } from '../src/protocol/generated/apis/metadata.js'
import { ApiKey } from '../src/protocol/generated/index.js'
import { metadataHandler } from '../src/server/handlers/metadata.js'
import type { RequestContext } from '../src/server/request-context.js'

const { values } = parseArgs({
  options: {
    partitions: { type: 'string', default: '10000' },
    topics: { type: 'string', default: '1,100' },
    requests: { type: 'string', default: '200' },
    version: { type: 'string', default: '12' },
    'authorized-operations': { type: 'boolean', default: false },
  },
})
const partitionCount = Number(values.partitions)
const requests = Number(values.requests)
const version = Number(values.version)
const BROKERS = [1, 2, 3].map(toBrokerId)

function load(): string {
  return loadavg()[0].toFixed(1)
}

function imageOf(topicCount: number): ClusterImage {
  const brokers = new Map<BrokerId, BrokerRegistration>(
    BROKERS.map((nodeId) => [
      nodeId,
      { nodeId, host: '127.0.0.1', port: 9092 + nodeId, rack: null, brokerEpoch: nodeId },
    ]),
  )
  const served = new Map<BrokerId, [string, number, number][]>(BROKERS.map((id) => [id, []]))
  const topics = new Map<string, TopicImage>()
  const perTopic = Math.ceil(partitionCount / topicCount)
  for (let t = 0; t < topicCount; t++) {
    const name = `topic-${String(t).padStart(5, '0')}`
    const topicId = `${String(t).padStart(21, 'A')}w`
    const partitions: PartitionState[] = []
    for (let p = 0; p < perTopic && t * perTopic + p < partitionCount; p++) {
      const replicas = [0, 1, 2].map((i) => BROKERS[(p + i) % BROKERS.length])
      partitions.push({
        partition: p,
        replicas,
        isr: [...replicas],
        leader: replicas[0],
        leaderEpoch: 0,
        partitionEpoch: toPartitionEpoch(0),
      })
      served.get(replicas[0])!.push([topicId, p, 0])
    }
    topics.set(name, { name, topicId, partitions, configs: {} })
  }
  return {
    clusterId: 'bench-cluster',
    controllerId: toBrokerId(1),
    brokers,
    topics,
    servedLeaderEpochs: new Map([...served].map(([id, entries]) => [id, servedRecordFrom(entries)])),
  }
}

/** `image` with the ISR of one partition (the `step`-th) shrunk or grown back. */
function withIsrChange(image: ClusterImage, step: number): ClusterImage {
  const names = [...image.topics.keys()]
  const topic = image.topics.get(names[step % names.length])!
  const index = Math.floor(step / names.length) % topic.partitions.length
  const state = topic.partitions[index]
  const isr = state.isr.length === state.replicas.length ? state.isr.slice(0, 2) : [...state.replicas]
  const partitions = [...topic.partitions]
  partitions[index] = { ...state, isr, partitionEpoch: toPartitionEpoch(state.partitionEpoch + 1) }
  return { ...image, topics: new Map(image.topics).set(topic.name, { ...topic, partitions }) }
}

function contextOf(current: () => ClusterImage): RequestContext {
  return {
    apiVersion: version,
    connection: { listenerName: 'PLAINTEXT' },
    broker: { metadataImage: current, config: { values: new Map() } },
    authorize: () => true,
    authorizedOperations: () => 0b1111_1000,
  } as unknown as RequestContext
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]
}

/** Heap in use after a full collection (run with --expose-gc; 0 without it). */
function heapUsedBytes(): number {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) return 0
  gc()
  return process.memoryUsage().heapUsed
}

async function run(topicCount: number, changing: boolean): Promise<void> {
  let image = imageOf(topicCount)
  const heapBefore = heapUsedBytes()
  const context = contextOf(() => image)
  const request = {
    ...defaultMetadataRequest(),
    topics: null,
    includeTopicAuthorizedOperations: values['authorized-operations'] === true,
  }
  const samples: number[] = []
  const cpuSamples: number[] = []
  let bytes = 0
  for (let i = 0; i < requests + 10; i++) {
    if (changing) image = withIsrChange(image, i)
    const startedAt = performance.now()
    const cpuBefore = process.cpuUsage()
    const response = await metadataHandler.handle(context, request)
    const chunks = encodeResponseFrame(ApiKey.Metadata, version, i, response)
    const ms = performance.now() - startedAt
    const cpu = process.cpuUsage(cpuBefore)
    bytes = chunks.reduce((sum, chunk) => sum + chunk.length, 0)
    if (i >= 10) {
      // The first ones warm the JIT (and fill any cache).
      samples.push(ms)
      cpuSamples.push((cpu.user + cpu.system) / 1000)
    }
  }
  samples.sort((a, b) => a - b)
  cpuSamples.sort((a, b) => a - b)
  // What the broker keeps between requests (descriptions, encodings) besides the image.
  const keptMiB = (heapUsedBytes() - heapBefore) / 2 ** 20
  console.log(
    `${partitionCount} partitions in ${topicCount} topics, v${version}, ${changing ? 'one ISR changed before each request' : 'steady image'}: ` +
      `p50 ${percentile(samples, 0.5).toFixed(2)} ms, p99 ${percentile(samples, 0.99).toFixed(2)} ms, ` +
      `max ${samples[samples.length - 1].toFixed(2)} ms; CPU p50 ${percentile(cpuSamples, 0.5).toFixed(2)} ms, ` +
      `p99 ${percentile(cpuSamples, 0.99).toFixed(2)} ms; heap kept ${keptMiB.toFixed(1)} MiB ` +
      `(${requests} requests, ${bytes} bytes each) [load ${load()}]`,
  )
}

console.log(`metadata-all-topics: Node ${process.version} [load ${load()}]`)
for (const topicCount of values.topics.split(',').map(Number)) {
  await run(topicCount, false)
  await run(topicCount, true)
}

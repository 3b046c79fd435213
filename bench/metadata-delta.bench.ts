/**
 * What one metadata change costs a broker as the partition count grows (issue 38, item 2):
 * two ClusterMetadata views on one embedded store (etcd's transaction limits), a writer (the
 * controller, or a leader changing its ISR) and a follower (any other broker, with a
 * listener), over three registered brokers and topics of --per-topic partitions at RF 3.
 *   - isr:      one partition's ISR shrunk by the writer's update(): time until the
 *               writer's update() resolved, and until the follower's listener ran
 *   - failover: every partition led by broker 2 re-elected (a third of them): time until
 *               the follower's listener saw the last, and how many images it applied
 *   - publish:  the follower's time inside its store watch callback per revision (image
 *               built, listeners called), the part that grows with the partition count
 *
 *   npm run build && node --expose-gc dist/bench/metadata-delta.bench.js \
 *     [--partitions 10000,33000] [--per-topic 100] [--runs 20]
 */
import { parseArgs } from 'node:util'
import { systemClock } from '../src/common/clock.js'
import { silentLogger } from '../src/common/logger.js'
import { systemRandom } from '../src/common/random.js'
import { toBrokerId } from '../src/common/types.js'
import type { ClusterImage, PartitionState, TopicImage } from '../src/metadata/cluster-image.js'
import { ClusterMetadata, KEYS } from '../src/metadata/cluster-metadata.js'
import { onBrokerChange, withIsr } from '../src/metadata/elections.js'
import { EmbeddedStore } from '../src/metadata/store/embedded-store.js'

const { values } = parseArgs({
  options: {
    partitions: { type: 'string', default: '10000,33000' },
    'per-topic': { type: 'string', default: '100' },
    runs: { type: 'string', default: '20' },
  },
})
const perTopic = Number(values['per-topic'])
const runs = Number(values.runs)
const BROKERS = [0, 1, 2].map(toBrokerId)
const DEAD_BROKER = toBrokerId(2)

function median(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

function mapPartitions(
  image: ClusterImage,
  change: (state: PartitionState, topic: TopicImage) => PartitionState,
): ClusterImage {
  const topics = new Map(image.topics)
  for (const topic of image.topics.values()) {
    let changed = false
    const partitions = topic.partitions.map((state) => {
      const next = change(state, topic)
      if (next !== state) changed = true
      return next
    })
    if (changed) topics.set(topic.name, { ...topic, partitions })
  }
  return { ...image, topics }
}

/** `image` with one partition changed, as AlterPartition changes it. */
function withPartition(
  image: ClusterImage,
  name: string,
  index: number,
  change: (state: PartitionState) => PartitionState,
): ClusterImage {
  const topic = image.topics.get(name)
  if (topic === undefined) throw new Error(`no topic ${name}`)
  const partitions = topic.partitions.map((state) => (state.partition === index ? change(state) : state))
  return { ...image, topics: new Map(image.topics).set(name, { ...topic, partitions }) }
}

/** Time spent in `metadata`'s watch callback (the image built and the listeners run), per call. */
function timeWatchCallbacks(metadata: ClusterMetadata): number[] {
  const samples: number[] = []
  const target = metadata as unknown as { onEvents: (...args: unknown[]) => void }
  const original = target.onEvents.bind(metadata)
  target.onEvents = (...args: unknown[]) => {
    const startMs = performance.now()
    original(...args)
    samples.push(performance.now() - startMs)
  }
  return samples
}

async function measure(partitions: number): Promise<void> {
  const store = await EmbeddedStore.open({ clock: systemClock })
  const options = { clusterId: 'bench', random: systemRandom, logger: silentLogger, clock: systemClock }
  const writer = await ClusterMetadata.open(store, options)
  const follower = await ClusterMetadata.open(store, options)
  for (const nodeId of BROKERS) {
    const value = JSON.stringify({ nodeId, host: 'localhost', port: 9092 + nodeId, rack: null })
    await store.txn([], [{ type: 'put', key: KEYS.broker(nodeId), value }])
  }
  const createStartMs = performance.now()
  const topicCount = Math.ceil(partitions / perTopic)
  await writer.update((image) => {
    const topics = new Map(image.topics)
    for (let t = 0; t < topicCount; t++) {
      const name = `t${String(t).padStart(5, '0')}`
      const count = Math.min(perTopic, partitions - t * perTopic)
      topics.set(
        name,
        writer.createTopicImage({ name, partitions: count, replicationFactor: 3, configs: {} }),
      )
    }
    return { ...image, topics }
  })
  const createMs = performance.now() - createStartMs
  // The follower's listener resolves whoever waits for a predicate on its image.
  let waiting: { done: (image: ClusterImage) => boolean; resolve: () => void } | null = null
  let listenerCalls = 0
  let lastListenerMs = 0
  follower.onChange((image) => {
    listenerCalls++
    lastListenerMs = performance.now()
    if (waiting?.done(image)) {
      waiting.resolve()
      waiting = null
    }
  })
  const followerSees = (done: (image: ClusterImage) => boolean): Promise<void> =>
    done(follower.image())
      ? Promise.resolve()
      : new Promise((resolve) => {
          waiting = { done, resolve }
        })
  const watchMs = timeWatchCallbacks(follower)
  const names = [...writer.image().topics.keys()]

  const updateMs: number[] = []
  const followerMs: number[] = []
  const publishMs: number[] = []
  for (let run = 0; run < runs; run++) {
    const name = names[(run * 7919) % names.length]
    const index = run % perTopic
    const state = writer.image().topics.get(name)?.partitions[index]
    if (state === undefined) throw new Error(`no partition ${name}-${index}`)
    // Shrunk to the leader and one follower, or back to every replica.
    const isr =
      state.isr.length === 3
        ? [state.leader, ...state.isr.filter((id) => id !== state.leader).slice(1)]
        : [...state.replicas]
    watchMs.length = 0
    const startMs = performance.now()
    const seen = followerSees((image) => image.topics.get(name)?.partitions[index].isr.length === isr.length)
    await writer.update((image) => withPartition(image, name, index, (s) => withIsr(s, isr)))
    updateMs.push(performance.now() - startMs)
    await seen
    followerMs.push(lastListenerMs - startMs)
    publishMs.push(...watchMs)
  }

  const failoverMs: number[] = []
  const failoverImages: number[] = []
  const failoverPublishMs: number[] = []
  const failoverRuns = Math.max(1, Math.min(3, runs))
  for (let run = 0; run < failoverRuns; run++) {
    const live = new Set(BROKERS.filter((id) => id !== DEAD_BROKER))
    const callsBefore = listenerCalls
    watchMs.length = 0
    const startMs = performance.now()
    const done = (image: ClusterImage) =>
      [...image.topics.values()].every((t) => t.partitions.every((s) => s.leader !== DEAD_BROKER))
    const seen = followerSees(done)
    await writer.update((image) =>
      mapPartitions(
        image,
        (state) => onBrokerChange({ state, live, uncleanLeaderElection: false })?.state ?? state,
      ),
    )
    await seen
    failoverMs.push(lastListenerMs - startMs)
    failoverImages.push(listenerCalls - callsBefore)
    failoverPublishMs.push(watchMs.reduce((a, b) => a + b, 0))
    // The dead broker back in every ISR, leading its preferred partitions again (not timed).
    await writer.update((image) =>
      mapPartitions(image, (state) =>
        state.isr.length === 3 && state.leader === state.replicas[0]
          ? state
          : {
              ...state,
              isr: [...state.replicas],
              leader: state.replicas[0],
              leaderEpoch: state.leaderEpoch + 1,
            },
      ),
    )
    await followerSees((image) =>
      [...image.topics.values()].every((t) => t.partitions.every((s) => s.isr.length === 3)),
    )
  }
  writer.close()
  follower.close()
  await store.close()
  const led = Math.round(partitions / 3)
  console.log(
    [
      `partitions ${partitions} (${topicCount} topics of ${perTopic}, RF 3)`,
      `created in ${createMs.toFixed(0)} ms`,
      `ISR change: update() ${median(updateMs).toFixed(2)} ms, follower listener after ${median(followerMs).toFixed(2)} ms, ` +
        `follower watch callback ${median(publishMs).toFixed(3)} ms (medians of ${runs})`,
      `failover of ~${led} partitions: follower saw the last after ${median(failoverMs).toFixed(0)} ms, ` +
        `${median(failoverImages)} images applied, ${median(failoverPublishMs).toFixed(0)} ms in its watch callbacks ` +
        `(medians of ${failoverRuns})`,
    ].join('\n  '),
  )
}

for (const partitions of values.partitions.split(',').map(Number)) {
  await measure(partitions)
  globalThis.gc?.()
}

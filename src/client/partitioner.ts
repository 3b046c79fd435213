/**
 * Partitioning exactly as the Java client: an explicit partition wins; a key picks
 * `toPositive(murmur2(key)) % numPartitions` over *all* partitions (so every client that
 * follows Kafka's rule, librdkafka's murmur2_random included, puts a key in the same
 * place); a record without key sticks to one partition until that partition's batch is
 * done, then moves to another available one (KIP-480).
 */
import { type Random, systemRandom } from '../common/random.js'
import { InvalidArgumentError } from './errors.js'

const SEED = 0x9747b28c
const M = 0x5bd1e995
const R = 24

/** Kafka's Utils.murmur2: MurmurHash2, 32-bit, seed 0x9747b28c; returns a signed int32 like Java. */
export function murmur2(data: Uint8Array): number {
  const length = data.length
  let h = (SEED ^ length) | 0
  const length4 = length >>> 2
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4
    let k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
    k = Math.imul(k, M)
    k ^= k >>> R
    k = Math.imul(k, M)
    h = Math.imul(h, M)
    h ^= k
  }
  const tail = length & ~3
  const rest = length & 3
  // Java's switch falls through: with 3 bytes left all three are mixed in, and so on.
  if (rest === 3) h ^= data[tail + 2] << 16
  if (rest >= 2) h ^= data[tail + 1] << 8
  if (rest >= 1) {
    h ^= data[tail]
    h = Math.imul(h, M)
  }
  h ^= h >>> 13
  h = Math.imul(h, M)
  h ^= h >>> 15
  return h | 0
}

/** Kafka's Utils.toPositive: clears the sign bit (not Math.abs, which differs for MIN_VALUE). */
export function toPositive(n: number): number {
  return n & 0x7fffffff
}

/** The partition of a keyed record: toPositive(murmur2(key)) % numPartitions. */
export function partitionForKey(key: Uint8Array, numPartitions: number): number {
  if (!Number.isInteger(numPartitions) || numPartitions < 1) {
    throw new InvalidArgumentError(`numPartitions must be a positive integer, got ${numPartitions}`)
  }
  return toPositive(murmur2(key)) % numPartitions
}

/** What the sticky partitioner needs to know about a topic. */
export interface TopicPartitions {
  readonly numPartitions: number
  /** Partitions with a live leader. */
  readonly available: readonly number[]
}

/**
 * KIP-480's StickyPartitionCache: one current partition per topic for records without a
 * key; `onNewBatch` moves it to a random available partition other than the one whose
 * batch just filled, or to any partition when none is available.
 */
export class StickyPartitioner {
  private readonly current = new Map<string, number>()
  /** The last topic looked up or set and its partition: most records name the topic the last one did. */
  private lastTopic: string | null = null
  private lastPartition: number | undefined = undefined

  constructor(private readonly random: Random = systemRandom) {}

  partition(topic: string, partitions: TopicPartitions): number {
    const sticky = this.currentOf(topic)
    if (sticky !== undefined && sticky < partitions.numPartitions) return sticky
    return this.next(topic, partitions, -1)
  }

  private currentOf(topic: string): number | undefined {
    if (topic === this.lastTopic) return this.lastPartition
    const partition = this.current.get(topic)
    this.lastTopic = topic
    this.lastPartition = partition
    return partition
  }

  /** Called when a record for `previous` needs a new batch: switch away from it. */
  onNewBatch(topic: string, partitions: TopicPartitions, previous: number): number {
    return this.next(topic, partitions, previous)
  }

  private next(topic: string, partitions: TopicPartitions, previous: number): number {
    const old = this.currentOf(topic)
    // Another record already moved the sticky partition on: keep its choice.
    if (old !== undefined && old !== previous && old < partitions.numPartitions) return old
    const chosen = this.choose(partitions, old)
    this.current.set(topic, chosen)
    this.lastTopic = topic
    this.lastPartition = chosen
    return chosen
  }

  private choose(partitions: TopicPartitions, old: number | undefined): number {
    const { available } = partitions
    if (available.length === 0) return this.randomInt() % partitions.numPartitions
    if (available.length === 1) return available[0]
    // Bounded retry for a different partition: with >= 2 choices each draw differs with p >= 1/2.
    for (let attempt = 0; attempt < 64; attempt++) {
      const candidate = available[this.randomInt() % available.length]
      if (candidate !== old) return candidate
    }
    return available.find((p) => p !== old) ?? available[0]
  }

  private randomInt(): number {
    return toPositive(Math.floor(this.random.next() * 0x100000000))
  }
}

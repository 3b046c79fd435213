/**
 * The iteration order of Java's HashMap/HashSet, for the few places where Java's sticky
 * assignors let it decide an outcome (which member keeps its maxQuota partitions, which
 * moved partition moves back). Reproducing it is what makes tidelog's sticky assignors
 * give the same assignment as Java's for the same inputs, not merely an equally good one.
 *
 * A HashMap allocates 16 buckets at its first insertion and doubles them whenever its size
 * passes 0.75 of the bucket count, never shrinking; a key lives in bucket
 * `(h ^ (h >>> 16)) & (buckets - 1)`, and a bucket keeps its keys in insertion order
 * (resizes split buckets without reordering them). Iteration walks the buckets in order.
 * Not modelled: treeified buckets (8 or more colliding keys in a table of 64 or more),
 * which member ids and topic names do not reach in practice.
 */
import type { TopicPartition } from '../leader-requests.js'

const INITIAL_BUCKETS = 16
const LOAD_FACTOR = 0.75

/** Java's String.hashCode: over UTF-16 code units, in int32 arithmetic. */
export function javaStringHash(s: string): number {
  let h = 0
  for (let i = 0; i < s.length; i++) h = (Math.imul(31, h) + s.charCodeAt(i)) | 0
  return h
}

/** Java's TopicPartition.hashCode: 31 * (31 + partition) + topic.hashCode(). */
export function javaTopicPartitionHash(tp: TopicPartition): number {
  return (Math.imul(31, 31 + tp.partition) + javaStringHash(tp.topic)) | 0
}

/** HashMap.hash: the high half folded into the low half. */
function spread(h: number): number {
  return (h ^ (h >>> 16)) | 0
}

/** Bucket count of a HashMap after `size` distinct insertions into an empty default-sized one. */
function bucketsAfter(size: number): number {
  let buckets = INITIAL_BUCKETS
  while (size > buckets * LOAD_FACTOR) buckets *= 2
  return buckets
}

/**
 * Keys in the order a `new HashMap<>()` filled with `keys` (distinct, in this order) iterates
 * them: the order Java's assignors see members in (ConsumerCoordinator puts them in
 * JoinGroup order).
 */
export function javaHashMapOrder<T>(keys: readonly T[], hash: (key: T) => number): T[] {
  const buckets = bucketsAfter(keys.length)
  return keys
    .map((key, seq) => ({ key, seq, bucket: spread(hash(key)) & (buckets - 1) }))
    .sort((a, b) => a.bucket - b.bucket || a.seq - b.seq)
    .map((e) => e.key)
}

/**
 * A Java HashSet's iteration order through adds and removes: the bucket count only grows,
 * and a re-added element goes to the end of its bucket.
 */
export class JavaHashSet<T> {
  private readonly entries = new Map<string, { value: T; seq: number; hash: number }>()
  private buckets = 0
  private nextSeq = 0

  constructor(
    private readonly hash: (value: T) => number,
    private readonly key: (value: T) => string,
  ) {}

  get size(): number {
    return this.entries.size
  }

  has(value: T): boolean {
    return this.entries.has(this.key(value))
  }

  add(value: T): void {
    const k = this.key(value)
    if (this.entries.has(k)) return
    if (this.buckets === 0) this.buckets = INITIAL_BUCKETS
    this.entries.set(k, { value, seq: this.nextSeq++, hash: spread(this.hash(value)) })
    if (this.entries.size > this.buckets * LOAD_FACTOR) this.buckets *= 2
  }

  delete(value: T): void {
    this.entries.delete(this.key(value))
  }

  /** The elements in Java's iteration order. */
  values(): T[] {
    const mask = this.buckets - 1
    return [...this.entries.values()]
      .sort((a, b) => (a.hash & mask) - (b.hash & mask) || a.seq - b.seq)
      .map((e) => e.value)
  }
}

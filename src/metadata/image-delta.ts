/**
 * The ClusterImage kept up to date by deltas (issue 38): after a store revision only the
 * topics, partitions and brokers whose keys changed are read again; everything else is the
 * previous image's objects (images are immutable, so sharing them is safe). Rebuilding the
 * whole image per revision cost every broker O(all partitions) per ISR change or election,
 * and a failover of a third of 33,000 partitions arrives in hundreds of revisions.
 *
 * The delta built beside the image tells listeners what to look at, so they too can skip
 * what did not change. `sameAsFullBuild` compares an image with a build from scratch: the
 * check tests and the simulator run after every delta.
 */

import { isDeepStrictEqual } from 'node:util'
import { assert } from '../common/assert.js'
import type { ClusterImage, ServedRange, TopicImage } from './cluster-image.js'
import {
  assembleImage,
  buildClusterPart,
  buildImage,
  buildTopic,
  type ClusterPart,
  isClusterPartKey,
  KEYS,
  type ParsedValue,
  parseValue,
  patchServed,
  patchTopic,
  servedRangeValue,
} from './metadata-keys.js'
import type { KeyValue } from './store/metadata-store.js'

/** What changed from one image to the next. */
export interface ImageDelta {
  /** The whole image was read again (the first image, or after a reload): anything may have changed. */
  readonly full: boolean
  /**
   * Topics whose object changed, by name: the indices of the partitions whose state object
   * changed, or null for a topic created, deleted or whose record changed (every partition).
   */
  readonly topics: ReadonlyMap<string, readonly number[] | null>
  /** Broker registrations or the controller key changed. */
  readonly brokers: boolean
  /** Configs, finalized features, the cluster id or the served leader epochs changed. */
  readonly settings: boolean
}

export const FULL_DELTA: ImageDelta = { full: true, topics: new Map(), brokers: true, settings: true }

/**
 * Follows the changes of a key mirror (ClusterMetadata's) and builds the next image from
 * the previous one and the keys changed since. The keys of the ClusterPart are mirrored
 * again here, in the mirror's order, so reading them again does not walk every partition's
 * key (buildImage reads them in that order: the brokers' order must be the same).
 */
export class ImageBuilder {
  /** Parsed values by key, reused while a key's modRevision is unchanged (see parseValue). */
  readonly parsed = new Map<string, ParsedValue>()
  private readonly clusterKvs = new Map<string, KeyValue>()
  private readonly dirty = new Set<string>()
  private full = true
  private clusterPart: ClusterPart | null = null

  constructor(private readonly kvs: ReadonlyMap<string, KeyValue>) {}

  /** The mirror was replaced as a whole: the next build reads everything. */
  reset(): void {
    this.clusterKvs.clear()
    for (const [key, kv] of this.kvs) if (isClusterPartKey(key)) this.clusterKvs.set(key, kv)
    this.dirty.clear()
    this.full = true
  }

  /** `key` was just put into the mirror or deleted from it. */
  onKeyChanged(key: string): void {
    this.dirty.add(key)
    if (!isClusterPartKey(key)) return
    const kv = this.kvs.get(key)
    if (kv === undefined) this.clusterKvs.delete(key)
    else this.clusterKvs.set(key, kv)
  }

  /** The image of the mirror now, sharing with `previous` (the last image built) what did not change. */
  build(previous: ClusterImage): { image: ClusterImage; delta: ImageDelta } {
    if (this.full || this.clusterPart === null) {
      this.full = false
      this.dirty.clear()
      const image = buildImage(this.kvs, this.parsed)
      this.clusterPart = {
        clusterId: image.clusterId,
        controllerId: image.controllerId,
        brokers: image.brokers,
        brokerConfigs: image.brokerConfigs ?? new Map(),
        clientMetricsConfigs: image.clientMetricsConfigs ?? new Map(),
        groupConfigs: image.groupConfigs ?? new Map(),
        finalizedFeatures: image.finalizedFeatures,
        servedLeaderEpochs: image.servedLeaderEpochs ?? new Map(),
      }
      return { image, delta: FULL_DELTA }
    }
    const touched = new Map<string, Set<number> | null>()
    let brokers = false
    let settings = false
    const servedChanges: [string, ServedRange | undefined][] = []
    for (const key of this.dirty) {
      if (!this.kvs.has(key)) this.parsed.delete(key)
      if (key.startsWith(KEYS.topicsPrefix)) touched.set(key.slice(KEYS.topicsPrefix.length), null)
      else if (key.startsWith(KEYS.partitionsPrefix)) {
        const slash = key.lastIndexOf('/')
        const name = key.slice(KEYS.partitionsPrefix.length, slash)
        const indices = touched.get(name)
        if (indices === null) continue
        if (indices === undefined) touched.set(name, new Set([Number(key.slice(slash + 1))]))
        else indices.add(Number(key.slice(slash + 1)))
      } else if (key === KEYS.controller || key.startsWith(KEYS.brokersPrefix)) brokers = true
      else if (isClusterPartKey(key)) settings = true
      else if (key.startsWith(KEYS.servedPrefix)) {
        const kv = this.kvs.get(key)
        servedChanges.push([key, kv === undefined ? undefined : servedRangeValue(this.parsed, kv)])
      }
    }
    this.dirty.clear()
    const servedBefore = this.clusterPart.servedLeaderEpochs
    if (brokers || settings)
      this.clusterPart = {
        ...buildClusterPart(this.clusterKvs.values(), this.parsed),
        servedLeaderEpochs: servedBefore,
      }
    if (servedChanges.length > 0) {
      settings = true
      this.clusterPart = { ...this.clusterPart, servedLeaderEpochs: patchServed(servedBefore, servedChanges) }
    }
    const changed = this.changedTopics(previous.topics, touched)
    const topics = changed.topics.size === 0 ? previous.topics : this.nextTopics(previous.topics, changed)
    return {
      image: assembleImage(this.clusterPart, topics),
      delta: { full: false, topics: changed.delta, brokers, settings },
    }
  }

  /** The new objects of the touched topics (undefined: deleted), and the delta they make. */
  private changedTopics(
    before: ReadonlyMap<string, TopicImage>,
    touched: ReadonlyMap<string, ReadonlySet<number> | null>,
  ): { topics: Map<string, TopicImage | undefined>; delta: Map<string, readonly number[] | null> } {
    const topics = new Map<string, TopicImage | undefined>()
    const delta = new Map<string, readonly number[] | null>()
    for (const [name, indices] of touched) {
      const kv = this.kvs.get(KEYS.topic(name))
      const previous = before.get(name)
      if (kv === undefined) {
        if (previous === undefined) continue // partitions staged, or deleted with their topic
        topics.set(name, undefined)
        delta.set(name, null)
        continue
      }
      const parsedTopic = parseValue(this.parsed, kv)
      if (indices === null || previous === undefined) {
        const topic = buildTopic(name, parsedTopic, this.kvs, this.parsed)
        if (topic === previous) continue
        topics.set(name, topic)
        delta.set(name, null)
        continue
      }
      const patched = patchTopic(previous, parsedTopic, indices, this.kvs, this.parsed)
      if (patched.topic === previous) continue
      topics.set(name, patched.topic)
      delta.set(name, patched.changed)
    }
    return { topics, delta }
  }

  /** The topics map of the next image: in name order, as buildImage makes it. */
  private nextTopics(
    before: ReadonlyMap<string, TopicImage>,
    changed: { topics: ReadonlyMap<string, TopicImage | undefined> },
  ): ReadonlyMap<string, TopicImage> {
    const topics = new Map(before)
    let added = false
    for (const [name, topic] of changed.topics) {
      if (topic === undefined) topics.delete(name)
      else {
        added ||= !topics.has(name)
        topics.set(name, topic)
      }
    }
    // A new name goes to its place in the order; changes and deletions keep the order.
    return added ? new Map([...topics].sort(([a], [b]) => (a < b ? -1 : 1))) : topics
  }
}

/**
 * Null when `image` equals a build from scratch of `kvs` (content, and the order of topics
 * and brokers, which Metadata responses and placement follow); else the first difference.
 */
export function differenceFromFullBuild(
  image: ClusterImage,
  kvs: ReadonlyMap<string, KeyValue>,
): string | null {
  const full = buildImage(kvs, new Map())
  if (!isDeepStrictEqual([...image.topics.keys()], [...full.topics.keys()]))
    return 'topic names or their order'
  for (const [name, topic] of full.topics)
    if (!isDeepStrictEqual(image.topics.get(name), topic)) return `topic ${name}`
  if (!isDeepStrictEqual([...image.brokers.keys()], [...full.brokers.keys()]))
    return 'broker ids or their order'
  const { topics: _a, ...rest } = image
  const { topics: _b, ...fullRest } = full
  for (const field of new Set([...Object.keys(rest), ...Object.keys(fullRest)]))
    if (!isDeepStrictEqual(rest[field as keyof typeof rest], fullRest[field as keyof typeof fullRest]))
      return field
  return null
}

/** Throws unless `image` equals a build from scratch of `kvs` (the debug check). */
export function assertSameAsFullBuild(image: ClusterImage, kvs: ReadonlyMap<string, KeyValue>): void {
  const difference = differenceFromFullBuild(image, kvs)
  assert(difference === null, () => `image built by deltas differs from a full build: ${difference}`)
}

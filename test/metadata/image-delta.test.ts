/**
 * Issue 38: the image kept by deltas equals a build from scratch after every revision, and
 * its delta names exactly what changed. Random revisions of store changes (topics created,
 * grown, re-configured, deleted and re-created; partition states; staged partitions and
 * claims; brokers, controller, configs, served epochs; keys the image does not read; a
 * reload now and then) drive an ImageBuilder; the real ClusterMetadata runs the same check
 * (checkImages) over a staged creation and elections on the embedded store.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { isDeepStrictEqual } from 'node:util'
import { systemClock } from '../../src/common/clock.js'
import { silentLogger } from '../../src/common/logger.js'
import { systemRandom } from '../../src/common/random.js'
import type { ClusterImage } from '../../src/metadata/cluster-image.js'
import { ClusterMetadata, type ImageDelta, KEYS } from '../../src/metadata/cluster-metadata.js'
import { onBrokerChange } from '../../src/metadata/elections.js'
import { differenceFromFullBuild, ImageBuilder } from '../../src/metadata/image-delta.js'
import { buildImage } from '../../src/metadata/metadata-keys.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import type { KeyValue } from '../../src/metadata/store/metadata-store.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'

/** mulberry32: a small seeded generator, so a failing seed replays. */
function seeded(seed: number): (n: number) => number {
  let a = seed >>> 0
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n)
  }
}

/**
 * A key mirror changed as ClusterMetadata changes its own from watch events (versions,
 * revisions, deletes), telling `onKey` after each key as ClusterMetadata tells its builder.
 */
class Mirror {
  readonly kvs = new Map<string, KeyValue>()
  revision = 1
  onKey: (key: string) => void = () => {}

  put(key: string, value: unknown): void {
    const existing = this.kvs.get(key)
    this.kvs.set(key, {
      key,
      value: JSON.stringify(value),
      version: (existing?.version ?? 0) + 1,
      createRevision: existing?.createRevision ?? this.revision,
      modRevision: this.revision,
      lease: null,
    })
    this.onKey(key)
  }

  delete(key: string): void {
    if (this.kvs.delete(key)) this.onKey(key)
  }

  deletePrefix(prefix: string): void {
    for (const key of [...this.kvs.keys()]) if (key.startsWith(prefix)) this.delete(key)
  }

  commit(): void {
    this.revision++
  }
}

const BROKER_IDS = ids(0, 1, 2, 3)

function randomRevision(mirror: Mirror, pick: (n: number) => number): void {
  const topicNames = [...mirror.kvs.keys()]
    .filter((key) => key.startsWith(KEYS.topicsPrefix))
    .map((key) => key.slice(KEYS.topicsPrefix.length))
  const replicasOf = (name: string): number[][] =>
    (JSON.parse(mirror.kvs.get(KEYS.topic(name))?.value ?? '{"replicas":[]}') as { replicas: number[][] })
      .replicas
  const steps = 1 + pick(4)
  for (let step = 0; step < steps; step++) {
    const name = topicNames.length > 0 && pick(4) > 0 ? topicNames[pick(topicNames.length)] : `t${pick(6)}`
    const replicas = replicasOf(name)
    const someReplicas = () => [pick(4), (pick(4) + 1) % 4].filter((id, i, all) => all.indexOf(id) === i)
    const kind = pick(14)
    if (kind <= 3 && replicas.length > 0) {
      const index = pick(replicas.length + 1) // now and then past the record: staged, not read
      const isr = replicas[index] ?? someReplicas()
      mirror.put(KEYS.partition(name, index), { leader: isr[0], leaderEpoch: pick(5), isr })
    } else if (kind === 4) {
      const count = 1 + pick(4)
      const grown = [...replicas, ...Array.from({ length: count }, someReplicas)].slice(0, 6)
      mirror.put(KEYS.topic(name), { topicId: `id-${name}-${pick(3)}`, configs: {}, replicas: grown })
    } else if (kind === 5 && replicas.length > 0) {
      mirror.put(KEYS.topic(name), {
        topicId: `id-${name}`,
        configs: { 'retention.ms': String(pick(9)) },
        replicas,
      })
    } else if (kind === 6) {
      mirror.delete(KEYS.topic(name))
      mirror.deletePrefix(KEYS.partitionsOf(name))
    } else if (kind === 7) {
      const id = BROKER_IDS[pick(4)]
      if (pick(3) === 0) mirror.delete(KEYS.broker(id))
      else mirror.put(KEYS.broker(id), { nodeId: id, host: 'h', port: 9000 + id, rack: null })
    } else if (kind === 8) {
      if (pick(2) === 0) mirror.delete(KEYS.controller)
      else mirror.put(KEYS.controller, { nodeId: pick(4) })
    } else if (kind === 9)
      mirror.put(KEYS.brokerConfigs(pick(2) === 0 ? '' : '1'), { 'log.retention.ms': String(pick(9)) })
    else if (kind === 10) {
      // Ranges of a few records written and emptied, and now and then the key of before the split.
      const id = toBrokerId(pick(4))
      const key = pick(8) === 0 ? KEYS.servedWhole(id) : KEYS.servedRange(id, `id-${name}`, pick(3))
      if (pick(3) === 0) mirror.delete(key)
      else mirror.put(key, { [String(pick(3) * 1000 + pick(2))]: pick(4) })
    } else if (kind === 11) mirror.put(KEYS.staging(name), { topicId: `id-${name}`, writer: 'w' })
    else if (kind === 12) mirror.put(`acls/${pick(3)}`, { acl: pick(9) })
    else mirror.put(KEYS.groupConfigs(`g${pick(2)}`), { 'consumer.session.timeout.ms': String(pick(9)) })
  }
}

/** Fails unless `delta` names every topic and partition whose object changed, and only those. */
function assertDeltaExact(previous: ClusterImage, image: ClusterImage, delta: ImageDelta): void {
  if (delta.full) return
  for (const name of new Set([...previous.topics.keys(), ...image.topics.keys()])) {
    const before = previous.topics.get(name)
    const after = image.topics.get(name)
    if (before === after) {
      assert.ok(!delta.topics.has(name), `topic ${name} unchanged but in the delta`)
      continue
    }
    assert.ok(delta.topics.has(name), `topic ${name} changed but not in the delta`)
    const indices = delta.topics.get(name)
    if (indices === null || indices === undefined) continue
    assert.ok(before !== undefined && after !== undefined, `topic ${name} created or deleted with indices`)
    const changed = after.partitions.flatMap((state, index) =>
      before.partitions[index] === state ? [] : [index],
    )
    assert.deepEqual([...indices].sort(), changed, `topic ${name}: changed partitions`)
  }
  if (!isDeepStrictEqual(previous.brokers, image.brokers) || previous.controllerId !== image.controllerId)
    assert.ok(delta.brokers, 'brokers changed but not in the delta')
  if (!isDeepStrictEqual(previous.brokerConfigs, image.brokerConfigs))
    assert.ok(delta.settings, 'configs changed')
  if (!isDeepStrictEqual(previous.servedLeaderEpochs, image.servedLeaderEpochs))
    assert.ok(delta.settings, 'served')
}

test('an image built by deltas equals a full build after every revision of random store changes', () => {
  const seeds = 60
  const revisions = 150
  for (let seed = 1; seed <= seeds; seed++) {
    const pick = seeded(seed)
    const mirror = new Mirror()
    mirror.put(KEYS.clusterId, { clusterId: 'c' })
    mirror.commit()
    const builder = new ImageBuilder(mirror.kvs)
    builder.reset()
    mirror.onKey = (key) => builder.onKeyChanged(key)
    let image = builder.build(buildImage(new Map(), new Map())).image
    for (let revision = 0; revision < revisions; revision++) {
      randomRevision(mirror, pick)
      mirror.commit()
      if (pick(25) === 0) builder.reset() // a reload: the mirror read again
      const previous = image
      const next = builder.build(previous)
      image = next.image
      const difference = differenceFromFullBuild(image, mirror.kvs)
      assert.equal(difference, null, `seed ${seed}, revision ${revision}: ${difference}`)
      assertDeltaExact(previous, image, next.delta)
    }
  }
})

test('ClusterMetadata keeps its image by deltas through a staged creation, an election and a deletion', async () => {
  // Small transactions: the topic is staged under a claim and published in several parts.
  const store = await EmbeddedStore.open({
    clock: systemClock,
    limits: { txnOpsMax: 16, requestBytesMax: 1 << 20 },
  })
  const options = { clusterId: 'delta', random: systemRandom, logger: silentLogger, checkImages: true }
  const writer = await ClusterMetadata.open(store, options)
  const follower = await ClusterMetadata.open(store, options)
  try {
    for (const nodeId of [0, 1, 2]) {
      const value = JSON.stringify({ nodeId, host: 'localhost', port: 9092 + nodeId, rack: null })
      await store.txn([], [{ type: 'put', key: KEYS.broker(toBrokerId(nodeId)), value }])
    }
    const deltas: ImageDelta[] = []
    follower.onChange((_image, _previous, delta) => deltas.push(delta))
    await writer.update((image) => {
      const topics = new Map(image.topics)
      for (const name of ['a', 'b'])
        topics.set(name, writer.createTopicImage({ name, partitions: 40, replicationFactor: 3, configs: {} }))
      return { ...image, topics }
    })
    const live = new Set(ids(0, 1))
    const elected = await writer.update((image) => {
      const topics = new Map(image.topics)
      for (const topic of image.topics.values()) {
        const partitions = topic.partitions.map(
          (state) => onBrokerChange({ state, live, uncleanLeaderElection: false })?.state ?? state,
        )
        topics.set(topic.name, { ...topic, partitions })
      }
      return { ...image, topics }
    })
    const moved = [...elected.topics.values()].flatMap((t) => t.partitions).filter((s) => s.leaderEpoch > 0)
    assert.ok(moved.length > 0, 'broker 2 led some partitions')
    await writer.update((image) => {
      const topics = new Map(image.topics)
      topics.delete('a')
      return { ...image, topics }
    })
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.deepEqual([...follower.image().topics.keys()], ['b'])
    assert.deepEqual(follower.image().topics.get('b'), writer.image().topics.get('b'))
    const partial = deltas.filter(
      (delta) => !delta.full && [...delta.topics.values()].some((i) => i !== null),
    )
    assert.ok(partial.length > 0, 'elections reached the follower as partition deltas')
  } finally {
    writer.close()
    follower.close()
    await store.close()
  }
})

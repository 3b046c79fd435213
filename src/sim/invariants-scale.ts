/**
 * `scale`: the checks that thousands of partitions need, over every topic, not only the
 * produced one.
 * - Failover: a partition whose leader's process died, or lost its registration, or that has
 *   no leader, has a leader again within FAILOVER_MS (the 3000 ms session plus 2000 ms, the
 *   issue's bound) of the moment it first had a live, registered ISR member to elect; more
 *   while a store link stalls (the controller may be the stalled one).
 * - Atomic creation: no broker's image, no store state and no Metadata answer shows a topic
 *   of the layout with a partition count other than the one asked for, or with a partition
 *   whose state was never written (what a topic published before all its partitions shows).
 * - At the end: every partition led by a broker acting as its leader with its full ISR, and
 *   every broker's image equal to the store's (partition states, topic ids, registrations).
 */
import type { BrokerId, ClusterImage, PartitionState, TopicImage } from '../metadata/cluster-image.js'
import { ErrorCode } from '../protocol/error-codes.js'
import type { MetadataResponse } from '../protocol/generated/metadata-response.js'
import type { SimBroker } from './sim-broker.js'
import { Violation, type WorldView } from './world-view.js'

/** broker.session.timeout.ms of the simulated brokers plus the issue's 2 s. */
export const FAILOVER_MS = 3000 + 2000
/** With the store 0-20 ms away: a few trips more (registration expiry, campaign, elections). */
const FAILOVER_STORE_LATENCY_EXTRA_MS = 1000
/** A store link stalled during the wait: 3-5 s of 2-4 s trips, a new controller campaign. */
const FAILOVER_STALL_EXTRA_MS = 10_000

/** One topic object's partitions grouped by leader (-1: none), built once per object. */
type ByLeader = Map<BrokerId, readonly PartitionState[]>

export class ScaleInvariants {
  /** `${topic}:${partition}:${leader}` → since when it waits for a failover that is possible. */
  private readonly waitingSince = new Map<string, number>()
  private readonly byLeader = new WeakMap<TopicImage, ByLeader>()
  /** Topic objects whose partitions passed the creation check (images keep unchanged ones). */
  private readonly topicsChecked = new WeakSet<TopicImage>()
  private readonly imagesChecked = new WeakSet<ClusterImage>()
  /** The last simulated ms a store link was seen stalled. */
  private stallSeenAtMs = -1
  /** The longest wait for a failover seen, and where. */
  failoverMaxMs = 0
  failoverMaxAt = ''
  /** Waits that ended (a new leader, or no ISR member left to elect). */
  waitsEnded = 0

  constructor(
    private readonly world: WorldView,
    private readonly expected: ReadonlyMap<string, number>,
  ) {}

  check(): void {
    const truth = this.world.truth?.image()
    if (!truth) return
    this.checkCreations(truth, 'the store')
    for (const broker of this.world.brokers.values())
      if (broker.isAlive && broker.broker !== null)
        this.checkCreations(broker.metadata.image(), `broker ${broker.nodeId}`)
    for (const broker of this.world.brokers.values())
      if (
        broker.isAlive &&
        broker.store.stall !== null &&
        broker.store.stall.untilMs >= this.world.scheduler.now
      )
        this.stallSeenAtMs = this.world.scheduler.now
    this.checkFailovers(truth)
  }

  private checkCreations(image: ClusterImage, where: string): void {
    if (this.imagesChecked.has(image)) return
    this.imagesChecked.add(image)
    for (const topic of image.topics.values()) {
      if (this.topicsChecked.has(topic)) continue
      const problem = this.creationProblem(
        topic.name,
        topic.partitions.length,
        topic.partitions.map((p) => ({
          index: p.partition,
          written: p.partitionEpoch > 0 && p.isr.length > 0,
        })),
      )
      if (problem !== null) throw new Violation(`${where}'s image shows ${problem}`)
      this.topicsChecked.add(topic)
    }
  }

  /** A Metadata answer: every topic of the layout it lists is whole. */
  onMetadata(from: number, answer: MetadataResponse): void {
    for (const topic of answer.topics) {
      if (topic.name === null || topic.errorCode !== ErrorCode.NONE) continue
      const problem = this.creationProblem(
        topic.name,
        topic.partitions.length,
        topic.partitions.map((p) => ({ index: p.partitionIndex, written: p.isrNodes.length > 0 })),
      )
      if (problem !== null) throw new Violation(`a Metadata answer of broker ${from} shows ${problem}`)
    }
  }

  private creationProblem(
    name: string,
    count: number,
    partitions: readonly { index: number; written: boolean }[],
  ): string | null {
    const expected = this.expected.get(name)
    if (expected === undefined) return null
    if (count !== expected) return `topic ${name} with ${count} of its ${expected} partitions`
    for (let i = 0; i < partitions.length; i++) {
      const p = partitions[i]
      if (p.index !== i) return `topic ${name} with partition ${p.index} in place ${i}`
      if (!p.written) return `topic ${name} whose partition ${i} state was never written (created in parts)`
    }
    return null
  }

  /** Broker `id`'s current process is alive, started and registered in the store. */
  private healthy(id: BrokerId, truth: ClusterImage): boolean {
    const b = this.world.brokers.get(id)
    return b?.isAlive === true && b.started && b.lease !== null && truth.brokers.has(id)
  }

  private groups(topic: TopicImage): ByLeader {
    let groups = this.byLeader.get(topic)
    if (!groups) {
      const built = new Map<BrokerId, PartitionState[]>()
      for (const state of topic.partitions) {
        const list = built.get(state.leader)
        if (list) list.push(state)
        else built.set(state.leader, [state])
      }
      groups = built
      this.byLeader.set(topic, groups)
    }
    return groups
  }

  private checkFailovers(truth: ClusterImage): void {
    const now = this.world.scheduler.now
    const seen = new Set<string>()
    for (const topic of truth.topics.values()) {
      for (const [leader, states] of this.groups(topic)) {
        // A leader whose process is up and registered leads: not waiting for anyone.
        if (leader >= 0 && this.leaderAlive(leader, truth)) continue
        for (const state of states) {
          if (!state.isr.some((m) => m !== leader && this.healthy(m, truth))) continue
          const key = `${topic.name}:${state.partition}:${leader}`
          seen.add(key)
          const since = this.waitingSince.get(key) ?? now
          this.waitingSince.set(key, since)
          const limit = this.limitMs(since)
          if (now - since > limit)
            throw new Violation(
              `${topic.name}-${state.partition} ${leader < 0 ? 'has no leader' : `is still led in the store by broker ${leader}, whose process died or lost its registration,`} ${now - since} ms after ISR member ${state.isr.filter((m) => m !== leader && this.healthy(m, truth)).join(',')} could take over (ISR ${state.isr.join(',')}, leader epoch ${state.leaderEpoch}; limit ${limit} ms)`,
            )
        }
      }
    }
    for (const [key, since] of this.waitingSince) {
      if (seen.has(key)) continue
      this.waitingSince.delete(key)
      this.waitsEnded++
      if (now - since > this.failoverMaxMs) {
        this.failoverMaxMs = now - since
        this.failoverMaxAt = `${key.split(':').slice(0, 2).join('-')} at ${now} ms`
      }
    }
  }

  /** A registered leader whose process lives (a process killed but still registered does not). */
  private leaderAlive(id: BrokerId, truth: ClusterImage): boolean {
    const b = this.world.brokers.get(id)
    return b?.isAlive === true && truth.brokers.has(id)
  }

  private limitMs(since: number): number {
    const stalled = this.stallSeenAtMs >= since
    return (
      FAILOVER_MS +
      (this.world.storeLatencyMaxMs > 0 ? FAILOVER_STORE_LATENCY_EXTRA_MS : 0) +
      (stalled ? FAILOVER_STALL_EXTRA_MS : 0)
    )
  }

  /** After healing: null once every partition is led with its full ISR and every image equals the store's. */
  convergenceProblem(brokers: readonly SimBroker[]): string | null {
    const truth = this.world.truth?.image()
    if (!truth) return 'no store image'
    for (const name of this.expected.keys()) {
      const topic = truth.topics.get(name)
      if (!topic) return `topic ${name} not created`
      for (const state of topic.partitions) {
        if (state.leader < 0) return `${name}-${state.partition} has no leader`
        if (state.isr.length !== state.replicas.length)
          return `${name}-${state.partition} ISR ${state.isr.join(',')} of replicas ${state.replicas.join(',')}`
        const leader = brokers.find((b) => b.nodeId === state.leader)
        const local = leader?.replicaManager.getPartition(name, state.partition)
        if (local?.isLeader !== true || local.leaderEpoch !== state.leaderEpoch)
          return `broker ${state.leader} does not lead ${name}-${state.partition} in leader epoch ${state.leaderEpoch} yet`
      }
    }
    for (const broker of brokers) {
      const problem = imageDifference(broker.metadata.image(), truth)
      if (problem !== null) return `broker ${broker.nodeId}'s image differs from the store's: ${problem}`
    }
    return null
  }
}

/** The first difference between a broker's image and the store's, or null. */
function imageDifference(image: ClusterImage, truth: ClusterImage): string | null {
  const brokers = (i: ClusterImage): string => [...i.brokers.keys()].sort().join(',')
  if (brokers(image) !== brokers(truth))
    return `registered brokers ${brokers(image)}, store ${brokers(truth)}`
  if (image.topics.size !== truth.topics.size)
    return `${image.topics.size} topics, store ${truth.topics.size}`
  for (const [name, want] of truth.topics) {
    const have = image.topics.get(name)
    if (!have) return `topic ${name} missing`
    if (have.topicId !== want.topicId) return `topic ${name} id ${have.topicId}, store ${want.topicId}`
    if (have.partitions.length !== want.partitions.length)
      return `topic ${name} has ${have.partitions.length} partitions, store ${want.partitions.length}`
    for (let i = 0; i < want.partitions.length; i++) {
      const a = have.partitions[i]
      const b = want.partitions[i]
      if (a === b) continue
      const text = (s: PartitionState): string =>
        `leader ${s.leader} epoch ${s.leaderEpoch} partition epoch ${s.partitionEpoch} ISR ${s.isr.join(',')} replicas ${s.replicas.join(',')}`
      if (text(a) !== text(b)) return `${name}-${i}: ${text(a)}, store ${text(b)}`
    }
  }
  return null
}

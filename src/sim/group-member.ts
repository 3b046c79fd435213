/**
 * The consumer group (`groups`): members that are tidelog's own Consumer (SimGroupMember:
 * classic protocol, or KIP-848's with `consumerProtocol`) and an offset verifier that reads
 * the committed offsets (OffsetFetch) from time to time; what both see is checked by
 * invariants-group.ts. The verifier stays hand-written for what a real client cannot do: it
 * asks one chosen broker and knows which one answered, so that only the current
 * coordinator's answers are held to every acknowledged commit.
 */
import { Consumer, type ConsumerRecord } from '../client/consumer.js'
import { KafkaClientError } from '../client/errors.js'
import { brokerIdFromWire } from '../common/types.js'
import { CONSUMER_OFFSETS_TOPIC, partitionForGroup } from '../coordinator/group.js'
import { ErrorCode } from '../protocol/error-codes.js'
import {
  ApiKey,
  type FindCoordinatorResponse,
  type OffsetFetchResponse,
} from '../protocol/generated/index.js'
import { BrokerClient } from '../replication/broker-client.js'
import { SimNetwork } from './network.js'
import type { SimRandom } from './random.js'
import { simClientOptions, type WorldInternals } from './world-internals.js'
import { TOPIC, type WorldView } from './world-view.js'

export const GROUP_ID = 'sim-group'
/** Group members' network ids (clients are never cut off). */
export const GROUP_MEMBER_NODE_BASE = 300
/** The offset verifiers' network id (members take 300 + their index). */
const VERIFIER_NODE_ID = 999
const SESSION_TIMEOUT_MS = 3000
const REBALANCE_TIMEOUT_MS = 2000
const HEARTBEAT_INTERVAL_MS = 300
/** Far above a poll's length: members leave only by dying. */
const MAX_POLL_INTERVAL_MS = 30_000
const REQUEST_TIMEOUT_MS = 2000
const FETCH_WAIT_MS = 200
const POLL_TIMEOUT_MS = 500

export class NoAnswer extends Error {}

/** The members' and the verifier's counters, for the run's group line. */
export class GroupWorkload {
  commits = 0
  ackedCommits = 0
  consumed = 0
  readonly errorCodes = new Map<number | string, number>()
  rebalances = 0
  fetches = 0

  countError(code: number | string): void {
    this.errorCodes.set(code, (this.errorCodes.get(code) ?? 0) + 1)
  }
}

/** A client of the group's coordinator: finds it, talks to it, forgets it on coordinator errors. */
export class CoordinatorClient {
  coordinator: number | null = null
  private client: BrokerClient | null = null
  private readonly transport

  constructor(
    private readonly world: WorldView,
    private readonly random: SimRandom,
    private readonly name: string,
    networkId: number,
    private readonly isActive: () => boolean,
  ) {
    this.transport = world.network.transportFor(networkId, isActive)
  }

  close(): void {
    this.client?.close()
    this.client = null
    this.coordinator = null
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.world.scheduler.schedule(ms, resolve))
  }

  /** One request to `nodeId`; rejects with NoAnswer after `timeoutMs` or on a connection error. */
  request<T>(
    nodeId: number,
    apiKey: number,
    version: number,
    body: unknown,
    timeoutMs = REQUEST_TIMEOUT_MS,
  ): Promise<T> {
    if (this.client === null || this.clientOf !== nodeId) {
      this.client?.close()
      this.client = new BrokerClient(SimNetwork.hostOf(nodeId), 9092, this.name, this.transport)
      this.clientOf = nodeId
    }
    const client = this.client
    return new Promise<T>((resolve, reject) => {
      let settled = false
      const timer = this.world.scheduler.schedule(timeoutMs, () => {
        if (settled) return
        settled = true
        client.close()
        if (this.client === client) this.client = null
        reject(new NoAnswer(`no answer from broker ${nodeId}`))
      })
      client.request<T>(apiKey, version, body).then(
        (value) => {
          if (settled) return
          settled = true
          timer.cancelled = true
          resolve(value)
        },
        (error: unknown) => {
          if (settled) return
          settled = true
          timer.cancelled = true
          if (this.client === client) this.client = null
          reject(new NoAnswer(String(error)))
        },
      )
    })
  }
  private clientOf = -1

  /** Finds the coordinator through a random live broker (FindCoordinator v3); null if none answered. */
  async find(): Promise<number | null> {
    const live = this.world.brokerIds.filter((id) => {
      const b = this.world.brokers.get(id)
      return b?.isAlive === true && b.started
    })
    if (live.length === 0) return null
    const via = this.random.pick(live)
    try {
      const answer = await this.request<FindCoordinatorResponse>(via, ApiKey.FindCoordinator, 3, {
        key: GROUP_ID,
        keyType: 0,
        coordinatorKeys: [],
      })
      if (answer.errorCode !== ErrorCode.NONE || answer.nodeId < 0) return null
      this.coordinator = answer.nodeId
      return answer.nodeId
    } catch (error) {
      if (error instanceof NoAnswer) return null
      throw error
    }
  }

  /** Finds the coordinator, retrying with a backoff while active. */
  async ensure(): Promise<number | null> {
    while (this.isActive() && this.coordinator === null) {
      const found = await this.find()
      if (found === null) await this.sleep(this.random.int(50, 200))
    }
    return this.coordinator
  }
}

/**
 * A group member: tidelog's own Consumer subscribed to the topic in group `GROUP_ID`, classic
 * protocol or (`consumerProtocol`) KIP-848's, over the simulated network (network id
 * `GROUP_MEMBER_NODE_BASE` + index) with the scheduler as clock and deferral and a fork of the
 * seed as random. It polls, and after each poll that returned records commits, for each of
 * their partitions, the offset after the last one (enable.auto.commit off: every commit is one
 * the run knows of). It dies unannounced (close with abandon: no commit, no LeaveGroup, its
 * heartbeats stop) so that its session expires.
 *
 * What the checks need comes from the client's public surface: `onPartitionsAssigned` and
 * `groupMetadata()` (generation, or member epoch under KIP-848, and member id) for (c) and
 * (d), the records poll() returns, and commit()'s outcome for (a).
 */
export class SimGroupMember {
  private readonly consumer: Consumer
  private stopped = false
  private running = false
  private closing: Promise<void> | null = null
  /** Per partition: the offset after the last record poll() returned since it was assigned. */
  private readonly consumedTo = new Map<number, number>()

  constructor(
    private readonly world: WorldInternals,
    readonly index: number,
    private readonly random: SimRandom,
    private readonly workload: GroupWorkload,
  ) {
    const classic = world.options.consumerProtocol !== true
    this.consumer = new Consumer({
      ...simClientOptions(world, GROUP_MEMBER_NODE_BASE + index, random.fork()),
      clientId: `sim-member-${index}`,
      groupId: GROUP_ID,
      groupProtocol: classic ? 'classic' : 'consumer',
      ...(classic
        ? { sessionTimeoutMs: SESSION_TIMEOUT_MS, heartbeatIntervalMs: HEARTBEAT_INTERVAL_MS }
        : {}),
      rebalanceTimeoutMs: REBALANCE_TIMEOUT_MS,
      maxPollIntervalMs: MAX_POLL_INTERVAL_MS,
      enableAutoCommit: false,
      // A partition nobody committed starts at 0; a stale leader's OFFSET_OUT_OF_RANGE must not
      // reset a position (a commit would go back): polled on at the same position instead.
      autoOffsetReset: 'none',
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      fetchMaxWaitMs: FETCH_WAIT_MS,
      maxPartitionFetchBytes: 32 * 1024,
      fetchMaxBytes: 64 * 1024,
      metadataMaxAgeMs: 5000,
      onPartitionsAssigned: (partitions) => this.onAssigned(partitions.map((tp) => tp.partition)),
      onPartitionsRevoked: (partitions) => {
        for (const tp of partitions) this.consumedTo.delete(tp.partition)
      },
    })
  }

  /** Stopped, its loop ended and its consumer closed: nothing of it in flight. */
  get idle(): boolean {
    return this.stopped && !this.running && this.closing === null
  }

  start(): void {
    this.world.scheduler.schedule(this.random.int(10, 200), () => {
      if (this.stopped) return
      this.consumer.subscribe([TOPIC])
      this.running = true
      this.loop()
        .catch((error: unknown) => this.world.groupFailure(error))
        .finally(() => {
          this.running = false
        })
    })
  }

  /** Dies unannounced: its session expires at the coordinator. */
  stop(): void {
    if (this.stopped) return
    this.stopped = true
    this.consumer.stop()
    this.closing = this.consumer
      .close({ abandon: true })
      .catch((error: unknown) => this.world.groupFailure(error))
      .finally(() => {
        this.closing = null
      })
  }

  private onAssigned(partitions: readonly number[]): void {
    const meta = this.consumer.groupMetadata()
    this.workload.rebalances++
    this.world.log(
      `group member ${this.index}: ${this.world.options.consumerProtocol === true ? 'member epoch' : 'generation'} ${meta.generationId}, partitions ${partitions.length > 0 ? partitions.join(',') : 'none'} added`,
    )
    // The generation ended while its offsets were fetched: these partitions are not held in any.
    if (meta.generationId < 0) return
    this.world.checkInCallback(() => {
      if (this.world.options.consumerProtocol === true)
        this.world.invariants.group.onMemberEpoch(meta.memberId, this.index, meta.generationId)
      else
        this.world.invariants.group.onGroupAssignment(
          meta.generationId,
          meta.memberId,
          this.index,
          partitions,
        )
    })
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let records: ConsumerRecord[]
      try {
        records = await this.consumer.poll(POLL_TIMEOUT_MS)
      } catch (error) {
        if (this.stopped) return
        this.onPollError(error)
        await new Promise<void>((resolve) => this.world.scheduler.schedule(this.random.int(50, 200), resolve))
        continue
      }
      if (this.stopped) return
      this.sampleEpoch()
      const offsets = new Map<number, number>()
      for (const record of records) {
        this.workload.consumed++
        const held = this.consumedTo.has(record.partition)
        this.world.checkInCallback(() =>
          this.world.invariants.group.onGroupRecord(this.index, record.partition, record.offset, held),
        )
        this.consumedTo.set(record.partition, record.offset + 1)
        offsets.set(record.partition, record.offset + 1)
      }
      if (offsets.size > 0) await this.commit(offsets)
    }
  }

  /** KIP-848: the epoch the last heartbeat gave, checked between assignments too. */
  private sampleEpoch(): void {
    if (this.world.options.consumerProtocol !== true) return
    const meta = this.consumer.groupMetadata()
    if (meta.generationId > 0)
      this.world.checkInCallback(() =>
        this.world.invariants.group.onMemberEpoch(meta.memberId, this.index, meta.generationId),
      )
  }

  private onPollError(error: unknown): void {
    const code = error instanceof KafkaClientError ? error.code : String(error)
    this.workload.countError(code)
    if (error instanceof KafkaClientError && error.code === 'ERR_NO_OFFSET') {
      // Nobody committed these yet: the group's data starts at 0 (the topic is never trimmed).
      const fresh = this.consumer.assignment().filter((tp) => this.consumer.position(tp) === null)
      this.world.log(
        `group member ${this.index}: no committed offset for ${fresh.map((tp) => `p${tp.partition}`).join(',')}; from 0`,
      )
      for (const tp of fresh) this.consumer.seek(tp, 0)
      return
    }
    this.world.log(`group member ${this.index}: poll failed (${code})`)
  }

  private async commit(offsets: ReadonlyMap<number, number>): Promise<void> {
    const list = [...offsets].map(([partition, offset]) => ({ topic: TOPIC, partition, offset }))
    this.workload.commits++
    try {
      await this.consumer.commit(list)
    } catch (error) {
      if (this.stopped) return
      const code = error instanceof KafkaClientError ? error.code : String(error)
      this.workload.countError(code)
      this.world.log(`group member ${this.index}: commit failed (${code})`)
      return
    }
    for (const { partition, offset } of list) {
      this.workload.ackedCommits++
      this.world.checkInCallback(() =>
        this.world.invariants.group.onCommitAcked(partition, offset, this.index),
      )
    }
  }
}

/** Reads the group's committed offsets (OffsetFetch v7) from the coordinator; checked by Invariants. */
export class OffsetVerifier {
  private readonly coordinator: CoordinatorClient
  private stopped = false

  constructor(
    private readonly world: WorldView,
    private readonly random: SimRandom,
    private readonly workload: GroupWorkload,
    networkId = VERIFIER_NODE_ID,
  ) {
    this.coordinator = new CoordinatorClient(world, random, 'sim-verifier', networkId, () => !this.stopped)
  }

  private busy = false

  get idle(): boolean {
    return !this.busy
  }

  stop(): void {
    this.stopped = true
  }

  /** One OffsetFetch from the coordinator; true when it answered (and the answer was checked). */
  async fetchOnce(): Promise<boolean> {
    this.busy = true
    try {
      return await this.fetchFromCoordinator()
    } finally {
      this.busy = false
    }
  }

  private async fetchFromCoordinator(): Promise<boolean> {
    const to = await this.coordinator.ensure()
    if (to === null || this.stopped) return false
    const partitions = Array.from({ length: this.world.partitionCount }, (_, p) => p)
    const before = this.world.invariants.offsetsBeforeFetch()
    this.workload.fetches++
    let answer: OffsetFetchResponse
    try {
      answer = await this.coordinator.request<OffsetFetchResponse>(to, ApiKey.OffsetFetch, 7, {
        groupId: GROUP_ID,
        topics: [{ name: TOPIC, partitionIndexes: partitions }],
        groups: [],
        requireStable: false,
      })
    } catch (error) {
      if (!(error instanceof NoAnswer)) throw error
      this.coordinator.close()
      return false
    }
    if (answer.errorCode !== ErrorCode.NONE) {
      this.workload.countError(answer.errorCode)
      this.coordinator.close()
      return false
    }
    const fetched = new Map<number, number>()
    for (const topic of answer.topics)
      for (const p of topic.partitions)
        if (p.errorCode === ErrorCode.NONE) fetched.set(p.partitionIndex, Number(p.committedOffset))
    const topic = this.world.truth?.image().topics.get(CONSUMER_OFFSETS_TOPIC)
    const offsetsPartition = partitionForGroup(GROUP_ID, topic?.partitions.length ?? 1)
    const checked = this.world.invariants.onOffsetsFetched(
      brokerIdFromWire(to),
      offsetsPartition,
      fetched,
      before,
    )
    // A stale coordinator: ask again for the current one.
    if (!checked) this.coordinator.close()
    return checked
  }

  start(): void {
    const next = (): void => {
      if (this.stopped) return
      this.fetchOnce().then(
        () => this.world.scheduler.schedule(this.random.int(200, 800), next),
        (error: unknown) => this.world.groupFailure(error),
      )
    }
    this.world.scheduler.schedule(this.random.int(200, 800), next)
  }
}

/**
 * Simulated consumer-group members (`groups`): the classic group protocol over the simulated
 * network to the real FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit and
 * OffsetFetch handlers, so the real GroupCoordinator of the broker leading the group's
 * __consumer_offsets partition answers. The member side is minimal: FindCoordinator (v3) at
 * a random live broker; JoinGroup (v5) with the MEMBER_ID_REQUIRED round; the leader assigns
 * the topic's partitions round-robin over the members the JoinGroup answer lists; SyncGroup
 * (v3); heartbeats; OffsetCommit (v7) of increasing offsets for its partitions, one request in
 * flight; NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, no answer
 * or a broken connection: find the coordinator again. A verifier (OffsetFetch v7) reads the
 * committed offsets from time to time; what it reads is checked by `Invariants`.
 */
import { brokerIdFromWire } from '../common/types.js'
import { CONSUMER_OFFSETS_TOPIC, partitionForGroup } from '../coordinator/group.js'
import { ErrorCode } from '../protocol/error-codes.js'
import {
  ApiKey,
  type FindCoordinatorResponse,
  type HeartbeatResponse,
  type JoinGroupResponse,
  type OffsetCommitResponse,
  type OffsetFetchResponse,
  type SyncGroupResponse,
} from '../protocol/generated/index.js'
import { BrokerClient } from '../replication/broker-client.js'
import { SimNetwork } from './network.js'
import type { SimRandom } from './random.js'
import { TOPIC, type WorldView } from './world-view.js'

export const GROUP_ID = 'sim-group'
/** Group members' network ids (clients are never cut off). */
export const GROUP_MEMBER_NODE_BASE = 300
/** The offset verifiers' network id (members take 300 + their index). */
const VERIFIER_NODE_ID = 999
const SESSION_TIMEOUT_MS = 3000
const REBALANCE_TIMEOUT_MS = 2000
const HEARTBEAT_INTERVAL_MS = 300
const REQUEST_TIMEOUT_MS = 2000

/** Error codes after which the member looks for the coordinator again. */
export const COORDINATOR_ERRORS: ReadonlySet<number> = new Set([
  ErrorCode.NOT_COORDINATOR,
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
])

export class NoAnswer extends Error {}

/** What the members share: the offsets they commit grow per partition across members. */
export class GroupWorkload {
  /** Per partition: the last offset any member proposed. */
  readonly proposed = new Map<number, number>()
  commits = 0
  ackedCommits = 0
  readonly errorCodes = new Map<number, number>()
  rebalances = 0
  fetches = 0

  nextOffset(partition: number, random: SimRandom): number {
    const next = (this.proposed.get(partition) ?? 0) + random.int(1, 10)
    this.proposed.set(partition, next)
    return next
  }

  countError(code: number): void {
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

export class SimGroupMember {
  private memberId = ''
  private generation = -1
  private assigned: number[] = []
  private stopped = false
  private inFlight = 0
  private readonly coordinator: CoordinatorClient
  private lastHeartbeatMs = 0

  constructor(
    private readonly world: WorldView,
    readonly index: number,
    private readonly random: SimRandom,
    private readonly workload: GroupWorkload,
  ) {
    this.coordinator = new CoordinatorClient(
      world,
      random,
      `sim-member-${index}`,
      GROUP_MEMBER_NODE_BASE + index,
      () => !this.stopped,
    )
  }

  get idle(): boolean {
    return this.inFlight === 0
  }

  start(): void {
    this.world.scheduler.schedule(this.random.int(10, 200), () => {
      this.loop().catch((error: unknown) => this.world.groupFailure(error))
    })
  }

  stop(): void {
    this.stopped = true
  }

  private async call<T>(
    apiKey: number,
    version: number,
    body: unknown,
    timeoutMs?: number,
  ): Promise<T | null> {
    const to = this.coordinator.coordinator
    if (to === null) return null
    this.inFlight++
    try {
      return await this.coordinator.request<T>(to, apiKey, version, body, timeoutMs)
    } catch (error) {
      if (!(error instanceof NoAnswer)) throw error
      this.coordinator.close()
      this.inFlight--
      await this.coordinator.sleep(this.random.int(50, 200))
      this.inFlight++
      return null
    } finally {
      this.inFlight--
    }
  }

  /** A coordinator error: look for the coordinator again after a short backoff. */
  private async lost(code: number, api: string): Promise<void> {
    this.world.log(`group member ${this.index}: ${api} error ${code}; looking for the coordinator`)
    this.workload.countError(code)
    this.coordinator.close()
    await this.coordinator.sleep(this.random.int(20, 150))
  }

  private rejoin(code: number, forgetId: boolean, api: string): void {
    this.world.log(
      `group member ${this.index}: ${api} error ${code}; rejoining${forgetId ? ' as a new member' : ''}`,
    )
    this.workload.countError(code)
    if (forgetId) this.memberId = ''
    this.generation = -1
    this.assigned = []
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      if ((await this.coordinator.ensure()) === null) return
      if (this.generation < 0) await this.joinAndSync()
      else await this.steady()
    }
  }

  private async joinAndSync(): Promise<void> {
    const join = await this.call<JoinGroupResponse>(
      ApiKey.JoinGroup,
      5,
      {
        groupId: GROUP_ID,
        sessionTimeoutMs: SESSION_TIMEOUT_MS,
        rebalanceTimeoutMs: REBALANCE_TIMEOUT_MS,
        memberId: this.memberId,
        groupInstanceId: null,
        protocolType: 'consumer',
        protocols: [{ name: 'sim-range', metadata: Buffer.from(`member-${this.index}`) }],
        reason: null,
      },
      REBALANCE_TIMEOUT_MS + REQUEST_TIMEOUT_MS,
    )
    if (join === null || this.stopped) return
    if (join.errorCode === ErrorCode.MEMBER_ID_REQUIRED) {
      this.memberId = join.memberId
      return
    }
    if (COORDINATOR_ERRORS.has(join.errorCode)) return this.lost(join.errorCode, 'JoinGroup')
    if (join.errorCode === ErrorCode.UNKNOWN_MEMBER_ID) return this.rejoin(join.errorCode, true, 'JoinGroup')
    if (join.errorCode !== ErrorCode.NONE) {
      this.world.log(`group member ${this.index}: JoinGroup error ${join.errorCode}`)
      this.workload.countError(join.errorCode)
      await this.coordinator.sleep(this.random.int(50, 200))
      return
    }
    this.memberId = join.memberId
    const generation = join.generationId
    const assignments =
      join.leader === join.memberId
        ? assign(
            join.members.map((m) => m.memberId),
            this.world.partitionCount,
          )
        : []
    // A follower's SyncGroup waits for the leader's (up to the leader's session).
    const sync = await this.call<SyncGroupResponse>(
      ApiKey.SyncGroup,
      3,
      {
        groupId: GROUP_ID,
        generationId: generation,
        memberId: this.memberId,
        groupInstanceId: null,
        protocolType: null,
        protocolName: null,
        assignments: assignments.map((a) => ({
          memberId: a.memberId,
          assignment: encodeAssignment(a.partitions),
        })),
      },
      SESSION_TIMEOUT_MS + REQUEST_TIMEOUT_MS,
    )
    if (sync === null || this.stopped) return
    if (COORDINATOR_ERRORS.has(sync.errorCode)) return this.lost(sync.errorCode, 'SyncGroup')
    if (sync.errorCode === ErrorCode.UNKNOWN_MEMBER_ID) return this.rejoin(sync.errorCode, true, 'SyncGroup')
    if (sync.errorCode !== ErrorCode.NONE) return this.rejoin(sync.errorCode, false, 'SyncGroup')
    this.generation = generation
    this.assigned = decodeAssignment(sync.assignment)
    this.workload.rebalances++
    this.lastHeartbeatMs = this.world.scheduler.now
    this.world.invariants.onGroupAssignment(generation, this.memberId, this.index, this.assigned)
    this.world.log(
      `group member ${this.index}: generation ${generation}, partitions ${this.assigned.length > 0 ? this.assigned.join(',') : 'none'} (coordinator broker ${this.coordinator.coordinator})`,
    )
  }

  private async steady(): Promise<void> {
    await this.coordinator.sleep(this.random.int(100, 300))
    if (this.stopped) return
    if (
      this.world.scheduler.now - this.lastHeartbeatMs >= HEARTBEAT_INTERVAL_MS ||
      this.assigned.length === 0
    ) {
      const answer = await this.call<HeartbeatResponse>(ApiKey.Heartbeat, 3, {
        groupId: GROUP_ID,
        generationId: this.generation,
        memberId: this.memberId,
        groupInstanceId: null,
      })
      if (answer === null) return
      this.lastHeartbeatMs = this.world.scheduler.now
      if (answer.errorCode === ErrorCode.NONE) return
      if (COORDINATOR_ERRORS.has(answer.errorCode)) return this.lost(answer.errorCode, 'Heartbeat')
      return this.rejoin(answer.errorCode, answer.errorCode === ErrorCode.UNKNOWN_MEMBER_ID, 'Heartbeat')
    }
    const offsets = this.assigned.map((p) => ({
      partition: p,
      offset: this.workload.nextOffset(p, this.random),
    }))
    this.workload.commits++
    const answer = await this.call<OffsetCommitResponse>(ApiKey.OffsetCommit, 7, {
      groupId: GROUP_ID,
      generationIdOrMemberEpoch: this.generation,
      memberId: this.memberId,
      groupInstanceId: null,
      retentionTimeMs: -1n,
      topics: [
        {
          name: TOPIC,
          partitions: offsets.map((o) => ({
            partitionIndex: o.partition,
            committedOffset: BigInt(o.offset),
            committedLeaderEpoch: -1,
            commitTimestamp: -1n,
            committedMetadata: null,
          })),
        },
      ],
    })
    if (answer === null) return
    let code: number = ErrorCode.NONE
    for (const topic of answer.topics)
      for (const p of topic.partitions) {
        if (p.errorCode === ErrorCode.NONE) {
          const o = offsets.find((x) => x.partition === p.partitionIndex)
          if (o) {
            this.workload.ackedCommits++
            this.world.invariants.onCommitAcked(o.partition, o.offset, this.index)
          }
        } else code = p.errorCode
      }
    if (code === ErrorCode.NONE) return
    if (COORDINATOR_ERRORS.has(code)) return this.lost(code, 'OffsetCommit')
    if (
      code === ErrorCode.REBALANCE_IN_PROGRESS ||
      code === ErrorCode.ILLEGAL_GENERATION ||
      code === ErrorCode.UNKNOWN_MEMBER_ID
    )
      return this.rejoin(code, code === ErrorCode.UNKNOWN_MEMBER_ID, 'OffsetCommit')
    this.workload.countError(code)
    await this.coordinator.sleep(this.random.int(50, 200))
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

function assign(
  members: readonly string[],
  partitionCount: number,
): { memberId: string; partitions: number[] }[] {
  const sorted = [...members].sort()
  const out = sorted.map((memberId) => ({ memberId, partitions: [] as number[] }))
  for (let p = 0; p < partitionCount; p++) out[p % out.length].partitions.push(p)
  return out
}

function encodeAssignment(partitions: readonly number[]): Buffer {
  return Buffer.from(JSON.stringify(partitions))
}

function decodeAssignment(bytes: Buffer): number[] {
  if (bytes.length === 0) return []
  return JSON.parse(bytes.toString()) as number[]
}

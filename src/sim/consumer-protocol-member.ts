/**
 * Simulated KIP-848 group members (`groups` with `consumerProtocol`): ConsumerGroupHeartbeat
 * (v1, the member's own id) over the simulated network to the real handler and
 * GroupCoordinator, and OffsetCommit v9 with the member epoch. The member is minimal, as
 * the classic one in group-member.ts: it heartbeats every 200-400 ms with the partitions it
 * owns, takes the answer's assignment as what it owns from then on (so a revocation is
 * acknowledged by its next heartbeat), commits increasing offsets of its partitions between
 * heartbeats (one request in flight), and on FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID drops
 * everything and rejoins with epoch 0. Coordinator errors and lost answers: find the
 * coordinator again.
 *
 * Checked: member epochs never go backwards (Invariants.onMemberEpoch, which catches a
 * coordinator answering from state without committed consumer-group records); acknowledged
 * commits are never lost (the offset verifier, as for classic groups); and the coordinator's
 * own assertion that no partition is held by two members after each heartbeat.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import {
  ApiKey,
  type ConsumerGroupHeartbeatResponse,
  type OffsetCommitResponse,
} from '../protocol/generated/index.js'
import {
  COORDINATOR_ERRORS,
  CoordinatorClient,
  GROUP_ID,
  GROUP_MEMBER_NODE_BASE,
  type GroupWorkload,
  NoAnswer,
} from './group-member.js'
import type { SimRandom } from './random.js'
import { TOPIC, type WorldView } from './world-view.js'

/** The rebalance timeout the members announce: a revocation not acknowledged by then is fenced. */
const REBALANCE_TIMEOUT_MS = 2000

export class SimConsumerProtocolMember {
  private readonly memberId: string
  private memberEpoch = 0
  /** The partitions of TOPIC this member owns (the last assignment it was given). */
  private owned: number[] = []
  private stopped = false
  private inFlight = 0
  private readonly coordinator: CoordinatorClient

  constructor(
    private readonly world: WorldView,
    readonly index: number,
    private readonly random: SimRandom,
    private readonly workload: GroupWorkload,
  ) {
    this.memberId = `sim-kip848-member-${index}`
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

  private get topicId(): string | undefined {
    return this.world.truth?.image().topics.get(TOPIC)?.topicId
  }

  private async call<T>(apiKey: number, version: number, body: unknown): Promise<T | null> {
    const to = this.coordinator.coordinator
    if (to === null) return null
    this.inFlight++
    try {
      return await this.coordinator.request<T>(to, apiKey, version, body)
    } catch (error) {
      if (!(error instanceof NoAnswer)) throw error
      this.coordinator.close()
      return null
    } finally {
      this.inFlight--
    }
  }

  private async lost(code: number, api: string): Promise<void> {
    this.world.log(
      `consumer-protocol member ${this.index}: ${api} error ${code}; looking for the coordinator`,
    )
    this.workload.countError(code)
    this.coordinator.close()
    await this.coordinator.sleep(this.random.int(20, 150))
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      if ((await this.coordinator.ensure()) === null) return
      await this.heartbeat()
      if (this.stopped) return
      if (this.memberEpoch > 0 && this.owned.length > 0) await this.commit()
      await this.coordinator.sleep(this.random.int(200, 400))
    }
  }

  private async heartbeat(): Promise<void> {
    const topicId = this.topicId
    if (topicId === undefined) return
    const joining = this.memberEpoch === 0
    const answer = await this.call<ConsumerGroupHeartbeatResponse>(ApiKey.ConsumerGroupHeartbeat, 1, {
      groupId: GROUP_ID,
      memberId: this.memberId,
      memberEpoch: this.memberEpoch,
      instanceId: null,
      rackId: null,
      rebalanceTimeoutMs: joining ? REBALANCE_TIMEOUT_MS : -1,
      subscribedTopicNames: joining ? [TOPIC] : null,
      subscribedTopicRegex: null,
      serverAssignor: joining ? this.random.pick(['uniform', 'range']) : null,
      topicPartitions: joining ? [] : [{ topicId, partitions: this.owned }],
    })
    if (answer === null || this.stopped) return
    const code = answer.errorCode
    if (COORDINATOR_ERRORS.has(code)) return this.lost(code, 'ConsumerGroupHeartbeat')
    if (code === ErrorCode.FENCED_MEMBER_EPOCH || code === ErrorCode.UNKNOWN_MEMBER_ID) {
      this.world.log(`consumer-protocol member ${this.index}: error ${code}; rejoining with epoch 0`)
      this.workload.countError(code)
      this.memberEpoch = 0
      this.owned = []
      return
    }
    if (code !== ErrorCode.NONE) {
      this.workload.countError(code)
      return
    }
    this.world.invariants.onMemberEpoch(this.memberId, this.index, answer.memberEpoch)
    this.memberEpoch = answer.memberEpoch
    if (answer.assignment === null) return
    const next = answer.assignment.topicPartitions
      .filter((t) => t.topicId === topicId)
      .flatMap((t) => t.partitions)
      .sort((a, b) => a - b)
    if (next.join() !== this.owned.join()) {
      this.workload.rebalances++
      this.world.log(
        `consumer-protocol member ${this.index}: epoch ${answer.memberEpoch}, partitions ${next.length > 0 ? next.join(',') : 'none'} (coordinator broker ${this.coordinator.coordinator})`,
      )
    }
    this.owned = next
  }

  private async commit(): Promise<void> {
    const offsets = this.owned.map((partition) => ({
      partition,
      offset: this.workload.nextOffset(partition, this.random),
    }))
    this.workload.commits++
    const answer = await this.call<OffsetCommitResponse>(ApiKey.OffsetCommit, 9, {
      groupId: GROUP_ID,
      generationIdOrMemberEpoch: this.memberEpoch,
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
    // STALE_MEMBER_EPOCH: the next heartbeat brings the new epoch; fenced or unknown: rejoin.
    this.workload.countError(code)
    if (code === ErrorCode.FENCED_MEMBER_EPOCH || code === ErrorCode.UNKNOWN_MEMBER_ID) {
      this.memberEpoch = 0
      this.owned = []
    }
  }
}

/**
 * A share group member's heartbeat (KIP-932, Java's ShareMembershipManager and
 * ShareHeartbeatRequestManager): one ShareGroupHeartbeat loop to the group coordinator.
 *
 * - Join: epoch 0 with the member's own id (made here, KIP-1082) and the subscribed topic
 *   names; later heartbeats send the names again only after a change or a lost answer.
 * - Each answer gives the member epoch, the broker's `group.share.heartbeat.interval.ms` and,
 *   when it changed, the assignment by topic id. A share group needs no revocation round:
 *   several members may hold the same partition, so an assignment is used as it comes.
 * - FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID: the assignment is dropped and the member joins
 *   again with epoch 0 and the same id.
 * - NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost connection or a timeout: find the
 *   coordinator again after a backoff; COORDINATOR_LOAD_IN_PROGRESS: retry after a backoff.
 * - Anything else (GROUP_AUTHORIZATION_FAILED, GROUP_MAX_SIZE_REACHED, INVALID_REQUEST,
 *   UNSUPPORTED_VERSION, a group of another type, ...) is fatal: the next poll throws it.
 * - Leave: epoch -1 (close).
 */
import type { Clock } from '../../common/clock.js'
import { randomUuid } from '../../common/random.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ShareGroupHeartbeatRequest,
  type ShareGroupHeartbeatResponse,
} from '../../protocol/generated/index.js'
import type { KafkaClient } from '../client.js'
import { asClientError, type KafkaClientError, KafkaProtocolError } from '../errors.js'
import { findGroupCoordinator } from '../find-coordinator.js'
import { COORDINATOR_GONE, coordinatorLost, MEMBER_FENCED } from '../group/errors.js'
import { sleep } from '../retry.js'
import type { TopicIdPartition } from './share-session.js'

/** A member epoch as the coordinator gives it: 0 joins, -1 leaves. */
export type MemberEpoch = number & { readonly __brand: 'MemberEpoch' }

const JOIN_EPOCH = 0 as MemberEpoch
const LEAVE_EPOCH = -1 as MemberEpoch
/** Until the first answer gives the broker's group.share.heartbeat.interval.ms (Kafka's default). */
const INITIAL_HEARTBEAT_INTERVAL_MS = 5000

function retriable(error: unknown): boolean {
  return (
    coordinatorLost(error) ||
    (error instanceof KafkaProtocolError && error.errorCode === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
  )
}

export class ShareMembership {
  /** KIP-1082: the member makes its own id, kept for the consumer's lifetime. */
  readonly memberId: string
  private memberEpoch: MemberEpoch = JOIN_EPOCH
  private topics: string[] = []
  private sendTopics = true
  private coordinatorId: number | null = null
  private heartbeatIntervalMs = INITIAL_HEARTBEAT_INTERVAL_MS
  private assigned: TopicIdPartition[] = []
  private firstAssignment: Deferred | null = null
  private loop: { readonly abort: AbortController; readonly task: Promise<void> } | null = null
  private wakeLoop: (() => void) | null = null
  private fatal: KafkaClientError | null = null
  private readonly clock: Clock

  constructor(
    private readonly client: KafkaClient,
    private readonly groupId: string,
    /** Called when the assignment changed or a fatal error arrived (wakes a waiting poll). */
    private readonly onChange: () => void,
  ) {
    this.clock = client.clock
    this.memberId = randomUuid(client.random)
  }

  get epoch(): MemberEpoch {
    return this.memberEpoch
  }

  /** The partitions the coordinator gave this member, by topic id and name. */
  get assignment(): readonly TopicIdPartition[] {
    return this.assigned
  }

  get subscription(): readonly string[] {
    return this.topics
  }

  /** A fatal group error, once: the next poll throws it. */
  takeFatalError(): KafkaClientError | null {
    const error = this.fatal
    this.fatal = null
    return error
  }

  subscribe(topics: readonly string[]): void {
    this.topics = [...new Set(topics)].sort()
    this.client.addInterest(this.topics)
    this.sendTopics = true
    this.firstAssignment ??= deferred()
    if (this.loop) this.kick()
    else this.startLoop()
  }

  /** Waits until the first assignment arrives, a fatal error, or `deadlineMs` (monotonic). */
  async waitForAssignment(deadlineMs: number): Promise<void> {
    const first = this.firstAssignment
    const leftMs = deadlineMs - this.clock.monotonicMs()
    if (first && leftMs > 0) await Promise.race([first.promise, sleep(this.clock, leftMs)])
  }

  /** Stops heartbeating and leaves the group (epoch -1); errors are ignored, as the group expires the member anyway. */
  async leave(): Promise<void> {
    const loop = this.loop
    this.loop = null
    if (!loop) return
    loop.abort.abort()
    this.kick()
    await loop.task
    this.firstAssignment?.resolve()
    this.assigned = []
    if (this.memberEpoch === JOIN_EPOCH) return
    try {
      await this.heartbeat(LEAVE_EPOCH)
    } catch {
      // Best effort: without the leave, the coordinator drops the member after its session timeout.
    }
    this.memberEpoch = LEAVE_EPOCH
  }

  private startLoop(): void {
    const abort = new AbortController()
    const task = this.heartbeatLoop(abort.signal).catch((error: unknown) => {
      this.fatal = asClientError(error)
      this.firstAssignment?.resolve()
      this.onChange()
    })
    this.loop = { abort, task }
  }

  private kick(): void {
    const wake = this.wakeLoop
    this.wakeLoop = null
    wake?.()
  }

  private async heartbeatLoop(signal: AbortSignal): Promise<void> {
    for (let failures = 0; !signal.aborted; ) {
      try {
        const response = await this.heartbeat(this.memberEpoch)
        if (signal.aborted) return
        failures = 0
        if (await this.onHeartbeat(response)) continue
      } catch (error) {
        if (signal.aborted) return
        if (!retriable(error)) throw error
        if (coordinatorLost(error)) this.coordinatorId = null
        // The answer may have been lost: the next heartbeat names the topics again.
        this.sendTopics = true
        failures++
        await sleep(this.clock, this.client.backoff.delayMs(failures), signal)
        continue
      }
      await new Promise<void>((resolve) => {
        this.wakeLoop = resolve
        sleep(this.clock, this.heartbeatIntervalMs, signal).then(resolve)
      })
      this.wakeLoop = null
    }
  }

  private async heartbeat(memberEpoch: MemberEpoch): Promise<ShareGroupHeartbeatResponse> {
    const full = this.sendTopics || memberEpoch === JOIN_EPOCH
    const request: ShareGroupHeartbeatRequest = {
      groupId: this.groupId,
      memberId: this.memberId,
      memberEpoch,
      rackId: null,
      subscribedTopicNames: full && memberEpoch !== LEAVE_EPOCH ? [...this.topics] : null,
    }
    this.coordinatorId ??= await findGroupCoordinator(this.client, this.groupId)
    const response = await this.client.request<ShareGroupHeartbeatResponse>(
      this.coordinatorId,
      ApiKey.ShareGroupHeartbeat,
      () => request,
      { purpose: 'group' },
    )
    const code = response.errorCode
    if (COORDINATOR_GONE.has(code) || code === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) {
      if (COORDINATOR_GONE.has(code)) this.coordinatorId = null
      throw new KafkaProtocolError(code, `ShareGroupHeartbeat of group ${this.groupId}`)
    }
    return response
  }

  /** Handles an answer; true when the next heartbeat should go at once (rejoin). */
  private async onHeartbeat(response: ShareGroupHeartbeatResponse): Promise<boolean> {
    const code = response.errorCode
    if (MEMBER_FENCED.has(code)) {
      this.memberEpoch = JOIN_EPOCH
      this.sendTopics = true
      this.assigned = []
      this.onChange()
      return true
    }
    if (code !== ErrorCode.NONE) {
      const detail = response.errorMessage ? `: ${response.errorMessage}` : ''
      throw new KafkaProtocolError(code, `ShareGroupHeartbeat of group ${this.groupId}${detail}`)
    }
    this.sendTopics = false
    this.memberEpoch = response.memberEpoch as MemberEpoch
    if (response.heartbeatIntervalMs > 0) this.heartbeatIntervalMs = response.heartbeatIntervalMs
    if (response.assignment === null) return false
    const complete = await this.applyAssignment(response.assignment.topicPartitions)
    if (!complete) this.sendTopics = true
    const first = this.firstAssignment
    this.firstAssignment = null
    first?.resolve()
    this.onChange()
    return false
  }

  /**
   * Names the assigned topic ids from the metadata (refreshing once for an unknown id);
   * false when some id stays unknown (the next full heartbeat's answer repeats it).
   */
  private async applyAssignment(
    assignment: readonly { topicId: string; partitions: readonly number[] }[],
  ): Promise<boolean> {
    const namesById = () => new Map([...this.client.metadata.topics.values()].map((t) => [t.topicId, t.name]))
    let names = namesById()
    if (assignment.some((t) => !names.has(t.topicId))) {
      await this.client.refreshMetadata(this.topics)
      names = namesById()
    }
    const assigned: TopicIdPartition[] = []
    let complete = true
    for (const t of assignment) {
      const topic = names.get(t.topicId)
      if (topic === undefined) {
        complete = false
        continue
      }
      for (const partition of [...t.partitions].sort((a, b) => a - b))
        assigned.push({ topicId: t.topicId, topic, partition })
    }
    this.assigned = assigned
    return complete
  }
}

interface Deferred {
  readonly promise: Promise<void>
  readonly resolve: () => void
}

function deferred(): Deferred {
  let resolve = (): void => undefined
  const promise = new Promise<void>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

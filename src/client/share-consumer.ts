/**
 * A share group member (KIP-932 queues), modelled on Java's KafkaShareConsumer 4.4: the
 * members of a share group read the same partitions together, each record handed to one
 * member at a time under an acquisition lock, and answered one by one.
 *
 * ```ts
 * const consumer = new ShareConsumer({ bootstrapServers, groupId: 'workers', acknowledgementMode: 'explicit' })
 * consumer.subscribe(['jobs'])
 * for (;;) {
 *   for (const record of await consumer.poll(1000)) consumer.acknowledge(record, handle(record) ? 'ACCEPT' : 'RELEASE')
 *   await consumer.commitSync()          // or let the next poll carry the answers
 * }
 * ```
 *
 * The parts: ShareMembership (share/share-membership.ts) heartbeats to the group coordinator
 * and holds the assignment; ShareFetcher (share/share-fetcher.ts) keeps a share session per
 * partition leader and sends ShareFetch, with the answers so far piggybacked, and
 * ShareAcknowledge. This class keeps what the application was given and has answered.
 *
 * Acknowledgement modes (`share.acknowledgement.mode`):
 * - implicit (default): every record a poll returned is ACCEPTed by the next poll,
 *   commitSync, commitAsync or close; acknowledge() is refused.
 * - explicit: the application answers every record with acknowledge(); a poll before all of
 *   the last poll's records are answered is refused, as Java's.
 */
import type { Clock } from '../common/clock.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { type ClientOptions, type KafkaClient, sharedOrNewClient } from './client.js'
import {
  asClientError,
  ClientClosedError,
  InvalidArgumentError,
  type KafkaClientError,
  KafkaProtocolError,
} from './errors.js'
import { intOption, oneOf } from './options.js'
import { sleep } from './retry.js'
import { Acknowledgements, type AcknowledgeType } from './share/acknowledgements.js'
import { ShareConsumerStateError } from './share/errors.js'
import type { ShareConsumerRecord } from './share/share-fetch-records.js'
import {
  type AcknowledgementResult,
  type NodeFetchResult,
  type PartitionAcknowledgements,
  ShareFetcher,
} from './share/share-fetcher.js'
import { ShareMembership } from './share/share-membership.js'
import { type TopicIdPartition, tipKey } from './share/share-session.js'

export type { AcknowledgeType } from './share/acknowledgements.js'
export type { ShareConsumerRecord } from './share/share-fetch-records.js'
export type { AcknowledgementResult } from './share/share-fetcher.js'

export type AcknowledgementMode = 'implicit' | 'explicit'
export type ShareAcquireMode = 'batch_optimized' | 'record_limit'

export interface ShareConsumerOptions extends Partial<ClientOptions> {
  /** A KafkaClient to share (its connections and metadata); else one is made from the options. */
  client?: KafkaClient
  /** group.id: the share group. */
  groupId: string
  /** share.acknowledgement.mode (default 'implicit'). */
  acknowledgementMode?: AcknowledgementMode
  /** share.acquire.mode (default 'batch_optimized'); 'record_limit' caps each fetch at maxPollRecords exactly (ShareFetch v2). */
  shareAcquireMode?: ShareAcquireMode
  /**
   * max.poll.records (default 500): the most records one poll returns, and what a ShareFetch
   * asks for (MaxRecords, BatchSize). Records a fetch acquired beyond it wait for the next poll.
   */
  maxPollRecords?: number
  /** fetch.max.wait.ms (default 500): how long a ShareFetch waits for records. */
  fetchMaxWaitMs?: number
  /** fetch.min.bytes (default 1). */
  fetchMinBytes?: number
  /** fetch.max.bytes (default 52428800). */
  fetchMaxBytes?: number
  /**
   * Called with the outcome of every acknowledgement sent (piggybacked on a fetch, by
   * commitAsync, commitSync or close), as Java's AcknowledgementCommitCallback.
   */
  acknowledgementCommitCallback?: (results: readonly AcknowledgementResult[]) => void
}

/** A record of the last polls not finally answered yet. */
interface InFlight {
  readonly record: ShareConsumerRecord
  /** Answered RENEW (explicit mode): counts as answered for the next poll, still needs a final answer. */
  renewed: boolean
}

/** A poll never waits on a lost cause longer than this between fetch rounds that failed. */
const FAILED_ROUND_BACKOFF_MAX_MS = 1000

export class ShareConsumer {
  readonly client: KafkaClient
  private readonly ownsClient: boolean
  private readonly clock: Clock
  private readonly groupId: string
  private readonly mode: AcknowledgementMode
  private readonly fetchMaxWaitMs: number
  private readonly membership: ShareMembership
  private readonly fetcher: ShareFetcher
  private readonly onResults: ((results: readonly AcknowledgementResult[]) => void) | undefined
  /** Delivered records not finally answered, by partition then offset. */
  private readonly inFlight = new Map<string, Map<number, InFlight>>()
  /**
   * Acquired records not returned yet: a batch-optimized fetch may acquire more than
   * max.poll.records (whole batches), and a poll returns at most that many, as Java's.
   */
  private readonly buffered: ShareConsumerRecord[] = []
  private readonly maxPollRecords: number
  /** Answers not sent yet, by partition. */
  private readonly pending = new Map<string, PartitionAcknowledgements>()
  private readonly background = new Set<Promise<unknown>>()
  private pendingError: KafkaClientError | null = null
  private wake: (() => void) | null = null
  private polling = false
  private closed = false

  constructor(options: ShareConsumerOptions) {
    const { client, ownsClient } = sharedOrNewClient(options, 'ShareConsumer')
    this.client = client
    this.ownsClient = ownsClient
    this.clock = client.clock
    if (typeof options.groupId !== 'string' || options.groupId.length === 0)
      throw new InvalidArgumentError('ShareConsumer: group.id (groupId) is required')
    this.groupId = options.groupId
    this.mode = oneOf('share.acknowledgement.mode', options.acknowledgementMode, 'implicit', [
      'implicit',
      'explicit',
    ])
    const acquireMode = oneOf('share.acquire.mode', options.shareAcquireMode, 'batch_optimized', [
      'batch_optimized',
      'record_limit',
    ])
    this.fetchMaxWaitMs = intOption('fetch.max.wait.ms', options.fetchMaxWaitMs, 500, 0)
    this.maxPollRecords = intOption('max.poll.records', options.maxPollRecords, 500, 1, 0x7fffffff)
    this.onResults = options.acknowledgementCommitCallback
    this.membership = new ShareMembership(client, this.groupId, () => this.wakePoll())
    this.fetcher = new ShareFetcher(client, this.groupId, this.membership.memberId, {
      fetchMinBytes: intOption('fetch.min.bytes', options.fetchMinBytes, 1, 0),
      fetchMaxBytes: intOption('fetch.max.bytes', options.fetchMaxBytes, 52428800, 0),
      maxPollRecords: this.maxPollRecords,
      acquireMode: acquireMode === 'record_limit' ? 1 : 0,
      requestTimeoutMs: client.options.requestTimeoutMs,
    })
  }

  /** The member id this consumer made for itself (KIP-1082). */
  get memberId(): string {
    return this.membership.memberId
  }

  /** The partitions the coordinator assigned to this member (other members may share them). */
  assignment(): { topic: string; partition: number }[] {
    return this.membership.assignment.map(({ topic, partition }) => ({ topic, partition }))
  }

  subscription(): readonly string[] {
    return this.membership.subscription
  }

  /** Joins the share group for `topics` (replacing an earlier subscription); the heartbeat starts at once. */
  subscribe(topics: readonly string[]): void {
    this.checkOpen()
    if (topics.length === 0 || topics.some((t) => typeof t !== 'string' || t.length === 0))
      throw new InvalidArgumentError('ShareConsumer.subscribe: topics must be non-empty names')
    this.membership.subscribe(topics)
  }

  /**
   * Acquired records, waiting up to `timeoutMs` for some. Sends the answers given so far
   * (implicit mode: ACCEPT for the last poll's records) with the fetches.
   */
  async poll(timeoutMs = 1000): Promise<ShareConsumerRecord[]> {
    this.checkOpen()
    if (this.polling) throw new ShareConsumerStateError('poll() is already running')
    if (this.membership.subscription.length === 0)
      throw new ShareConsumerStateError('subscribe() before poll()')
    this.throwPendingError()
    this.answerLastPoll()
    // Records a fetch acquired beyond max.poll.records come first, without fetching.
    if (this.buffered.length > 0) return this.deliver(this.buffered.splice(0, this.maxPollRecords))
    this.polling = true
    try {
      const deadlineMs = this.clock.monotonicMs() + Math.max(timeoutMs, 0)
      await this.membership.waitForAssignment(deadlineMs)
      for (let round = 0; !this.closed; round++) {
        this.throwPendingError()
        const records = await this.fetchRound(deadlineMs, round)
        if (records.length > 0 || this.clock.monotonicMs() >= deadlineMs) {
          this.buffered.push(...records.splice(this.maxPollRecords))
          return this.deliver(records)
        }
      }
      return []
    } finally {
      this.polling = false
    }
  }

  /**
   * Answers a record the last polls returned (explicit mode). The answer goes with the next
   * poll's fetch, commitSync, commitAsync or close. Refused for a record not delivered to
   * this consumer, or already answered (RENEW aside, which keeps it in flight).
   */
  acknowledge(
    record: { readonly topic: string; readonly partition: number; readonly offset: number },
    type: AcknowledgeType = 'ACCEPT',
  ): void {
    this.checkOpen()
    if (this.mode === 'implicit')
      throw new ShareConsumerStateError(
        'acknowledge() needs share.acknowledgement.mode explicit (acknowledgementMode: "explicit")',
      )
    oneOf('acknowledge type', type, 'ACCEPT', ['ACCEPT', 'RELEASE', 'REJECT', 'RENEW'])
    const key = this.partitionKeyOf(record)
    const entry = key === undefined ? undefined : this.inFlight.get(key)?.get(record.offset)
    if (key === undefined || entry === undefined)
      throw new ShareConsumerStateError(
        `${record.topic}-${record.partition} offset ${record.offset} is not a record in flight for this consumer (not delivered, or already acknowledged)`,
      )
    this.addPending(entry.record, record.offset, type)
    if (type === 'RENEW') entry.renewed = true
    else this.inFlight.get(key)?.delete(record.offset)
  }

  /**
   * Sends every answer now (ShareAcknowledge per leader) and waits for the outcome, one result
   * per partition. Answers for a leader without an open share session wait for the next poll.
   */
  async commitSync(): Promise<AcknowledgementResult[]> {
    this.checkOpen()
    this.acceptInFlightIfImplicit()
    return this.sendPending()
  }

  /** Sends every answer now without waiting; the outcome goes to acknowledgementCommitCallback. */
  commitAsync(): void {
    this.checkOpen()
    this.acceptInFlightIfImplicit()
    const task = this.sendPending().catch((error: unknown) => {
      this.pendingError ??= asClientError(error)
    })
    this.background.add(task)
    task.finally(() => this.background.delete(task))
  }

  /**
   * Sends the last answers (implicit mode: ACCEPT for what is in flight) with a final
   * ShareAcknowledge (epoch -1) to every leader with a share session, leaves the group
   * (epoch -1) and closes the connections it owns. Unanswered records go back to the group
   * when the member leaves.
   */
  async close(): Promise<void> {
    if (this.closed) return
    this.acceptInFlightIfImplicit()
    this.closed = true
    this.wakePoll()
    await Promise.allSettled([...this.background])
    try {
      const byNode = this.pendingByNode()
      this.pending.clear()
      const nodes = new Set([...this.fetcher.openSessionNodes(), ...byNode.keys()])
      const outcomes = await Promise.allSettled(
        [...nodes].map((nodeId) =>
          this.fetcher.acknowledge(nodeId, finalOnly(byNode.get(nodeId) ?? []), { final: true }),
        ),
      )
      for (const o of outcomes) if (o.status === 'fulfilled') this.report(o.value.results)
      await this.membership.leave()
    } finally {
      // Records acquired but never returned go back to the group with the member's leave.
      this.buffered.length = 0
      this.inFlight.clear()
      if (this.ownsClient) this.client.close()
    }
  }

  // ---- polling -------------------------------------------------------------------------

  /** One ShareFetch per leader of the assigned partitions; the records they brought. */
  private async fetchRound(deadlineMs: number, round: number): Promise<ShareConsumerRecord[]> {
    const assigned = this.membership.assignment
    if (assigned.length === 0 && this.pending.size === 0) {
      await this.waitForChange(deadlineMs)
      return []
    }
    let leaders = this.leadersOf(assigned)
    if (leaders.unknown) {
      await this.client.refreshMetadata(this.membership.subscription).catch(() => undefined)
      leaders = this.leadersOf(assigned)
    }
    // Answers whose partition has no known leader stay pending for a later round.
    const acksByNode = this.pendingByNode()
    const nodes = new Set([...leaders.byNode.keys(), ...acksByNode.keys()])
    const maxWaitMs = Math.max(0, Math.min(this.fetchMaxWaitMs, deadlineMs - this.clock.monotonicMs()))
    const outcomes = await Promise.all(
      [...nodes].map((nodeId) =>
        this.fetchFromNode(nodeId, leaders.byNode.get(nodeId), acksByNode.get(nodeId), maxWaitMs),
      ),
    )
    const records = outcomes.flatMap((o) => o.records)
    const stale = outcomes.some((o) => o.staleMetadata)
    if (stale) await this.client.refreshMetadata(this.membership.subscription).catch(() => undefined)
    if (records.length > 0) return records
    if (leaders.byNode.size === 0) {
      // Nothing to fetch from (no leader known, or only answers to send): no long poll held
      // this round, so wait for an assignment change or a backoff instead of spinning.
      await Promise.race([this.waitForChange(deadlineMs), this.backoff(deadlineMs, round)])
    } else if (stale || outcomes.some((o) => o.failed)) await this.backoff(deadlineMs, round)
    return records
  }

  private async backoff(deadlineMs: number, round: number): Promise<void> {
    const leftMs = deadlineMs - this.clock.monotonicMs()
    const backoffMs = Math.min(this.client.backoff.delayMs(round + 1), FAILED_ROUND_BACKOFF_MAX_MS)
    if (leftMs > 0) await sleep(this.clock, Math.min(backoffMs, leftMs))
  }

  private async fetchFromNode(
    nodeId: number,
    partitions: TopicIdPartition[] | undefined,
    acks: PartitionAcknowledgements[] | undefined,
    maxWaitMs: number,
  ): Promise<NodeFetchResult> {
    let outcome: NodeFetchResult
    if (partitions === undefined || partitions.length === 0) {
      // Answers for partitions this member no longer fetches from that leader. Without a share
      // session there they cannot be sent (no fetch will open one): they fail, and the records
      // go back to the group when their locks expire.
      const { results, unsent } = await this.fetcher.acknowledge(nodeId, acks ?? [])
      const lost = unsent.map((a) => unsentResult(a, nodeId))
      outcome = {
        records: [],
        gaps: [],
        results: [...results, ...lost],
        unsent: [],
        staleMetadata: false,
        fatal: null,
        failed: false,
      }
    } else outcome = await this.fetcher.fetch(nodeId, partitions, acks ?? [], maxWaitMs)
    for (const a of outcome.unsent) this.restorePending(a)
    for (const gap of outcome.gaps)
      for (const offset of gap.offsets) this.addPendingAt(gap.tip, offset, 'GAP')
    if (outcome.fatal) this.pendingError ??= outcome.fatal
    this.report(outcome.results)
    return outcome
  }

  private leadersOf(assigned: readonly TopicIdPartition[]): {
    byNode: Map<number, TopicIdPartition[]>
    unknown: boolean
  } {
    const byNode = new Map<number, TopicIdPartition[]>()
    let unknown = false
    for (const tip of assigned) {
      const leader = this.client.metadata.leaderOf(tip.topic, tip.partition)
      if (leader === undefined) {
        unknown = true
        continue
      }
      byNode.set(leader.nodeId, [...(byNode.get(leader.nodeId) ?? []), tip])
    }
    return { byNode, unknown }
  }

  /** Pending answers grouped by the partition's current leader; those without a leader stay pending. */
  private pendingByNode(): Map<number, PartitionAcknowledgements[]> {
    const byNode = new Map<number, PartitionAcknowledgements[]>()
    for (const [key, acks] of this.pending) {
      const leader = this.client.metadata.leaderOf(acks.tip.topic, acks.tip.partition)
      if (leader === undefined) continue
      byNode.set(leader.nodeId, [...(byNode.get(leader.nodeId) ?? []), acks])
      this.pending.delete(key)
    }
    return byNode
  }

  private deliver(records: ShareConsumerRecord[]): ShareConsumerRecord[] {
    for (const record of records) {
      const key = tipKey(record)
      let partition = this.inFlight.get(key)
      if (!partition) {
        partition = new Map()
        this.inFlight.set(key, partition)
      }
      partition.set(record.offset, { record, renewed: false })
    }
    return records
  }

  private async waitForChange(deadlineMs: number): Promise<void> {
    const leftMs = deadlineMs - this.clock.monotonicMs()
    if (leftMs <= 0) return
    await Promise.race([
      new Promise<void>((resolve) => {
        this.wake = resolve
      }),
      sleep(this.clock, leftMs),
    ])
    this.wake = null
  }

  private wakePoll(): void {
    const wake = this.wake
    this.wake = null
    wake?.()
  }

  // ---- acknowledgements ----------------------------------------------------------------

  /** Before a poll: implicit mode accepts the last poll's records; explicit mode needs them answered. */
  private answerLastPoll(): void {
    if (this.mode === 'implicit') {
      this.acceptInFlightIfImplicit()
      return
    }
    let unanswered = 0
    for (const partition of this.inFlight.values())
      for (const entry of partition.values()) if (!entry.renewed) unanswered++
    if (unanswered > 0)
      throw new ShareConsumerStateError(
        `${unanswered} record(s) of the last poll are not acknowledged: explicit mode needs every record answered before the next poll`,
      )
    // Renewed records were answered for this poll; they still need a final answer later.
    for (const partition of this.inFlight.values())
      for (const entry of partition.values()) entry.renewed = false
  }

  private acceptInFlightIfImplicit(): void {
    if (this.mode !== 'implicit') return
    for (const partition of this.inFlight.values())
      for (const [offset, entry] of partition) this.addPending(entry.record, offset, 'ACCEPT')
    this.inFlight.clear()
  }

  private addPending(record: ShareConsumerRecord, offset: number, type: AcknowledgeType): void {
    this.addPendingAt(
      { topicId: record.topicId, topic: record.topic, partition: record.partition },
      offset,
      type,
    )
  }

  private addPendingAt(tip: TopicIdPartition, offset: number, type: AcknowledgeType | 'GAP'): void {
    const key = tipKey(tip)
    let entry = this.pending.get(key)
    if (!entry) {
      entry = { tip, acknowledgements: new Acknowledgements() }
      this.pending.set(key, entry)
    }
    entry.acknowledgements.add(offset, type)
  }

  /** Puts back answers a request could not carry, without overriding newer answers for the same offsets. */
  private restorePending(unsent: PartitionAcknowledgements): void {
    const current = this.pending.get(tipKey(unsent.tip))
    const newer = new Map(current?.acknowledgements.entries() ?? [])
    for (const [offset, type] of unsent.acknowledgements.entries())
      if (!newer.has(offset)) this.addPendingAt(unsent.tip, offset, type)
  }

  private async sendPending(): Promise<AcknowledgementResult[]> {
    const byNode = this.pendingByNode()
    const outcomes = await Promise.all(
      [...byNode].map(([nodeId, acks]) => this.fetcher.acknowledge(nodeId, acks)),
    )
    const results: AcknowledgementResult[] = []
    for (const o of outcomes) {
      for (const a of o.unsent) this.restorePending(a)
      results.push(...o.results)
    }
    this.report(results)
    return results
  }

  private report(results: readonly AcknowledgementResult[]): void {
    if (results.length === 0 || !this.onResults) return
    try {
      this.onResults(results)
    } catch {
      // The application's callback throwing must not break the consumer's bookkeeping.
    }
  }

  /** The partition key of a record this consumer delivered (records carry their topic id). */
  private partitionKeyOf(record: { readonly topic: string; readonly partition: number }): string | undefined {
    const topicId =
      (record as { topicId?: string }).topicId ?? this.client.metadata.topics.get(record.topic)?.topicId
    return topicId === undefined ? undefined : tipKey({ topicId, partition: record.partition })
  }

  private throwPendingError(): void {
    const error = this.membership.takeFatalError() ?? this.pendingError
    this.pendingError = null
    if (error) throw error
  }

  private checkOpen(): void {
    if (this.closed) throw new ClientClosedError('share consumer')
  }
}

/** At close, RENEW means nothing: the member leaves and its records go back anyway. */
function finalOnly(acks: readonly PartitionAcknowledgements[]): PartitionAcknowledgements[] {
  const out: PartitionAcknowledgements[] = []
  for (const a of acks) {
    if (!a.acknowledgements.hasRenew) {
      out.push(a)
      continue
    }
    const kept = new Acknowledgements()
    for (const [offset, type] of a.acknowledgements.entries()) if (type !== 'RENEW') kept.add(offset, type)
    if (kept.size > 0) out.push({ tip: a.tip, acknowledgements: kept })
  }
  return out
}

function unsentResult(a: PartitionAcknowledgements, nodeId: number): AcknowledgementResult {
  return {
    topic: a.tip.topic,
    topicId: a.tip.topicId,
    partition: a.tip.partition,
    offsets: a.acknowledgements.entries().map(([offset]) => offset),
    error: new KafkaProtocolError(
      ErrorCode.SHARE_SESSION_NOT_FOUND,
      `${a.tip.topic}-${a.tip.partition}: no share session with broker ${nodeId} to carry the acknowledgements`,
    ),
  }
}

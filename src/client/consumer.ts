/**
 * The consumer, assign mode: the caller names the partitions (`assign`), positions start at
 * the given offset or by `autoOffsetReset`, and `poll()` returns records from long-poll
 * fetches (fetch.max.wait.ms / fetch.min.bytes / fetch.max.bytes) sent to each leader on
 * its fetch connection, one fetch in flight per broker. Iterate with `for await`, per batch
 * with `batches()`, or hand a per-batch handler to `run()`.
 *
 * Subscribe mode (with `groupId`): `subscribe(topics)` makes the consumer a member of a
 * consumer group on the classic protocol (group/session.ts, group/membership.ts): each
 * poll first (re)joins when needed, then the partitions the group hands out go through the
 * same assignment machinery, positioned at the committed offsets before falling back to
 * `autoOffsetReset`. `commit()` commits the consumed positions (or given offsets);
 * `enableAutoCommit` does it every `autoCommitIntervalMs` during polls, before a rebalance
 * and on close, which also leaves the group.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import type { FetchResponse, FetchResponsePartitionData } from '../protocol/generated/fetch-response.js'
import { ApiKey } from '../protocol/generated/index.js'
import { type KafkaClient, sharedOrNewClient } from './client.js'
import {
  type Buffered,
  buildFetchRequest,
  type PartitionState,
  type PendingDecode,
} from './consumer-fetch.js'
import {
  type ConsumerOptions,
  type OffsetResetPolicy,
  type ResolvedConsumerOptions,
  resolveConsumerOptions,
} from './consumer-options.js'
import {
  asClientError,
  ClientClosedError,
  CorruptRecordError,
  InvalidArgumentError,
  KafkaClientError,
  KafkaProtocolError,
} from './errors.js'
import { type ConsumerRecord, decodeFetchedRecords, nextOffsetOf } from './fetch-records.js'
import { ConsumerProtocolSession } from './group/consumer-protocol-session.js'
import type { OffsetToCommit } from './group/membership.js'
import { GroupSession, type RebalanceListener } from './group/session.js'
import { type TopicPartition, tpKey } from './leader-requests.js'
import { listOffsets, type OffsetSpec } from './offsets.js'
import { isRetriableError, needsMetadataRefresh, sleep } from './retry.js'

export type {
  ConsumerOptions,
  ConsumerRecord,
  OffsetResetPolicy,
  OffsetToCommit,
  RebalanceListener,
  TopicPartition,
}

/** Fetched results per partition that may wait in the buffer while the next fetch runs. */
const PREFETCH_ENTRIES_MAX = 2

export interface AssignedPartition extends TopicPartition {
  /** Start here; absent: autoOffsetReset decides. */
  offset?: number
}

/** Records of one partition from one poll. */
export interface ConsumerBatch extends TopicPartition {
  records: ConsumerRecord[]
  highWatermark: number
  /** high watermark − the offset after the last record: how far behind this batch is. */
  lag: number
}

export class Consumer implements AsyncIterable<ConsumerRecord> {
  readonly client: KafkaClient
  private readonly options: ResolvedConsumerOptions
  private readonly ownsClient: boolean
  private readonly states = new Map<string, PartitionState>()
  private buffered: Buffered[] = []
  private readonly fetchesInFlight = new Map<number, Promise<void>>()
  /** Fetched records being decoded after their fetch slot was freed (close waits for them). */
  private readonly decoding = new Set<Promise<void>>()
  /** An error to throw from the next poll (OFFSET_OUT_OF_RANGE with policy none, a fatal partition error). */
  private pendingError: KafkaClientError | null = null
  private wakeup: (() => void) | null = null
  private metadataRefreshAtMs = 0
  private fetchFailures = 0
  private stopped = false
  private closed = false
  /** Group membership, with a groupId. */
  private readonly group: GroupSession | ConsumerProtocolSession | null

  constructor(options: ConsumerOptions) {
    this.options = resolveConsumerOptions(options)
    const { client, ownsClient } = sharedOrNewClient(options, 'consumer')
    this.client = client
    this.ownsClient = ownsClient
    const groupOptions = this.options.group
    const consumerGroupOptions = this.options.consumerGroup
    const host = {
      setAssignment: (partitions: readonly AssignedPartition[]) => this.setAssignment(partitions),
      addPartitions: (partitions: readonly AssignedPartition[]) => this.addPartitions(partitions),
      removePartitions: (partitions: readonly TopicPartition[]) => this.removePartitions(partitions),
      assignment: () => this.assignment(),
      positions: () => this.consumedPositions(),
      wake: () => this.wake(),
    }
    this.group = groupOptions
      ? new GroupSession(this.client, groupOptions, host)
      : consumerGroupOptions
        ? new ConsumerProtocolSession(this.client, consumerGroupOptions, host)
        : null
  }

  // ---- assignment and positions ---------------------------------------------------------

  /** Replaces the assignment (Kafka's assign semantics); not while subscribed to a group. */
  assign(partitions: readonly AssignedPartition[]): void {
    if (this.group?.subscribed)
      throw new InvalidArgumentError(
        'assign() and subscribe() are mutually exclusive: this consumer is subscribed',
      )
    this.setAssignment(partitions)
  }

  private setAssignment(partitions: readonly AssignedPartition[]): void {
    this.states.clear()
    this.buffered = []
    this.addPartitions(partitions)
  }

  /** Adds to the assignment; partitions already assigned keep their position and buffer. */
  private addPartitions(partitions: readonly AssignedPartition[]): void {
    for (const p of partitions) {
      if (this.states.has(tpKey(p))) continue
      if (!Number.isInteger(p.partition) || p.partition < 0)
        throw new InvalidArgumentError(`bad partition ${p.partition}`)
      const hasOffset = p.offset !== undefined
      this.states.set(tpKey(p), {
        tp: { topic: p.topic, partition: p.partition },
        position: hasOffset ? p.offset! : null,
        resetTo: hasOffset ? null : this.options.autoOffsetReset,
        useCommitted: !hasOffset && this.group !== null && !this.group.subscribed,
        paused: false,
        highWatermark: -1,
        logStartOffset: -1,
      })
    }
    this.client.addInterest(new Set(partitions.map((p) => p.topic)))
    this.wake()
  }

  /** Takes partitions out of the assignment, with their buffered records. */
  private removePartitions(partitions: readonly TopicPartition[]): void {
    for (const tp of partitions) {
      this.states.delete(tpKey(tp))
      this.dropBuffered(tpKey(tp))
    }
    this.wake()
  }

  /** Assigns every partition of the topics (from metadata), starting per autoOffsetReset unless `offset` is given. */
  async assignTopics(topics: readonly string[], start?: { offset?: number }): Promise<TopicPartition[]> {
    const snapshot = await this.client.waitForTopics(topics, {
      maxWaitMs: this.client.options.requestTimeoutMs,
    })
    const partitions = topics.flatMap((topic) =>
      snapshot.topics.get(topic)!.partitions.map((p) => ({ topic, partition: p.partition, ...start })),
    )
    this.assign(partitions)
    return partitions.map(({ topic, partition }) => ({ topic, partition }))
  }

  assignment(): TopicPartition[] {
    return [...this.states.values()].map((s) => s.tp)
  }

  /**
   * Joins the consumer group (groupId) for these topics, or for every topic whose whole name
   * matches a RegExp (internal topics excluded; matched again every metadata.max.age.ms);
   * the next poll does the join, and the group decides the assignment from then on. Calling
   * it again changes the subscription.
   */
  subscribe(topics: readonly string[] | RegExp): void {
    const group = this.requireGroup('subscribe')
    if (
      !(topics instanceof RegExp) &&
      (topics.length === 0 || topics.some((t) => typeof t !== 'string' || t === ''))
    )
      throw new InvalidArgumentError('subscribe needs at least one topic name or a RegExp')
    if (!group.subscribed && this.states.size > 0)
      throw new InvalidArgumentError(
        'assign() and subscribe() are mutually exclusive: this consumer has an assignment',
      )
    group.subscribe(topics)
    this.wake()
  }

  /**
   * Leaves the subscription (revoking its partitions, committing first with auto-commit, and
   * leaving the group) or, in assign mode, drops the assignment.
   */
  async unsubscribe(): Promise<void> {
    if (this.closed) throw new ClientClosedError('consumer')
    if (this.group?.subscribed) await this.group.unsubscribe()
    this.setAssignment([])
  }

  /** The subscribed topics, those a pattern matches now (empty when not subscribed). */
  subscription(): string[] {
    return [...(this.group?.membership.subscription ?? [])]
  }

  /**
   * Commits the consumed positions of the assigned partitions (what poll() returned), or the
   * given offsets (the next offset to read). Rejects with a CommitFailedError (code
   * ERR_KAFKA_ILLEGAL_GENERATION, ERR_KAFKA_UNKNOWN_MEMBER_ID, ERR_KAFKA_REBALANCE_IN_PROGRESS)
   * when the group refuses it, or another KafkaClientError.
   */
  async commit(offsets?: readonly OffsetToCommit[]): Promise<void> {
    const group = this.requireGroup('commit')
    if (this.closed) throw new ClientClosedError('consumer')
    for (const o of offsets ?? []) {
      if (!Number.isSafeInteger(o.offset) || o.offset < 0)
        throw new InvalidArgumentError(`bad offset ${o.offset}`)
    }
    await group.commit(offsets)
  }

  /** The group's committed offsets of the partitions, by `topic/partition` (-1: none). */
  async committed(tps: readonly TopicPartition[]): Promise<Map<string, number>> {
    return this.requireGroup('committed').committedOffsets(tps)
  }

  /** The member's identity in its group (Java's groupMetadata()). */
  groupMetadata(): {
    groupId: string
    memberId: string
    generationId: number
    groupInstanceId: string | null
  } {
    const group = this.requireGroup('groupMetadata')
    const m = group.membership
    return {
      groupId: m.options.groupId,
      memberId: m.memberId,
      generationId: m.generationId,
      groupInstanceId: m.options.groupInstanceId,
    }
  }

  /** The last auto-commit's failure (auto-commits never throw), or null. */
  get lastAutoCommitError(): KafkaClientError | null {
    return this.group?.lastAutoCommitError ?? null
  }

  private requireGroup(what: string): GroupSession | ConsumerProtocolSession {
    if (!this.group) throw new InvalidArgumentError(`${what} needs a groupId (group.id)`)
    return this.group
  }

  private consumedPositions(): OffsetToCommit[] {
    const out: OffsetToCommit[] = []
    for (const s of this.states.values()) if (s.position !== null) out.push({ ...s.tp, offset: s.position })
    return out
  }

  /** The next offset poll() returns for the partition, or null until it is looked up. */
  position(tp: TopicPartition): number | null {
    return this.stateOf(tp).position
  }

  seek(tp: TopicPartition, offset: number): void {
    if (!Number.isSafeInteger(offset) || offset < 0) throw new InvalidArgumentError(`bad offset ${offset}`)
    this.moveTo(this.stateOf(tp), offset, null)
  }

  seekToBeginning(tps: readonly TopicPartition[] = this.assignment()): void {
    for (const tp of tps) this.moveTo(this.stateOf(tp), null, 'earliest')
  }

  seekToEnd(tps: readonly TopicPartition[] = this.assignment()): void {
    for (const tp of tps) this.moveTo(this.stateOf(tp), null, 'latest')
  }

  /** Moves to the first offset whose timestamp is >= `timestampMs` (the end if there is none). */
  seekToTimestamp(timestampMs: number, tps: readonly TopicPartition[] = this.assignment()): void {
    if (!Number.isSafeInteger(timestampMs) || timestampMs < 0)
      throw new InvalidArgumentError(`bad timestamp ${timestampMs}`)
    for (const tp of tps) this.moveTo(this.stateOf(tp), null, timestampMs)
  }

  pause(tps: readonly TopicPartition[]): void {
    for (const tp of tps) {
      this.stateOf(tp).paused = true
      this.dropBuffered(tpKey(tp))
    }
  }

  resume(tps: readonly TopicPartition[]): void {
    for (const tp of tps) this.stateOf(tp).paused = false
    this.wake()
  }

  paused(): TopicPartition[] {
    return [...this.states.values()].filter((s) => s.paused).map((s) => s.tp)
  }

  /** Earliest offsets (log start) of the partitions. */
  async beginningOffsets(tps: readonly TopicPartition[]): Promise<Map<string, number>> {
    return this.lookup(tps, 'earliest')
  }

  /** Latest offsets (high watermark) of the partitions. */
  async endOffsets(tps: readonly TopicPartition[]): Promise<Map<string, number>> {
    return this.lookup(tps, 'latest')
  }

  /** First offset at or after a time per partition (-1: none). */
  async offsetsForTimes(tps: readonly TopicPartition[], timestampMs: number): Promise<Map<string, number>> {
    return this.lookup(tps, timestampMs)
  }

  // ---- polling ------------------------------------------------------------------------

  /** Records from the assigned, unpaused partitions; waits up to `timeoutMs` for some. */
  async poll(timeoutMs = 1000): Promise<ConsumerRecord[]> {
    const batches = await this.pollBatches(timeoutMs)
    if (batches.length === 1) return batches[0].records
    // A loop, not flatMap: this runs per record at full rate, and flatMap costs several times more.
    const records: ConsumerRecord[] = []
    for (const batch of batches) for (const record of batch.records) records.push(record)
    return records
  }

  /** Like poll(), grouped per partition. */
  async pollBatches(timeoutMs = 1000): Promise<ConsumerBatch[]> {
    if (this.closed) throw new ClientClosedError('consumer')
    const deadline = this.client.clock.monotonicMs() + timeoutMs
    // Bounded by the deadline: each pass waits for a fetch, the deadline, or a wakeup.
    for (;;) {
      this.throwPendingError()
      // Group step: (re)join if needed, auto-commit; no records while a join is running.
      if (this.group && !(await this.group.beforePoll(deadline))) return []
      const ready = this.takeBuffered()
      if (ready.length > 0) {
        // Prefetch: the next fetch runs while the caller handles these records.
        if (!this.stopped && !this.closed) this.startFetches()
        return ready
      }
      if (this.stopped || this.closed) return ready
      const remaining = deadline - this.client.clock.monotonicMs()
      if (remaining <= 0) return []
      await this.resetPositions()
      this.startFetches()
      // Partitions still without a position (lookup failed) are retried after a backoff.
      const unresolved = [...this.states.values()].some((s) => s.position === null && !s.paused)
      await this.waitForProgress(
        unresolved ? Math.min(remaining, this.client.options.retryBackoffMs) : remaining,
      )
    }
  }

  async *[Symbol.asyncIterator](): AsyncIterator<ConsumerRecord> {
    for await (const batch of this.batches()) yield* batch.records
  }

  /** Per-partition batches until stop() or close(). */
  async *batches(): AsyncGenerator<ConsumerBatch> {
    this.stopped = false
    while (!this.stopped && !this.closed) {
      for (const batch of await this.pollBatches(this.options.fetchMaxWaitMs + 1000)) yield batch
    }
  }

  /** Calls `eachBatch` for every batch (awaiting it: back-pressure) until stop() or close(). */
  async run(handler: {
    eachBatch?: (batch: ConsumerBatch) => Promise<void> | void
    eachRecord?: (record: ConsumerRecord) => Promise<void> | void
  }): Promise<void> {
    for await (const batch of this.batches()) {
      if (handler.eachBatch) await handler.eachBatch(batch)
      if (handler.eachRecord) for (const record of batch.records) await handler.eachRecord(record)
    }
  }

  /** Ends run() and the iterators after the current batch; poll() still works. */
  stop(): void {
    this.stopped = true
    this.group?.interrupt()
    this.wake()
  }

  /** With a group: commits (auto-commit), revokes and leaves first, unless `abandon` (CloseOptions). */
  async close(options: { readonly abandon?: boolean } = {}): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.wake()
    try {
      await this.group?.close(options)
    } finally {
      await Promise.allSettled(this.fetchesInFlight.values())
      await Promise.allSettled(this.decoding)
      if (this.ownsClient) this.client.close()
      await this.group?.settled()
    }
  }

  // ---- internals --------------------------------------------------------------------------

  private stateOf(tp: TopicPartition): PartitionState {
    const state = this.states.get(tpKey(tp))
    if (!state) throw new InvalidArgumentError(`${tp.topic}-${tp.partition} is not assigned`)
    return state
  }

  private moveTo(state: PartitionState, offset: number | null, resetTo: OffsetSpec | null): void {
    state.position = offset
    state.resetTo = resetTo
    state.useCommitted = false
    this.dropBuffered(tpKey(state.tp))
    this.wake()
  }

  private dropBuffered(key: string): void {
    this.buffered = this.buffered.filter((b) => tpKey(b.state.tp) !== key)
  }

  private async lookup(tps: readonly TopicPartition[], spec: OffsetSpec): Promise<Map<string, number>> {
    const listed = await listOffsets(
      this.client,
      tps.map((tp) => ({ ...tp, spec })),
      this.options.isolationLevel,
    )
    return new Map([...listed].map(([key, value]) => [key, value.offset]))
  }

  private throwPendingError(): void {
    const error = this.pendingError
    if (!error) return
    this.pendingError = null
    throw error
  }

  /** Up to max.poll.records from the buffer, in fetch order; advances positions. */
  private takeBuffered(): ConsumerBatch[] {
    const out: ConsumerBatch[] = []
    let budget = this.options.maxPollRecords
    const keep: Buffered[] = []
    // A partition whose oldest entry is still decoding gives nothing this time (order per partition).
    let decoding: Set<PartitionState> | null = null
    for (const entry of this.buffered) {
      const { state } = entry
      if (!entry.decoded || decoding?.has(state)) {
        if (this.states.get(tpKey(state.tp)) === state && !state.paused) {
          keep.push(entry)
          decoding ??= new Set()
          decoding.add(state)
        }
        continue
      }
      const live =
        this.states.get(tpKey(state.tp)) === state && state.position === entry.fetchOffset && !state.paused
      if (!live) continue
      if (budget === 0) {
        keep.push(entry)
        continue
      }
      const records = entry.records.splice(0, budget)
      budget -= records.length
      state.position = entry.records.length > 0 ? entry.records[0].offset : entry.nextOffset
      entry.fetchOffset = state.position
      if (entry.records.length > 0) keep.push(entry)
      if (records.length > 0) out.push(this.toBatch(state, records))
    }
    this.buffered = keep
    return out
  }

  private toBatch(state: PartitionState, records: ConsumerRecord[]): ConsumerBatch {
    const next = records[records.length - 1].offset + 1
    return {
      ...state.tp,
      records,
      highWatermark: state.highWatermark,
      lag: Math.max(state.highWatermark - next, 0),
    }
  }

  /** Looks up positions for partitions without one (reset policy, seek to beginning/end/time). */
  private async resetPositions(): Promise<void> {
    await this.positionsFromCommitted()
    const needing = [...this.states.values()].filter((s) => s.position === null && !s.paused)
    if (needing.length === 0) return
    const none = needing.find((s) => s.resetTo === 'none')
    if (none) {
      throw new KafkaClientError(
        'ERR_NO_OFFSET',
        `no offset for ${none.tp.topic}-${none.tp.partition} and auto.offset.reset is none`,
      )
    }
    const queries = needing.map((s) => ({ ...s.tp, spec: s.resetTo as OffsetSpec }))
    let listed: Awaited<ReturnType<typeof listOffsets>>
    try {
      listed = await listOffsets(this.client, queries, this.options.isolationLevel)
    } catch (error) {
      if (!isRetriableError(error)) throw asClientError(error)
      return // tried again on the next pass
    }
    for (const state of needing) {
      const found = listed.get(tpKey(state.tp))
      if (!found || state.position !== null) continue
      // A time after every record: Kafka answers -1; the consumer then starts at the end.
      if (found.offset < 0) {
        state.resetTo = 'latest'
        continue
      }
      state.position = found.offset
      state.resetTo = null
    }
  }

  /** Assign mode with a groupId (as Java): a partition starts at the group's committed offset if any. */
  private async positionsFromCommitted(): Promise<void> {
    const group = this.group
    const needing = [...this.states.values()].filter(
      (s) => s.useCommitted && s.position === null && !s.paused,
    )
    if (!group || needing.length === 0) return
    let committed: Map<string, number>
    try {
      committed = await group.committedOffsets(needing.map((s) => s.tp))
    } catch (error) {
      if (!isRetriableError(error)) throw asClientError(error)
      return // tried again on the next pass
    }
    for (const state of needing) {
      if (!state.useCommitted || state.position !== null) continue // moved meanwhile
      state.useCommitted = false
      const offset = committed.get(tpKey(state.tp)) ?? -1
      if (offset >= 0) {
        state.position = offset
        state.resetTo = null
      }
    }
  }

  /**
   * Partitions to fetch now: positioned, not paused, and with fewer than
   * PREFETCH_ENTRIES_MAX fetched results waiting (a bound on buffered memory).
   */
  private fetchable(): PartitionState[] {
    const waiting = new Map<PartitionState, number>()
    for (const b of this.buffered) waiting.set(b.state, (waiting.get(b.state) ?? 0) + 1)
    return [...this.states.values()].filter(
      (s) => s.position !== null && !s.paused && (waiting.get(s) ?? 0) < PREFETCH_ENTRIES_MAX,
    )
  }

  /** Where the next fetch of a partition starts: after what is buffered, else at the position. */
  private nextFetchOffset(state: PartitionState): number | null {
    for (let i = this.buffered.length - 1; i >= 0; i--) {
      if (this.buffered[i].state === state) return this.buffered[i].nextOffset
    }
    return state.position
  }

  private startFetches(): void {
    const byLeader = new Map<number, PartitionState[]>()
    let leaderless = false
    for (const state of this.fetchable()) {
      const leader = this.client.metadata.leaderOf(state.tp.topic, state.tp.partition)
      if (!leader) {
        leaderless = true
        continue
      }
      const list = byLeader.get(leader.nodeId) ?? []
      list.push(state)
      byLeader.set(leader.nodeId, list)
    }
    if (leaderless || this.client.metadataStale) this.refreshMetadataSoon()
    for (const [nodeId, states] of byLeader) {
      if (this.fetchesInFlight.has(nodeId)) continue
      const fetch: Promise<void> = this.fetchFrom(nodeId, states).then(async (decodes) => {
        if (decodes.length === 0) return
        // Pipelining: with a poll waiting (so past the group step) and every next offset
        // known from the batch headers (buffered already), the next fetch goes out before
        // these records are decoded, so the broker reads while we decode (as librdkafka's
        // fetcher thread does). Otherwise the slot stays taken until they are buffered.
        const pipelined =
          this.wakeup !== null && !this.stopped && !this.closed && decodes.every((d) => d.nextOffsetKnown)
        if (!pipelined) return this.decodeFetched(decodes)
        if (this.fetchesInFlight.get(nodeId) === settled) this.fetchesInFlight.delete(nodeId)
        this.startFetches()
        const decoding = this.decodeFetched(decodes).finally(() => {
          this.decoding.delete(decoding)
          this.wake()
        })
        this.decoding.add(decoding)
      })
      const settled = fetch.finally(() => {
        if (this.fetchesInFlight.get(nodeId) === settled) this.fetchesInFlight.delete(nodeId)
        this.wake()
      })
      this.fetchesInFlight.set(nodeId, settled)
    }
  }

  /** One fetch; answers the records still to decode (the entries with a known nextOffset are buffered already). */
  private async fetchFrom(nodeId: number, states: PartitionState[]): Promise<PendingDecode[]> {
    const offsets = new Map(states.map((s) => [tpKey(s.tp), this.nextFetchOffset(s)!]))
    try {
      const response = await this.client.request<FetchResponse>(
        nodeId,
        ApiKey.Fetch,
        () => buildFetchRequest(this.options, this.client, states, offsets),
        {
          purpose: 'fetch',
          timeoutMs: this.client.options.requestTimeoutMs + this.options.fetchMaxWaitMs,
        },
      )
      if (response.errorCode !== ErrorCode.NONE) throw new KafkaProtocolError(response.errorCode, 'fetch')
      const decodes = this.onFetchResponse(response, offsets)
      this.fetchFailures = 0
      return decodes
    } catch (error) {
      await this.onFetchError(asClientError(error))
      return []
    }
  }

  private onFetchResponse(response: FetchResponse, offsets: Map<string, number>): PendingDecode[] {
    const decodes: PendingDecode[] = []
    for (const topic of response.responses) {
      for (const p of topic.partitions) {
        const key = tpKey({ topic: topic.topic, partition: p.partitionIndex })
        const state = this.states.get(key)
        const fetchOffset = offsets.get(key)
        // Reassigned or moved by a seek while the fetch was out: its data is stale.
        if (!state || fetchOffset === undefined || this.nextFetchOffset(state) !== fetchOffset) continue
        const decode = this.onPartitionData(state, p, fetchOffset)
        if (decode) decodes.push(decode)
      }
    }
    return decodes
  }

  /**
   * A partition's part of a fetch response: errors are handled now; records are to decode.
   * When the batch headers tell where the next fetch starts, the entry is buffered now,
   * not decoded yet, so that next fetch can go out first.
   */
  private onPartitionData(
    state: PartitionState,
    p: FetchResponsePartitionData,
    fetchOffset: number,
  ): PendingDecode | null {
    if (p.errorCode !== ErrorCode.NONE) {
      // A prefetch past buffered records is only dropped: the same error, if still true,
      // comes back for the fetch at the position itself (as Kafka's consumer ignores it).
      if (fetchOffset === state.position) this.onPartitionError(state, p.errorCode)
      return null
    }
    state.highWatermark = Number(p.highWatermark)
    state.logStartOffset = Number(p.logStartOffset)
    const blob = p.records as Buffer | null
    const aborted = this.options.isolationLevel === 'read_committed' ? (p.abortedTransactions ?? []) : null
    let nextOffset: number | null = null
    try {
      nextOffset = nextOffsetOf(blob, fetchOffset)
    } catch {
      // Bad framing: decoding reports it (a CorruptRecordError) as it did before the shortcut.
    }
    let entry: Buffered | null = null
    if (nextOffset !== null && nextOffset > fetchOffset) {
      entry = { state, fetchOffset, records: [], nextOffset, decoded: false }
      this.buffered.push(entry)
    }
    return { state, blob, fetchOffset, aborted, entry, nextOffsetKnown: nextOffset !== null }
  }

  /** Decodes fetched records into their entries, in order; a failure drops the entry and surfaces at the next poll. */
  private async decodeFetched(decodes: readonly PendingDecode[]): Promise<void> {
    for (const d of decodes) {
      const { state, fetchOffset, entry } = d
      let decoded: Awaited<ReturnType<typeof decodeFetchedRecords>>
      try {
        decoded = await decodeFetchedRecords(
          state.tp.topic,
          state.tp.partition,
          d.blob,
          fetchOffset,
          d.aborted,
        )
        // The headers and the decoded batches agree unless the bytes are inconsistent; a
        // mismatch would lose or repeat records, so it fails like a batch that does not decode.
        const expected = entry ? entry.nextOffset : d.nextOffsetKnown ? fetchOffset : decoded.nextOffset
        if (decoded.nextOffset !== expected)
          throw new CorruptRecordError(
            `${state.tp.topic}-${state.tp.partition}: batch headers end at ${expected}, the records at ${decoded.nextOffset}`,
          )
      } catch (error) {
        if (entry) this.buffered = this.buffered.filter((b) => b !== entry)
        await this.onFetchError(asClientError(error))
        continue
      }
      if (entry) {
        entry.records = decoded.records
        entry.decoded = true
        continue
      }
      if (this.nextFetchOffset(state) !== fetchOffset) continue
      if (decoded.records.length > 0 || decoded.nextOffset > fetchOffset) {
        this.buffered.push({
          state,
          fetchOffset,
          records: decoded.records,
          nextOffset: decoded.nextOffset,
          decoded: true,
        })
      }
    }
  }

  private onPartitionError(state: PartitionState, errorCode: number): void {
    const error = new KafkaProtocolError(errorCode, `${state.tp.topic}-${state.tp.partition}`)
    if (errorCode === ErrorCode.OFFSET_OUT_OF_RANGE) {
      if (this.options.autoOffsetReset === 'none') {
        this.pendingError = new KafkaProtocolError(
          errorCode,
          `${state.tp.topic}-${state.tp.partition} offset ${state.position} and auto.offset.reset is none`,
        )
        return
      }
      state.position = null
      state.resetTo = this.options.autoOffsetReset
      return
    }
    if (needsMetadataRefresh(error)) {
      this.metadataRefreshAtMs = 0
      this.refreshMetadataSoon()
      return
    }
    if (!isRetriableError(error)) this.pendingError = error
  }

  private async onFetchError(error: KafkaClientError): Promise<void> {
    if (!isRetriableError(error)) {
      this.pendingError = error
      return
    }
    this.fetchFailures++
    if (needsMetadataRefresh(error)) {
      this.metadataRefreshAtMs = 0
      this.refreshMetadataSoon()
    }
    // Keeps a dead broker from being hammered; the fetch slot stays taken meanwhile.
    await sleep(this.client.clock, this.client.backoff.delayMs(this.fetchFailures))
  }

  private refreshMetadataSoon(): void {
    const now = this.client.clock.monotonicMs()
    if (now < this.metadataRefreshAtMs) return
    this.metadataRefreshAtMs = now + this.client.options.retryBackoffMs
    this.client.refreshMetadata().then(
      () => this.wake(),
      () => undefined, // the next poll pass tries again
    )
  }

  private waitForProgress(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = this.client.clock.setTimeout(done, timeoutMs)
      const self = this
      function done(): void {
        timer.cancel()
        if (self.wakeup === done) self.wakeup = null
        resolve()
      }
      this.wakeup = done
    })
  }

  private wake(): void {
    const wakeup = this.wakeup
    this.wakeup = null
    wakeup?.()
  }
}

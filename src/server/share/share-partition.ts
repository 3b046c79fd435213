/**
 * One share-partition on its partition's leader (Kafka's SharePartition, KIP-932): which
 * records of the partition a share group has handed out, to whom, how often, and which are
 * done with.
 *
 * Records from the share-partition start offset (SPSO) up to the end offset (SPEO,
 * exclusive) are "in flight", each in one state: AVAILABLE (may be acquired), ACQUIRED (by
 * one member, under a lock of `recordLockDurationMs`), ACKNOWLEDGED (accepted) or ARCHIVED
 * (rejected, a gap, or out of deliveries). A member acquires records on ShareFetch, its
 * delivery count going up by one; it answers each with ACCEPT, RELEASE (available again),
 * REJECT (archived) or RENEW (the lock starts over). A lock that expires releases the record.
 * A record released with its delivery count at `deliveryCountLimit` is archived instead:
 * it is never delivered more than that many times. The SPSO moves past every record at the
 * front that is ACKNOWLEDGED or ARCHIVED; offsets below it are done for the group.
 *
 * State is in memory here, and, as Kafka's SharePartition does, made from the state the
 * share coordinator keeps in `__share_group_state` (`persisted`: SPSO and the done or
 * released ranges above it with their delivery counts) and written back there when it
 * changes (share-partition-manager.ts): `persistentState()` is what a write carries, and
 * `onStateChanged` tells the manager of the changes made by a lock running out. An
 * acknowledgement or a session's release is a state transition (beginAcknowledge,
 * beginRelease), committed or rolled back by completeTransition once its write ends.
 *
 * Time comes from the injected clock: lock expiry is a clock timeout per acquisition.
 */
import { assert } from '../../common/assert.js'
import type { Clock, TimerHandle } from '../../common/clock.js'
import { ErrorCode } from '../../protocol/error-codes.js'

/** Kafka's RecordState ids (what `__share_group_state` stores). */
export const RecordState = {
  AVAILABLE: 0,
  ACQUIRED: 1,
  ACKNOWLEDGED: 2,
  ARCHIVED: 4,
} as const
export type RecordStateId = (typeof RecordState)[keyof typeof RecordState]

/** The acknowledge types of ShareFetch/ShareAcknowledge (Kafka's AcknowledgeType, 0 = gap). */
export const AcknowledgeType = {
  GAP: 0,
  ACCEPT: 1,
  RELEASE: 2,
  REJECT: 3,
  /** KIP-1222 (Kafka 4.2+, ShareFetch/ShareAcknowledge v2): the lock starts over. */
  RENEW: 4,
} as const

/** ShareFetch v2's ShareAcquireMode. */
export type AcquireMode = 'batch_optimized' | 'record_limit'

/**
 * Read at each use, so a group's own configs (share.record.lock.duration.ms,
 * share.delivery.count.limit, share.partition.max.record.locks) apply as soon as changed, as
 * Kafka's SharePartition reads them through its ShareGroupConfigProvider.
 */
export interface SharePartitionConfig {
  /** group.share.record.lock.duration.ms: at each acquisition and renewal. */
  readonly recordLockDurationMs: number
  /** group.share.delivery.count.limit: at each release. */
  readonly deliveryCountLimit: number
  /** group.share.partition.max.record.locks: records in flight (SPSO to SPEO) at most, at each acquisition. */
  readonly maxInFlightRecords: number
  /**
   * The group's share.renew.acknowledge.enable (Kafka's default true, no broker setting): when
   * false a RENEW is INVALID_RECORD_STATE, as Kafka's SharePartition answers it.
   */
  readonly renewAcknowledgeEnabled?: boolean
}

/** A range of in-flight offsets in one state, as `__share_group_state` keeps it (PersisterStateBatch). */
export interface PersistedBatch {
  readonly firstOffset: number
  readonly lastOffset: number
  readonly deliveryState: number
  readonly deliveryCount: number
}

/** A batch of the log as read for a share fetch. */
export interface FetchedBatch {
  readonly baseOffset: number
  readonly lastOffset: number
  /** A transaction marker: never delivered, archived when reached. */
  readonly isControl: boolean
  /** A batch of an aborted transaction, read for a read_committed group: archived, never delivered. */
  readonly isAborted?: boolean
}

/** A range handed to a member (ShareFetch's AcquiredRecords). */
export interface AcquiredRange {
  readonly firstOffset: number
  readonly lastOffset: number
  readonly deliveryCount: number
}

/** One acknowledgement batch as a request carries it (types: one for all, or one per offset). */
export interface AcknowledgementBatch {
  readonly firstOffset: number
  readonly lastOffset: number
  readonly acknowledgeTypes: readonly number[]
}

interface InFlightRecord {
  state: RecordStateId
  deliveryCount: number
  /** The member holding it while ACQUIRED, else ''. */
  memberId: string
  /** The acquisition (or renewal) whose lock covers it while ACQUIRED, else 0. */
  lockId: number
  /**
   * While an acknowledgement or release of it is being written (Kafka's ongoing state
   * transition): what it was before, restored if the write fails. Such a record is neither
   * acquired nor acknowledged again, nor passed by SPSO, until the write's outcome is known.
   */
  rollback?: { readonly memberId: string; readonly lockId: number }
}

/** The records of one acknowledgement or release whose write is on its way (Kafka's PersisterBatch list). */
export interface StateTransition {
  readonly offsets: readonly number[]
}

interface Lock {
  readonly memberId: string
  readonly handle: TimerHandle
  /** Offsets under this lock when it was taken; each still checks its own lockId. */
  readonly offsets: readonly number[]
}

export class SharePartition {
  private spso: number
  private speo: number
  private readonly records = new Map<number, InFlightRecord>()
  private readonly locks = new Map<number, Lock>()
  private nextLockId = 1
  private closed = false
  /** Told after a change the caller did not make itself (a lock ran out, records released). */
  onStateChanged: () => void = () => {}
  /** Locks that ran out still holding records (Kafka's AcquisitionLockTimeoutPerSec). */
  acquisitionLockTimeouts = 0

  constructor(
    readonly config: SharePartitionConfig,
    private readonly clock: Clock,
    startOffset: number,
    /** The state read from the share coordinator, if it has any: the share-partition resumes it. */
    persisted?: readonly PersistedBatch[],
  ) {
    assert(Number.isSafeInteger(startOffset) && startOffset >= 0, `bad start offset ${startOffset}`)
    assert(config.deliveryCountLimit >= 1, 'the delivery count limit is at least 1')
    this.spso = startOffset
    this.speo = startOffset
    if (persisted !== undefined) this.resume(persisted)
  }

  /**
   * Rebuilds the in-flight records from persisted batches, as Kafka's SharePartition
   * initialization does: offsets up to the last batch are in flight; an offset no batch names
   * (never acknowledged or released) is AVAILABLE with delivery count 0, and an ACQUIRED one
   * (a lock the previous leader held) is AVAILABLE again with its count.
   */
  private resume(persisted: readonly PersistedBatch[]): void {
    const byOffset = new Map<number, PersistedBatch>()
    let end = this.spso
    for (const batch of persisted)
      for (let offset = Math.max(batch.firstOffset, this.spso); offset <= batch.lastOffset; offset++) {
        byOffset.set(offset, batch)
        end = Math.max(end, offset + 1)
      }
    while (this.speo < end) {
      const batch = byOffset.get(this.speo)
      const state =
        batch?.deliveryState === RecordState.ACKNOWLEDGED || batch?.deliveryState === RecordState.ARCHIVED
          ? batch.deliveryState
          : RecordState.AVAILABLE
      this.records.set(this.speo, {
        state,
        deliveryCount: batch?.deliveryCount ?? 0,
        memberId: '',
        lockId: 0,
      })
      this.speo++
    }
    this.maybeAdvanceStartOffset()
  }

  /**
   * What a WriteShareGroupState carries: SPSO, the records done above it, and each in-flight
   * record not under a lock as ranges of one state and delivery count. Acquired records are
   * left out (as Kafka writes them only once acknowledged or released): the share coordinator
   * keeps what it had for them. Records in a transition are written in their new state, and
   * SPSO as it will be once the write succeeds (past the done records at the front).
   */
  persistentState(): { startOffset: number; deliveryCompleteCount: number; batches: PersistedBatch[] } {
    let start = this.spso
    while (start < this.speo && isDone(this.records.get(start))) start++
    let deliveryCompleteCount = 0
    const batches: PersistedBatch[] = []
    for (let offset = start; offset < this.speo; offset++) {
      if (isDone(this.records.get(offset))) deliveryCompleteCount++
      const record = this.records.get(offset)
      if (record === undefined || record.state === RecordState.ACQUIRED) continue
      const last = batches.at(-1)
      if (
        last &&
        last.lastOffset === offset - 1 &&
        last.deliveryState === record.state &&
        last.deliveryCount === record.deliveryCount
      )
        batches[batches.length - 1] = { ...last, lastOffset: offset }
      else
        batches.push({
          firstOffset: offset,
          lastOffset: offset,
          deliveryState: record.state,
          deliveryCount: record.deliveryCount,
        })
    }
    return { startOffset: start, deliveryCompleteCount, batches }
  }

  /** Whether a member holds records under a lock here. */
  get hasAcquiredRecords(): boolean {
    return this.locks.size > 0
  }

  /** The share-partition start offset: every record below it is acknowledged or archived. */
  get startOffset(): number {
    return this.spso
  }

  /** One past the last offset ever acquired (Kafka's endOffset + 1). */
  get endOffset(): number {
    return this.speo
  }

  /** The state and delivery count of an in-flight offset (tests, DescribeShareGroupOffsets later). */
  stateOf(offset: number): { state: RecordStateId; deliveryCount: number; memberId: string } | undefined {
    const record = this.records.get(offset)
    return record && { state: record.state, deliveryCount: record.deliveryCount, memberId: record.memberId }
  }

  /**
   * In-flight records already done (acknowledged or archived) at or above SPSO: Kafka's
   * deliveryCompleteCount, which the share group lag leaves out.
   */
  get deliveryCompleteCount(): number {
    let done = 0
    for (const record of this.records.values()) if (isDone(record)) done++
    return done
  }

  /** Records from SPSO to SPEO: what group.share.partition.max.record.locks bounds. */
  get inFlightCount(): number {
    return this.speo - this.spso
  }

  /** Where the next read of the log starts: the first AVAILABLE record, else SPEO. */
  nextFetchOffset(): number {
    for (let offset = this.spso; offset < this.speo; offset++)
      if (isAcquirable(this.records.get(offset))) return offset
    return this.speo
  }

  /** Whether a fetch may acquire anything: an available record in flight, or room for new ones. */
  canAcquire(): boolean {
    return (
      !this.closed &&
      (this.nextFetchOffset() < this.speo || this.inFlightCount < this.config.maxInFlightRecords)
    )
  }

  /**
   * Acquires for `memberId` what it may take of `batches` (read from the log at
   * nextFetchOffset): AVAILABLE records in flight, and records past SPEO while fewer than
   * maxInFlightRecords are in flight. At most `maxRecords` in record_limit mode; in
   * batch_optimized mode whole batches until maxRecords is reached (Kafka may exceed it to
   * keep batch boundaries). Control batches and aborted transactions' batches are archived on
   * the way, never delivered.
   */
  acquire(
    memberId: string,
    batches: readonly FetchedBatch[],
    maxRecords: number,
    mode: AcquireMode,
  ): AcquiredRange[] {
    assert(memberId !== '', 'a member acquires records')
    if (this.closed || maxRecords <= 0) return []
    const acquired: number[] = []
    for (const batch of batches) {
      if (acquired.length >= maxRecords) break
      for (let offset = Math.max(batch.baseOffset, this.spso); offset <= batch.lastOffset; offset++) {
        if (mode === 'record_limit' && acquired.length >= maxRecords) break
        if (offset >= this.speo) {
          if (this.inFlightCount >= this.config.maxInFlightRecords) break
          // Offsets the log no longer has (compacted, or between transactions' batches) are
          // archived: there is nothing to deliver.
          while (this.speo < offset) this.addRecord(RecordState.ARCHIVED)
          this.addRecord(RecordState.AVAILABLE)
        }
        const record = this.records.get(offset)
        if (record === undefined || !isAcquirable(record)) continue
        if (batch.isControl || batch.isAborted === true) {
          record.state = RecordState.ARCHIVED
          continue
        }
        record.state = RecordState.ACQUIRED
        record.deliveryCount++
        record.memberId = memberId
        acquired.push(offset)
      }
    }
    if (acquired.length > 0) this.lock(memberId, acquired)
    this.maybeAdvanceStartOffset()
    return this.toRanges(acquired)
  }

  /**
   * Applies a member's acknowledgements. All or nothing, as Kafka's: every offset must be
   * ACQUIRED by this member (INVALID_RECORD_STATE otherwise, nothing changes), except that a
   * GAP may name offsets that were never records, and offsets below SPSO (done already) are
   * passed over, as Kafka 4.4 does. A batch starting past every offset ever acquired while
   * some are in flight is INVALID_REQUEST (Kafka's "first offset in request is past acquired
   * records"); with none in flight, INVALID_RECORD_STATE. A RENEW of a group whose
   * share.renew.acknowledge.enable is false is INVALID_RECORD_STATE too ("Renewing acquisition
   * locks is not enabled for the group." in Kafka, which checks it after the member's
   * ownership).
   */
  acknowledge(memberId: string, batches: readonly AcknowledgementBatch[]): number {
    const { errorCode, transition } = this.beginAcknowledge(memberId, batches)
    if (transition) this.completeTransition(transition, true)
    return errorCode
  }

  /**
   * acknowledge() whose changes wait for their write to the share coordinator: settled records
   * stay as they were for everyone else (not acquirable, not passed by SPSO) until
   * completeTransition says whether the write succeeded, as Kafka's SharePartition keeps them
   * in a state transition until its persister answers.
   */
  beginAcknowledge(
    memberId: string,
    batches: readonly AcknowledgementBatch[],
  ): { errorCode: number; transition: StateTransition | null } {
    if (this.closed) return { errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, transition: null }
    const refused = this.checkAcknowledgements(memberId, batches)
    if (refused !== ErrorCode.NONE) return { errorCode: refused, transition: null }
    const renewed: number[] = []
    const settled: number[] = []
    for (const batch of batches)
      for (let offset = Math.max(batch.firstOffset, this.spso); offset <= batch.lastOffset; offset++) {
        const record = this.records.get(offset)
        if (record === undefined) continue
        const type = typeAt(batch, offset)
        if (type === AcknowledgeType.RENEW) renewed.push(offset)
        else {
          this.settleInTransition(record, type)
          settled.push(offset)
        }
      }
    if (renewed.length > 0) this.lock(memberId, renewed)
    return { errorCode: ErrorCode.NONE, transition: { offsets: settled } }
  }

  /** Every offset acknowledged must be the member's (see acknowledge). */
  private checkAcknowledgements(memberId: string, batches: readonly AcknowledgementBatch[]): number {
    const renewRefused = this.config.renewAcknowledgeEnabled === false
    for (const batch of batches) {
      if (batch.firstOffset >= this.speo && this.records.size > 0) return ErrorCode.INVALID_REQUEST
      for (let offset = Math.max(batch.firstOffset, this.spso); offset <= batch.lastOffset; offset++) {
        const type = typeAt(batch, offset)
        if (type === AcknowledgeType.GAP && !this.records.has(offset)) continue
        const record = this.records.get(offset)
        if (record?.state !== RecordState.ACQUIRED || record.memberId !== memberId)
          return ErrorCode.INVALID_RECORD_STATE
        if (type === AcknowledgeType.RENEW && renewRefused) return ErrorCode.INVALID_RECORD_STATE
      }
    }
    return ErrorCode.NONE
  }

  /** Releases everything `memberId` holds (its share session closed). */
  releaseAcquiredRecords(memberId: string): number {
    const transition = this.beginRelease(memberId)
    this.completeTransition(transition, true)
    if (transition.offsets.length > 0) this.onStateChanged()
    return transition.offsets.length
  }

  /** releaseAcquiredRecords() whose changes wait for their write (see beginAcknowledge). */
  beginRelease(memberId: string): StateTransition {
    const released: number[] = []
    for (const [offset, record] of this.records) {
      if (record.state !== RecordState.ACQUIRED || record.memberId !== memberId) continue
      this.settleInTransition(record, AcknowledgeType.RELEASE)
      released.push(offset)
    }
    return { offsets: released }
  }

  /**
   * The write carrying `transition` ended. Committed: its records keep their new states and
   * SPSO may move past them. Not committed (Kafka's rollback): each is ACQUIRED by its member
   * again under the lock it had, or, if that lock ran out meanwhile, released as the lock's
   * expiry would have released it (archived at the delivery count limit).
   */
  completeTransition(transition: StateTransition, committed: boolean): void {
    if (this.closed) return
    let expired = 0
    for (const offset of transition.offsets) {
      const record = this.records.get(offset)
      const before = record?.rollback
      if (record === undefined || before === undefined) continue
      record.rollback = undefined
      if (committed) continue
      if (this.locks.has(before.lockId)) {
        record.state = RecordState.ACQUIRED
        record.memberId = before.memberId
        record.lockId = before.lockId
      } else {
        record.state =
          record.deliveryCount >= this.config.deliveryCountLimit
            ? RecordState.ARCHIVED
            : RecordState.AVAILABLE
        record.memberId = ''
        record.lockId = 0
        expired++
      }
    }
    this.maybeAdvanceStartOffset()
    // Records the rollback released are written like any released lock.
    if (expired > 0) this.onStateChanged()
  }

  /** Cancels every lock: the partition is no longer led here. */
  close(): void {
    this.closed = true
    for (const lock of this.locks.values()) lock.handle.cancel()
    this.locks.clear()
  }

  private addRecord(state: RecordStateId): void {
    this.records.set(this.speo, { state, deliveryCount: 0, memberId: '', lockId: 0 })
    this.speo++
  }

  /** settle(), remembering what the record was until its write's outcome is known. */
  private settleInTransition(record: InFlightRecord, type: number): void {
    assert(
      record.state === RecordState.ACQUIRED && record.rollback === undefined,
      'only a held record settles',
    )
    const rollback = { memberId: record.memberId, lockId: record.lockId }
    this.settle(record, type)
    record.rollback = rollback
  }

  /** ACCEPT → ACKNOWLEDGED; REJECT and GAP → ARCHIVED; RELEASE → AVAILABLE, or ARCHIVED at the limit. */
  private settle(record: InFlightRecord, type: number): void {
    if (type === AcknowledgeType.ACCEPT) record.state = RecordState.ACKNOWLEDGED
    else if (type === AcknowledgeType.RELEASE)
      record.state =
        record.deliveryCount >= this.config.deliveryCountLimit ? RecordState.ARCHIVED : RecordState.AVAILABLE
    else record.state = RecordState.ARCHIVED
    record.memberId = ''
    record.lockId = 0
  }

  /** Puts `offsets` under a new lock of recordLockDurationMs for `memberId`. */
  private lock(memberId: string, offsets: readonly number[]): void {
    const lockId = this.nextLockId++
    for (const offset of offsets) {
      const record = this.records.get(offset)
      assert(record?.state === RecordState.ACQUIRED, `offset ${offset} is locked while acquired`)
      record.lockId = lockId
    }
    const handle = this.clock.setTimeout(() => this.onLockExpired(lockId), this.config.recordLockDurationMs)
    this.locks.set(lockId, { memberId, handle, offsets })
  }

  /** A lock ran out: what it still covers is released, as if the member had said RELEASE. */
  private onLockExpired(lockId: number): void {
    const lock = this.locks.get(lockId)
    this.locks.delete(lockId)
    if (this.closed || lock === undefined) return
    let released = 0
    for (const offset of lock.offsets) {
      const record = this.records.get(offset)
      if (record?.state !== RecordState.ACQUIRED || record.lockId !== lockId) continue
      this.settle(record, AcknowledgeType.RELEASE)
      released++
    }
    this.maybeAdvanceStartOffset()
    if (released > 0) {
      this.acquisitionLockTimeouts++
      this.onStateChanged()
    }
  }

  /** Moves SPSO past the done records at the front, forgetting them; drops locks with nothing left. */
  private maybeAdvanceStartOffset(): void {
    while (this.spso < this.speo) {
      const record = this.records.get(this.spso)
      assert(record !== undefined, () => `in-flight offset ${this.spso} has a state`)
      if (record.state !== RecordState.ACKNOWLEDGED && record.state !== RecordState.ARCHIVED) break
      if (record.rollback !== undefined) break
      this.records.delete(this.spso)
      this.spso++
    }
    // A lock is kept while a record it covered may return to it (a transition not yet written).
    const covers = (lockId: number, offset: number) => {
      const record = this.records.get(offset)
      return record?.lockId === lockId || record?.rollback?.lockId === lockId
    }
    for (const [lockId, lock] of this.locks) {
      if (lock.offsets.some((offset) => covers(lockId, offset))) continue
      lock.handle.cancel()
      this.locks.delete(lockId)
    }
    assert(this.spso <= this.speo, () => `start offset ${this.spso} passed the end offset ${this.speo}`)
    assert(this.records.size === this.speo - this.spso, 'every in-flight offset has one state')
  }

  /** Consecutive offsets with the same delivery count become one AcquiredRecords range. */
  private toRanges(offsets: readonly number[]): AcquiredRange[] {
    const ranges: AcquiredRange[] = []
    for (const offset of offsets) {
      const deliveryCount = this.records.get(offset)?.deliveryCount ?? 0
      const last = ranges.at(-1)
      if (last && last.lastOffset === offset - 1 && last.deliveryCount === deliveryCount)
        ranges[ranges.length - 1] = { ...last, lastOffset: offset }
      else ranges.push({ firstOffset: offset, lastOffset: offset, deliveryCount })
    }
    return ranges
  }
}

function isDone(record: InFlightRecord | undefined): boolean {
  return record?.state === RecordState.ACKNOWLEDGED || record?.state === RecordState.ARCHIVED
}

/** AVAILABLE and not waiting for a write that may give it back to its member. */
function isAcquirable(record: InFlightRecord | undefined): boolean {
  return record?.state === RecordState.AVAILABLE && record.rollback === undefined
}

/** Records per acknowledge type (GAP left out) of validated acknowledgement batches. */
export function acknowledgedRecordCounts(batches: readonly AcknowledgementBatch[]): Map<number, number> {
  const counts = new Map<number, number>()
  for (const batch of batches)
    for (let offset = batch.firstOffset; offset <= batch.lastOffset; offset++) {
      const type = typeAt(batch, offset)
      if (type !== AcknowledgeType.GAP) counts.set(type, (counts.get(type) ?? 0) + 1)
    }
  return counts
}

/** The type for `offset`: the batch's only type, or the one at its position. */
function typeAt(batch: AcknowledgementBatch, offset: number): number {
  return batch.acknowledgeTypes.length === 1
    ? batch.acknowledgeTypes[0]
    : batch.acknowledgeTypes[offset - batch.firstOffset]
}

/**
 * Kafka's checks of one partition's acknowledgement batches (KafkaApis
 * validateAcknowledgementBatches): offsets in order and not overlapping, first <= last,
 * one type for the batch or one per offset, each type known (RENEW only when the request
 * says it carries renewals). INVALID_REQUEST when any fails.
 */
export function validateAcknowledgementBatches(
  batches: readonly AcknowledgementBatch[],
  renewAllowed: boolean,
): number {
  let previousLast = -1
  for (const batch of batches) {
    if (batch.firstOffset < 0 || batch.firstOffset > batch.lastOffset) return ErrorCode.INVALID_REQUEST
    if (batch.firstOffset <= previousLast) return ErrorCode.INVALID_REQUEST
    const count = batch.lastOffset - batch.firstOffset + 1
    if (batch.acknowledgeTypes.length === 0) return ErrorCode.INVALID_REQUEST
    if (batch.acknowledgeTypes.length > 1 && batch.acknowledgeTypes.length !== count)
      return ErrorCode.INVALID_REQUEST
    const maxType = renewAllowed ? AcknowledgeType.RENEW : AcknowledgeType.REJECT
    if (batch.acknowledgeTypes.some((t) => t < AcknowledgeType.GAP || t > maxType))
      return ErrorCode.INVALID_REQUEST
    previousLast = batch.lastOffset
  }
  return ErrorCode.NONE
}

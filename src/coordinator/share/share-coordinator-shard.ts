/**
 * One partition of `__share_group_state` (Kafka's ShareCoordinatorShard, KIP-932): the
 * persisted state of the share-partitions whose key ("group:topicId:partition") hashes to
 * it. Each operation is pure: it looks at the state and answers with the records to write
 * and the response; the coordinator (share-coordinator.ts) appends the records and, once
 * they are committed, applies them here with `apply`, the same path as replay.
 *
 * Fencing, as Kafka's: a write (or read) from a leader epoch below the last one recorded is
 * FENCED_LEADER_EPOCH (an old partition leader after a failover), a write of a state epoch
 * below the recorded one FENCED_STATE_EPOCH (a leader still holding the state from before an
 * AlterShareGroupOffsets). A write is a ShareUpdate (the changed batches, merged into the
 * state) until `snapshotUpdateRecordsPerSnapshot` updates follow the last snapshot; then it is
 * a new ShareSnapshot with the whole state, so a load replays a bounded tail per key.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import type { CoordinatorShard, ReplayedBatch } from '../runtime/coordinator-shard.js'
import {
  combineStateBatches,
  coordinatorKeyOf,
  type ShareGroupOffset,
  type SharePartitionKey,
  type ShareStateBatch,
  type ShareStateRecord,
  type ShareUpdate,
} from './share-state-records.js'

/** A WriteShareGroupState partition: -1 for start offset or leader epoch means unchanged. */
export interface ShareStateWrite {
  readonly stateEpoch: number
  readonly leaderEpoch: number
  readonly startOffset: number
  readonly deliveryCompleteCount: number
  readonly stateBatches: readonly ShareStateBatch[]
}

/** ReadShareGroupState's answer for one partition. */
export interface ShareStateRead {
  readonly errorCode: number
  /** -1 when the group has no state on the partition (Kafka's UNINITIALIZED_START_OFFSET). */
  readonly startOffset: number
  readonly stateEpoch: number
  readonly stateBatches: readonly ShareStateBatch[]
}

/** ReadShareGroupStateSummary's answer for one partition. */
export interface ShareStateSummaryRead {
  readonly errorCode: number
  readonly startOffset: number
  readonly stateEpoch: number
  readonly leaderEpoch: number
  readonly deliveryCompleteCount: number
}

export interface ShareOperation<T> {
  readonly records: readonly ShareStateRecord[]
  readonly response: T
}

const NO_STATE_EPOCH = 0

export class ShareCoordinatorShard implements CoordinatorShard<ShareStateRecord> {
  private readonly states = new Map<string, ShareGroupOffset>()
  /** Updates written since each key's last snapshot. */
  private readonly updatesSinceSnapshot = new Map<string, number>()

  constructor(private readonly snapshotUpdateRecordsPerSnapshot: number) {}

  get size(): number {
    return this.states.size
  }

  /** The state of `key` (tests, summaries). */
  stateOf(key: SharePartitionKey): ShareGroupOffset | undefined {
    return this.states.get(coordinatorKeyOf(key))
  }

  // ---- replay --------------------------------------------------------------------------------

  /** `__share_group_state` is never written transactionally. */
  replayEndTransactionMarker(): void {}

  onLoaded(): void {}

  onUnloaded(): void {}

  summary() {
    return { sharePartitions: this.states.size }
  }

  replay(batch: ReplayedBatch<ShareStateRecord>): void {
    for (const record of batch.records) this.apply(record)
  }

  /** Applies one record, replayed or just committed. */
  apply(record: ShareStateRecord): void {
    const id = coordinatorKeyOf(record.key)
    if (record.value === null) {
      // A tombstone of either type: the state is gone (DeleteShareGroupState).
      this.states.delete(id)
      this.updatesSinceSnapshot.delete(id)
      return
    }
    if (record.kind === 'snapshot') {
      this.states.set(id, record.value)
      this.updatesSinceSnapshot.set(id, 0)
      return
    }
    const current = this.states.get(id)
    // An update without its snapshot (compacted away with a later tombstone) is meaningless.
    if (current === undefined) return
    this.states.set(id, mergeUpdate(current, record.value))
    this.updatesSinceSnapshot.set(id, (this.updatesSinceSnapshot.get(id) ?? 0) + 1)
  }

  // ---- operations ----------------------------------------------------------------------------

  writeState(key: SharePartitionKey, write: ShareStateWrite, nowMs: number): ShareOperation<number> {
    const current = this.states.get(coordinatorKeyOf(key))
    const fenced = this.fencing(current, write.leaderEpoch, write.stateEpoch)
    if (fenced !== ErrorCode.NONE) return { records: [], response: fenced }
    if (current === undefined) {
      const value: ShareGroupOffset = {
        snapshotEpoch: 0,
        stateEpoch: Math.max(write.stateEpoch, NO_STATE_EPOCH),
        leaderEpoch: write.leaderEpoch,
        startOffset: Math.max(write.startOffset, 0),
        deliveryCompleteCount: write.deliveryCompleteCount,
        createTimestampMs: nowMs,
        writeTimestampMs: nowMs,
        stateBatches: combineStateBatches([], write.stateBatches, Math.max(write.startOffset, 0)),
      }
      return { records: [{ kind: 'snapshot', key, value }], response: ErrorCode.NONE }
    }
    const updates = this.updatesSinceSnapshot.get(coordinatorKeyOf(key)) ?? 0
    const update: ShareUpdate = {
      snapshotEpoch: current.snapshotEpoch,
      leaderEpoch: write.leaderEpoch,
      startOffset: write.startOffset,
      deliveryCompleteCount: write.deliveryCompleteCount,
      stateBatches: combineStateBatches([], write.stateBatches, write.startOffset),
    }
    if (updates < this.snapshotUpdateRecordsPerSnapshot)
      return { records: [{ kind: 'update', key, value: update }], response: ErrorCode.NONE }
    const merged = mergeUpdate(current, update)
    const value: ShareGroupOffset = {
      ...merged,
      snapshotEpoch: current.snapshotEpoch + 1,
      stateEpoch: write.stateEpoch < 0 ? current.stateEpoch : write.stateEpoch,
      writeTimestampMs: nowMs,
    }
    return { records: [{ kind: 'snapshot', key, value }], response: ErrorCode.NONE }
  }

  /**
   * The state for a partition leader making its share-partition. A newer leader epoch is
   * recorded (written as an update, so it survives a coordinator failover): the previous
   * leader's later writes are fenced.
   */
  readState(key: SharePartitionKey, leaderEpoch: number): ShareOperation<ShareStateRead> {
    const current = this.states.get(coordinatorKeyOf(key))
    if (current === undefined)
      return {
        records: [],
        response: {
          errorCode: ErrorCode.NONE,
          startOffset: -1,
          stateEpoch: NO_STATE_EPOCH,
          stateBatches: [],
        },
      }
    if (leaderEpoch >= 0 && leaderEpoch < current.leaderEpoch)
      return {
        records: [],
        response: {
          errorCode: ErrorCode.FENCED_LEADER_EPOCH,
          startOffset: -1,
          stateEpoch: -1,
          stateBatches: [],
        },
      }
    const response: ShareStateRead = {
      errorCode: ErrorCode.NONE,
      startOffset: current.startOffset,
      stateEpoch: current.stateEpoch,
      stateBatches: current.stateBatches,
    }
    if (leaderEpoch <= current.leaderEpoch) return { records: [], response }
    const update: ShareUpdate = {
      snapshotEpoch: current.snapshotEpoch,
      leaderEpoch,
      startOffset: -1,
      deliveryCompleteCount: -1,
      stateBatches: [],
    }
    return { records: [{ kind: 'update', key, value: update }], response }
  }

  readSummary(key: SharePartitionKey): ShareStateSummaryRead {
    const current = this.states.get(coordinatorKeyOf(key))
    if (current === undefined)
      return {
        errorCode: ErrorCode.NONE,
        startOffset: -1,
        stateEpoch: NO_STATE_EPOCH,
        leaderEpoch: -1,
        deliveryCompleteCount: -1,
      }
    return {
      errorCode: ErrorCode.NONE,
      startOffset: current.startOffset,
      stateEpoch: current.stateEpoch,
      leaderEpoch: current.leaderEpoch,
      deliveryCompleteCount: current.deliveryCompleteCount,
    }
  }

  /**
   * InitializeShareGroupState: the state starts over at `startOffset` under `stateEpoch`
   * (AlterShareGroupOffsets; the group coordinator passes the summary's epoch + 1). An older
   * state epoch than the recorded one is fenced.
   */
  initializeState(
    key: SharePartitionKey,
    stateEpoch: number,
    startOffset: number,
    nowMs: number,
  ): ShareOperation<number> {
    const current = this.states.get(coordinatorKeyOf(key))
    if (current !== undefined && stateEpoch < current.stateEpoch)
      return { records: [], response: ErrorCode.FENCED_STATE_EPOCH }
    const value: ShareGroupOffset = {
      snapshotEpoch: current === undefined ? 0 : current.snapshotEpoch + 1,
      stateEpoch,
      // The leader epoch stays: a leader of an older epoch is still fenced.
      leaderEpoch: current?.leaderEpoch ?? -1,
      startOffset,
      deliveryCompleteCount: 0,
      createTimestampMs: nowMs,
      writeTimestampMs: nowMs,
      stateBatches: [],
    }
    return { records: [{ kind: 'snapshot', key, value }], response: ErrorCode.NONE }
  }

  /** DeleteShareGroupState: tombstones for the key's snapshot and updates. */
  deleteState(key: SharePartitionKey): ShareOperation<number> {
    if (!this.states.has(coordinatorKeyOf(key))) return { records: [], response: ErrorCode.NONE }
    return {
      records: [
        { kind: 'snapshot', key, value: null },
        { kind: 'update', key, value: null },
      ],
      response: ErrorCode.NONE,
    }
  }

  private fencing(current: ShareGroupOffset | undefined, leaderEpoch: number, stateEpoch: number): number {
    if (current === undefined) return ErrorCode.NONE
    if (leaderEpoch >= 0 && leaderEpoch < current.leaderEpoch) return ErrorCode.FENCED_LEADER_EPOCH
    if (stateEpoch >= 0 && stateEpoch < current.stateEpoch) return ErrorCode.FENCED_STATE_EPOCH
    return ErrorCode.NONE
  }
}

/** An update written over a state: new batches merged, start offset and leader epoch if given. */
function mergeUpdate(current: ShareGroupOffset, update: ShareUpdate): ShareGroupOffset {
  const startOffset = update.startOffset < 0 ? current.startOffset : update.startOffset
  return {
    ...current,
    leaderEpoch:
      update.leaderEpoch < 0 ? current.leaderEpoch : Math.max(current.leaderEpoch, update.leaderEpoch),
    startOffset,
    deliveryCompleteCount:
      update.deliveryCompleteCount < 0 ? current.deliveryCompleteCount : update.deliveryCompleteCount,
    stateBatches: combineStateBatches(current.stateBatches, update.stateBatches, startOffset),
  }
}

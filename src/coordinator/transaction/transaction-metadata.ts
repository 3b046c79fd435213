/**
 * A transactional id's state as the transaction coordinator holds it (Kafka's
 * TransactionMetadata and TransactionState): producer id and epoch, the partitions of the
 * ongoing transaction and where it stands. A change is prepared first (`prepare*`, which
 * sets `pendingState` so concurrent requests get CONCURRENT_TRANSACTIONS), written to
 * `__transaction_state`, and applied only once committed there (`completeTransition`), or
 * dropped (`abandonTransition`). Nothing here does I/O or reads a clock.
 */

import { assert } from '../../common/assert.js'
import { NO_PRODUCER_ID, type ProducerId } from '../../common/types.js'

/** Kafka's TransactionState, with the ids it has in `__transaction_state` values. */
export const TransactionState = {
  Empty: 0,
  Ongoing: 1,
  PrepareCommit: 2,
  PrepareAbort: 3,
  CompleteCommit: 4,
  CompleteAbort: 5,
  Dead: 6,
  /** Never written: an ongoing transaction being aborted by the coordinator, epoch bumped. */
  PrepareEpochFence: 7,
} as const
export type TransactionState = (typeof TransactionState)[keyof typeof TransactionState]

const STATE_NAMES: Record<TransactionState, string> = {
  0: 'Empty',
  1: 'Ongoing',
  2: 'PrepareCommit',
  3: 'PrepareAbort',
  4: 'CompleteCommit',
  5: 'CompleteAbort',
  6: 'Dead',
  7: 'PrepareEpochFence',
}

/** The name DescribeTransactions and ListTransactions use (Kafka's TransactionState.name). */
export function stateName(state: TransactionState): string {
  return STATE_NAMES[state]
}

export function stateFromName(name: string): TransactionState | undefined {
  for (const [id, known] of Object.entries(STATE_NAMES))
    if (known === name) return Number(id) as TransactionState
  return undefined
}

export function isTransactionState(id: number): id is TransactionState {
  return Number.isInteger(id) && id >= 0 && id <= 7
}

/** Kafka's TransactionState.validPreviousStates. */
const VALID_PREVIOUS: Record<TransactionState, readonly TransactionState[]> = {
  0: [TransactionState.Empty, TransactionState.CompleteCommit, TransactionState.CompleteAbort],
  1: [
    TransactionState.Ongoing,
    TransactionState.Empty,
    TransactionState.CompleteCommit,
    TransactionState.CompleteAbort,
  ],
  2: [TransactionState.Ongoing],
  // Transaction version 2 aborts from Empty and Complete* too: the client cannot know whether
  // its first produce started a transaction, and the abort bumps the epoch either way.
  3: [
    TransactionState.Ongoing,
    TransactionState.PrepareEpochFence,
    TransactionState.Empty,
    TransactionState.CompleteCommit,
    TransactionState.CompleteAbort,
  ],
  4: [TransactionState.PrepareCommit],
  5: [TransactionState.PrepareAbort],
  6: [TransactionState.Empty, TransactionState.CompleteAbort, TransactionState.CompleteCommit],
  7: [TransactionState.Ongoing],
}

export { NO_PRODUCER_ID }
export const NO_PRODUCER_EPOCH = -1
export const EPOCH_MAX = 32767

/**
 * The transaction protocol a client speaks (Kafka's TransactionVersion, the finalized levels
 * of `transaction.version`): 0 and 1 the classic one, 2 KIP-890 part 2, where every
 * transaction's end bumps the producer epoch (EndTxn v5, Produce v12, TxnOffsetCommit v5).
 */
export type TransactionVersion = 0 | 1 | 2
export const TV_0: TransactionVersion = 0
export const TV_2: TransactionVersion = 2

/** Kafka's TransactionVersion.supportsEpochBump. */
export function supportsEpochBump(version: TransactionVersion): boolean {
  return version >= TV_2
}

/** A finalized `transaction.version` level as the version it stands for (above 2: 2). */
export function transactionVersionOf(level: number): TransactionVersion {
  return level >= 2 ? TV_2 : level === 1 ? 1 : TV_0
}

/** Kafka's isEpochExhausted: the last epoch is kept for the markers of a fence. */
export function isEpochExhausted(epoch: number): boolean {
  return epoch >= EPOCH_MAX - 1
}

/** `topic` → partitions; kept sorted when listed so records and answers are stable. */
export type TopicPartitions = ReadonlyMap<string, ReadonlySet<number>>

/** What a prepared change will make of the metadata once `__transaction_state` has it. */
export interface TransactionTransit {
  readonly producerId: ProducerId
  readonly previousProducerId: ProducerId
  /** TV2: the producer id a commit or abort on the last epoch moves to once completed. */
  readonly nextProducerId: ProducerId
  readonly producerEpoch: number
  readonly lastProducerEpoch: number
  readonly txnTimeoutMs: number
  readonly state: TransactionState
  readonly partitions: TopicPartitions
  readonly txnStartTimestampMs: number
  readonly txnLastUpdateTimestampMs: number
  /** The protocol of the client's last transaction (what its completion does). */
  readonly clientTransactionVersion: TransactionVersion
}

export class TransactionMetadata {
  producerId: ProducerId
  /** The producer id before the last rotation (KIP-360), so a retried rotation is recognised. */
  previousProducerId: ProducerId
  nextProducerId: ProducerId
  producerEpoch: number
  /** The epoch before the last bump, so a retried InitProducerId gets the same answer. */
  lastProducerEpoch: number
  txnTimeoutMs: number
  state: TransactionState
  partitions: Map<string, Set<number>>
  txnStartTimestampMs: number
  txnLastUpdateTimestampMs: number
  clientTransactionVersion: TransactionVersion
  /** The state being written to the log; null when no change is in flight. */
  pendingState: TransactionState | null = null
  /** An epoch fence whose PrepareAbort failed to be written: the retry must not bump again. */
  hasFailedEpochFence = false

  constructor(
    readonly transactionalId: string,
    init: Omit<TransactionTransit, 'partitions' | 'nextProducerId' | 'clientTransactionVersion'> & {
      partitions?: TopicPartitions
      nextProducerId?: ProducerId
      clientTransactionVersion?: TransactionVersion
    },
  ) {
    this.producerId = init.producerId
    this.previousProducerId = init.previousProducerId
    this.nextProducerId = init.nextProducerId ?? NO_PRODUCER_ID
    this.clientTransactionVersion = init.clientTransactionVersion ?? TV_0
    this.producerEpoch = init.producerEpoch
    this.lastProducerEpoch = init.lastProducerEpoch
    this.txnTimeoutMs = init.txnTimeoutMs
    this.state = init.state
    this.partitions = copyPartitions(init.partitions ?? new Map())
    this.txnStartTimestampMs = init.txnStartTimestampMs
    this.txnLastUpdateTimestampMs = init.txnLastUpdateTimestampMs
  }

  /** A transactional id seen for the first time: Empty, no epoch yet. */
  static created(transactionalId: string, producerId: ProducerId, txnTimeoutMs: number, nowMs: number) {
    return new TransactionMetadata(transactionalId, {
      producerId,
      previousProducerId: NO_PRODUCER_ID,
      producerEpoch: NO_PRODUCER_EPOCH,
      lastProducerEpoch: NO_PRODUCER_EPOCH,
      txnTimeoutMs,
      state: TransactionState.Empty,
      txnStartTimestampMs: -1,
      txnLastUpdateTimestampMs: nowMs,
    })
  }

  get hasPendingTransition(): boolean {
    return this.pendingState !== null
  }

  get isProducerEpochExhausted(): boolean {
    return isEpochExhausted(this.producerEpoch)
  }

  hasPartition(topic: string, partition: number): boolean {
    return this.partitions.get(topic)?.has(partition) === true
  }

  containsAll(added: TopicPartitions): boolean {
    for (const [topic, partitions] of added)
      for (const partition of partitions) if (!this.hasPartition(topic, partition)) return false
    return true
  }

  /** A marker was written to the partition: it is no longer pending in the transaction. */
  removePartition(topic: string, partition: number): void {
    const partitions = this.partitions.get(topic)
    partitions?.delete(partition)
    if (partitions?.size === 0) this.partitions.delete(topic)
  }

  snapshot(): TransactionTransit {
    return {
      producerId: this.producerId,
      previousProducerId: this.previousProducerId,
      nextProducerId: this.nextProducerId,
      producerEpoch: this.producerEpoch,
      lastProducerEpoch: this.lastProducerEpoch,
      txnTimeoutMs: this.txnTimeoutMs,
      state: this.state,
      partitions: copyPartitions(this.partitions),
      txnStartTimestampMs: this.txnStartTimestampMs,
      txnLastUpdateTimestampMs: this.txnLastUpdateTimestampMs,
      clientTransactionVersion: this.clientTransactionVersion,
    }
  }

  // ---- preparing changes --------------------------------------------------------------------

  /**
   * InitProducerId on an Empty or completed transaction: bump the epoch. `expectedEpoch` is
   * what a KIP-360 request says it holds: the current epoch (bump), the previous one (a
   * retry whose answer was lost: same answer again) or anything else (fenced: null).
   */
  prepareIncrementProducerEpoch(
    txnTimeoutMs: number,
    expectedEpoch: number | null,
    nowMs: number,
  ): TransactionTransit | null {
    assert(!this.isProducerEpochExhausted, 'an exhausted epoch is rotated, not bumped')
    const bumped = this.producerEpoch + 1
    let next: { epoch: number; last: number }
    if (expectedEpoch === null) next = { epoch: bumped, last: NO_PRODUCER_EPOCH }
    else if (this.producerEpoch === NO_PRODUCER_EPOCH || expectedEpoch === this.producerEpoch)
      next = { epoch: bumped, last: this.producerEpoch }
    else if (expectedEpoch === this.lastProducerEpoch)
      next = { epoch: this.producerEpoch, last: this.lastProducerEpoch }
    else return null
    return this.prepareTransition({
      state: TransactionState.Empty,
      producerEpoch: next.epoch,
      lastProducerEpoch: next.last,
      txnTimeoutMs,
      partitions: new Map(),
      txnStartTimestampMs: -1,
      txnLastUpdateTimestampMs: nowMs,
    })
  }

  /** InitProducerId when the epoch is exhausted: a new producer id at epoch 0. */
  prepareProducerIdRotation(
    newProducerId: ProducerId,
    txnTimeoutMs: number,
    nowMs: number,
    recordLastEpoch: boolean,
  ): TransactionTransit {
    return this.prepareTransition({
      state: TransactionState.Empty,
      producerId: newProducerId,
      previousProducerId: this.producerId,
      producerEpoch: 0,
      lastProducerEpoch: recordLastEpoch ? this.producerEpoch : NO_PRODUCER_EPOCH,
      txnTimeoutMs,
      partitions: new Map(),
      txnStartTimestampMs: -1,
      txnLastUpdateTimestampMs: nowMs,
    })
  }

  /**
   * The coordinator aborts an ongoing transaction (InitProducerId of a new instance, or a
   * timeout): the epoch is bumped first so the ABORT markers fence the old producer.
   */
  prepareFenceProducerEpoch(): TransactionTransit {
    assert(this.producerEpoch < EPOCH_MAX, 'no epoch left to fence with')
    const bumped = this.hasFailedEpochFence ? this.producerEpoch : this.producerEpoch + 1
    return this.prepareTransition({
      state: TransactionState.PrepareEpochFence,
      producerEpoch: bumped,
      lastProducerEpoch: NO_PRODUCER_EPOCH,
    })
  }

  prepareAddPartitions(
    added: TopicPartitions,
    nowMs: number,
    clientTransactionVersion: TransactionVersion = TV_0,
  ): TransactionTransit {
    const partitions = copyPartitions(this.partitions)
    for (const [topic, ids] of added) {
      const set = partitions.get(topic) ?? new Set<number>()
      for (const id of ids) set.add(id)
      partitions.set(topic, set)
    }
    const starts =
      this.state === TransactionState.Empty ||
      this.state === TransactionState.CompleteAbort ||
      this.state === TransactionState.CompleteCommit
    return this.prepareTransition({
      state: TransactionState.Ongoing,
      partitions,
      txnStartTimestampMs: starts ? nowMs : this.txnStartTimestampMs,
      txnLastUpdateTimestampMs: nowMs,
      clientTransactionVersion,
    })
  }

  /**
   * EndTxn (or the coordinator's abort): PrepareCommit or PrepareAbort. With transaction
   * version 2 the epoch is bumped here, so the markers are written with an epoch no write of
   * the ended transaction has: a late write of it is fenced in every partition. On the last
   * epoch `nextProducerId` is the id the producer moves to at completion (KIP-890's overflow).
   * `noPartitionAdded`: a TV2 abort with no transaction (its start time is now).
   */
  prepareAbortOrCommit(
    state: typeof TransactionState.PrepareCommit | typeof TransactionState.PrepareAbort,
    nowMs: number,
    clientTransactionVersion: TransactionVersion = TV_0,
    nextProducerId: ProducerId = NO_PRODUCER_ID,
    noPartitionAdded = false,
  ): TransactionTransit {
    const bump = supportsEpochBump(clientTransactionVersion)
    // A broken state (already at the last epoch) is let through by an abort without a bump.
    const stuck = this.producerEpoch === EPOCH_MAX && state === TransactionState.PrepareAbort
    return this.prepareTransition({
      state,
      producerEpoch: bump && !stuck ? this.producerEpoch + 1 : this.producerEpoch,
      lastProducerEpoch: bump ? this.producerEpoch : this.lastProducerEpoch,
      nextProducerId,
      txnStartTimestampMs: noPartitionAdded ? nowMs : this.txnStartTimestampMs,
      txnLastUpdateTimestampMs: nowMs,
      clientTransactionVersion,
    })
  }

  /** Every marker is written: CompleteCommit or CompleteAbort, no partitions left. */
  prepareComplete(nowMs: number): TransactionTransit {
    assert(
      this.state === TransactionState.PrepareCommit || this.state === TransactionState.PrepareAbort,
      () => `completing a transaction in state ${stateName(this.state)}`,
    )
    const state =
      this.state === TransactionState.PrepareCommit
        ? TransactionState.CompleteCommit
        : TransactionState.CompleteAbort
    this.hasFailedEpochFence = false
    // TV2 on the last epoch: the producer continues as the new id at epoch 0; the old id is
    // kept so a retried EndTxn of the old one is recognised. lastProducerEpoch stays what the
    // client saw last.
    const rotates = supportsEpochBump(this.clientTransactionVersion) && this.nextProducerId !== NO_PRODUCER_ID
    return this.prepareTransition({
      state,
      ...(rotates
        ? { producerId: this.nextProducerId, previousProducerId: this.producerId, producerEpoch: 0 }
        : {}),
      nextProducerId: NO_PRODUCER_ID,
      partitions: new Map(),
      txnLastUpdateTimestampMs: nowMs,
    })
  }

  /** transactional.id.expiration.ms passed: a tombstone removes the id. */
  prepareDead(): TransactionTransit {
    return this.prepareTransition({ state: TransactionState.Dead, partitions: new Map() })
  }

  private prepareTransition(change: Partial<TransactionTransit> & { state: TransactionState }) {
    assert(this.pendingState === null, () => `${this.transactionalId}: a transition is already pending`)
    assert(
      VALID_PREVIOUS[change.state].includes(this.state),
      () => `${this.transactionalId}: ${stateName(this.state)} cannot become ${stateName(change.state)}`,
    )
    this.pendingState = change.state
    return { ...this.snapshot(), ...change }
  }

  // ---- applying them ------------------------------------------------------------------------

  /** The prepared change is in `__transaction_state`: it becomes the state. */
  completeTransition(transit: TransactionTransit): void {
    assert(
      this.pendingState === transit.state,
      () => `${this.transactionalId}: completing an unprepared change`,
    )
    assert(
      transit.producerId !== this.producerId || transit.producerEpoch >= this.producerEpoch,
      'a producer epoch never goes back',
    )
    this.producerId = transit.producerId
    this.previousProducerId = transit.previousProducerId
    this.nextProducerId = transit.nextProducerId
    this.producerEpoch = transit.producerEpoch
    this.lastProducerEpoch = transit.lastProducerEpoch
    this.txnTimeoutMs = transit.txnTimeoutMs
    this.state = transit.state
    this.partitions = copyPartitions(transit.partitions)
    this.txnStartTimestampMs = transit.txnStartTimestampMs
    this.txnLastUpdateTimestampMs = transit.txnLastUpdateTimestampMs
    this.clientTransactionVersion = transit.clientTransactionVersion
    this.pendingState = null
  }

  /** The write failed: the change is dropped, the state stays as it was. */
  abandonTransition(): void {
    this.pendingState = null
  }
}

export function copyPartitions(partitions: TopicPartitions): Map<string, Set<number>> {
  return new Map([...partitions].map(([topic, ids]) => [topic, new Set(ids)]))
}

/** Sorted `{topic, partitions}` lists, as the log records and the answers list them. */
export function listPartitions(partitions: TopicPartitions): { topic: string; partitions: number[] }[] {
  return [...partitions]
    .filter(([, ids]) => ids.size > 0)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([topic, ids]) => ({ topic, partitions: [...ids].sort((a, b) => a - b) }))
}

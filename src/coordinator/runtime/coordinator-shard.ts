/**
 * What the runtime (coordinator-runtime.ts) asks of one shard's state machine: Kafka's
 * CoordinatorShard and CoordinatorPlayback. A shard is the state of one partition of a
 * coordinator's internal topic; the runtime rebuilds it by replaying that partition's
 * batches, then tells it when it is loaded and when it is dropped.
 */

import type { TransactionResult } from '../../common/transaction.js'
import type { Offset, ProducerId } from '../../common/types.js'

/** A batch read back from the log while loading, its records deserialized. */
export interface ReplayedBatch<R> {
  readonly baseOffset: Offset
  readonly producerId: ProducerId
  readonly producerEpoch: number
  readonly isTransactional: boolean
  /** Records the serde does not know (a newer record type) are left out, as Kafka skips them. */
  readonly records: readonly R[]
}

export interface CoordinatorShard<R> {
  /** One batch of the partition, in log order, while loading. */
  replay(batch: ReplayedBatch<R>): void
  /**
   * A producer's COMMIT or ABORT marker: replayed from the log while loading, told by the
   * broker once written afterwards (those told while loading come after onLoaded).
   */
  replayEndTransactionMarker(producerId: ProducerId, result: TransactionResult): void
  /** The whole partition is replayed: arm timers, finish what the replay left open. */
  onLoaded(): void
  /** The shard is dropped (leadership lost, load failed, shutdown): answer what still waits. */
  onUnloaded(): void
  /** Counts for the "loaded" log line, e.g. { groups: 12 }. */
  summary(): Readonly<Record<string, number>>
}

/** How a coordinator's records are stored as a record's key and value (Kafka's CoordinatorRecordSerde). */
export interface CoordinatorSerde<R> {
  serialize(record: R): { key: Buffer; value: Buffer | null }
  /** undefined for a record this coordinator does not know: it is skipped. */
  deserialize(key: Buffer, value: Buffer | null): R | undefined
}

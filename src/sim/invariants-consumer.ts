/**
 * The consumer checks (`consumers`, `transactions`): a consumer gets whole, contiguous
 * batches, each equal to the batch committed at its offset, and a broker answers a consumer
 * below its high watermark (read_committed: its last stable offset).
 */
import { wholeBatches } from './consumer.js'
import type { SimBroker } from './sim-broker.js'
import { TOPIC, Violation } from './world-view.js'

export class ConsumerInvariants {
  /** Per partition: batches a consumer received before the agreement check saw them committed. */
  private readonly consumedPending = new Map<number, Map<number, { bytes: Buffer; from: number }>>()
  consumedBatches = 0

  /** `committedAt`: the batch the agreement check saw committed at `base`, if it has. */
  constructor(private readonly committedAt: (partition: number, base: number) => Buffer | undefined) {}

  /**
   * A consumer received `batch` from broker `from`, expecting it at `position`: batches come
   * whole and contiguous, and each equals (bytes) the batch committed at its offset (if the
   * agreement check has not seen that offset committed yet, when it does).
   */
  onConsumed(
    partition: number,
    position: number,
    batch: { base: number; last: number; bytes: Buffer },
    from: number,
  ): void {
    this.consumedBatches++
    if (batch.base !== position)
      throw new Violation(
        `consumer of p${partition} at offset ${position} received a batch at ${batch.base}..${batch.last} from broker ${from}`,
      )
    const committed = this.committedAt(partition, batch.base)
    if (committed) {
      if (!committed.equals(batch.bytes))
        throw new Violation(
          `consumer of p${partition} received a batch at offset ${batch.base} from broker ${from} that differs from the one committed there`,
        )
      return
    }
    let pending = this.consumedPending.get(partition)
    if (!pending) {
      pending = new Map()
      this.consumedPending.set(partition, pending)
    }
    pending.set(batch.base, { bytes: Buffer.from(batch.bytes), from })
  }

  /** The agreement check saw `bytes` committed at `base`: a batch consumed before must equal it. */
  onCommitted(partition: number, base: number, bytes: Buffer): void {
    const pending = this.consumedPending.get(partition)
    const consumed = pending?.get(base)
    if (!pending || !consumed) return
    pending.delete(base)
    if (!consumed.bytes.equals(bytes))
      throw new Violation(
        `consumer of p${partition} received a batch at offset ${base} from broker ${consumed.from} that differs from the one committed there`,
      )
  }

  /**
   * A broker answers a consumer's fetch: no batch in it may reach the broker's high watermark
   * at the time of the answer (read_uncommitted reads committed data only), nor, for a
   * read_committed fetch, its last stable offset.
   */
  onConsumerAnswer(broker: SimBroker, partition: number, records: Buffer, readCommitted = false): void {
    const hosted = broker.replicaManager.getPartition(TOPIC, partition)
    const bound = (readCommitted ? hosted?.lastStableOffset : hosted?.highWatermark) ?? -1
    const name = readCommitted ? 'last stable offset' : 'high watermark'
    for (const batch of wholeBatches(records)) {
      if (batch.last >= bound)
        throw new Violation(
          `broker ${broker.nodeId} answered a ${readCommitted ? 'read_committed ' : ''}consumer of p${partition} with offsets ${batch.base}..${batch.last}, at or above its ${name} ${bound}${hosted?.isLeader === true ? '' : ' (not leading)'}`,
        )
    }
  }

  /** At the end: every batch a consumer received was seen committed at its offset. */
  checkConsumedCommitted(): void {
    for (const [partition, pending] of this.consumedPending) {
      for (const [base, consumed] of pending)
        throw new Violation(
          `consumer of p${partition} received a batch at offset ${base} from broker ${consumed.from} that was never seen committed`,
        )
    }
  }
}

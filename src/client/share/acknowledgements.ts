/**
 * A share consumer's acknowledgements of one share-partition (Java's Acknowledgements):
 * offset → type, turned into KIP-932's AcknowledgementBatches when sent. A batch covers
 * consecutive offsets; it carries one type when every offset has the same, else one type
 * per offset, as Java's client sends them (the broker reads a single-element list as "all
 * of the range").
 */
import { assert } from '../../common/assert.js'

/** KIP-932's acknowledge types on the wire (ShareFetch/ShareAcknowledge AcknowledgeTypes). */
export const AcknowledgeTypeCode = { GAP: 0, ACCEPT: 1, RELEASE: 2, REJECT: 3, RENEW: 4 } as const

/**
 * How the application answers a delivered record (Java's AcknowledgeType):
 * - ACCEPT: processed; never delivered again.
 * - RELEASE: give it back; it is delivered again (to any member) with a higher delivery
 *   count, or archived once `group.share.delivery.count.limit` deliveries are reached.
 * - REJECT: unprocessable; never delivered again.
 * - RENEW: still working on it; the acquisition lock starts over (KIP-1222, ShareAcknowledge
 *   v2). The record stays in flight and must still be answered with one of the others.
 */
export type AcknowledgeType = 'ACCEPT' | 'RELEASE' | 'REJECT' | 'RENEW'

/** Types on the wire: the application's four plus GAP, for offsets of an acquired range that hold no record. */
export type WireAcknowledgeType = AcknowledgeType | 'GAP'

export interface AcknowledgementBatch {
  firstOffset: bigint
  lastOffset: bigint
  acknowledgeTypes: number[]
}

/** One share-partition's acknowledgements not sent yet. */
export class Acknowledgements {
  private readonly byOffset = new Map<number, WireAcknowledgeType>()

  /** A later answer for the same offset (before it is sent) replaces the earlier one, as Java's. */
  add(offset: number, type: WireAcknowledgeType): void {
    assert(Number.isSafeInteger(offset) && offset >= 0, () => `bad offset ${offset}`)
    this.byOffset.set(offset, type)
  }

  get size(): number {
    return this.byOffset.size
  }

  get hasRenew(): boolean {
    for (const type of this.byOffset.values()) if (type === 'RENEW') return true
    return false
  }

  entries(): [number, WireAcknowledgeType][] {
    return [...this.byOffset].sort((a, b) => a[0] - b[0])
  }

  /** The wire batches, by ascending offset; consecutive offsets share a batch. */
  toBatches(): AcknowledgementBatch[] {
    const batches: AcknowledgementBatch[] = []
    let run: [number, WireAcknowledgeType][] = []
    const flush = (): void => {
      if (run.length === 0) return
      const types = run.map(([, type]) => AcknowledgeTypeCode[type])
      const uniform = types.every((t) => t === types[0])
      batches.push({
        firstOffset: BigInt(run[0][0]),
        lastOffset: BigInt(run[run.length - 1][0]),
        acknowledgeTypes: uniform ? [types[0]] : types,
      })
      run = []
    }
    for (const entry of this.entries()) {
      if (run.length > 0 && entry[0] !== run[run.length - 1][0] + 1) flush()
      run.push(entry)
    }
    flush()
    return batches
  }
}

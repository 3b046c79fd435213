/**
 * Cluster-wide unique producer ids (Kafka's ProducerIdManager with blocks from the
 * controller, KIP-730): each broker claims a block of ids by compare-and-set on one key of
 * the metadata store and hands them out locally until the block runs out. Blocks never
 * overlap, so no two producers anywhere get the same id, and a restarted broker simply
 * claims a new block (the rest of its old one is skipped, as in Kafka).
 *
 * The key holds `{"version":1,"nextBlockStart":"<int64>"}`.
 */

import { assert } from '../common/assert.js'
import { TidelogError } from '../common/errors.js'
import type { Logger } from '../common/logger.js'
import { type ProducerId, toProducerId } from '../common/types.js'
import type { MetadataStore } from './store/metadata-store.js'

export const PRODUCER_ID_BLOCK_KEY = 'producer-ids/next-block'
/** Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE. */
export const PRODUCER_ID_BLOCK_SIZE = 1000
/** Compare-and-set attempts per claim before answering "try again". */
const MAX_CLAIM_ATTEMPTS = 20
const INT64_MAX = (1n << 63n) - 1n

interface BlockValue {
  version: 1
  nextBlockStart: string
}

export interface ProducerIdManagerOptions {
  readonly store: MetadataStore
  readonly logger: Logger
  readonly blockSize?: number
}

export class ProducerIdManager {
  private nextId = 0n
  /** Exclusive end of the block being handed out; nextId === blockEnd means none left. */
  private blockEnd = 0n
  private claiming: Promise<void> | null = null
  private readonly blockSize: bigint

  constructor(private readonly options: ProducerIdManagerOptions) {
    const size = options.blockSize ?? PRODUCER_ID_BLOCK_SIZE
    assert(Number.isSafeInteger(size) && size > 0, () => `bad producer id block size ${size}`)
    this.blockSize = BigInt(size)
  }

  /** A producer id no other call anywhere in the cluster ever gets. */
  async generateProducerId(): Promise<ProducerId> {
    while (this.nextId >= this.blockEnd) {
      // Concurrent callers share one claim.
      this.claiming ??= this.claimBlock().finally(() => {
        this.claiming = null
      })
      await this.claiming
    }
    const id = this.nextId++
    assert(id < this.blockEnd, () => `producer id ${id} outside its block`)
    return toProducerId(id)
  }

  private async claimBlock(): Promise<void> {
    const { store } = this.options
    for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
      const kv = await store.get(PRODUCER_ID_BLOCK_KEY)
      const start = kv === null ? 0n : BigInt((JSON.parse(kv.value) as BlockValue).nextBlockStart)
      const end = start + this.blockSize
      if (end > INT64_MAX) throw new TidelogError('PRODUCER_IDS_EXHAUSTED', 'every producer id is taken')
      const value: BlockValue = { version: 1, nextBlockStart: end.toString() }
      const result = await store.txn(
        [{ key: PRODUCER_ID_BLOCK_KEY, version: kv?.version ?? 0 }],
        [{ type: 'put', key: PRODUCER_ID_BLOCK_KEY, value: JSON.stringify(value) }],
      )
      if (!result.succeeded) continue // another broker took this block: read again
      assert(start >= this.blockEnd, () => `block ${start} is behind this broker's previous one`)
      this.nextId = start
      this.blockEnd = end
      this.options.logger.info({ start: String(start), end: String(end) }, 'claimed a producer id block')
      return
    }
    throw new TidelogError('PRODUCER_ID_BLOCK_CONTENDED', 'could not claim a producer id block', {
      retriable: true,
    })
  }
}

/**
 * Walking a records blob batch by batch (Kafka's MemoryRecords): spans of whole batches,
 * and what follows the last one (nothing, a partial batch, or invalid bytes).
 */
import { assert } from '../common/assert.js'
import { BATCH_LENGTH_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET } from './batch-header.js'
import { BATCH_LENGTH_MIN, LEGACY_MESSAGE_OVERHEAD_V0, MAGIC_V2 } from './record-batch-format.js'

// ---- walking a records blob -----------------------------------------------------------------

/** One batch (v2) or one legacy message entry (magic 0/1): both share offset + length framing. */
export interface BatchSpan {
  at: number
  sizeInBytes: number
  magic: number
}

export type BatchesTail =
  | { kind: 'complete' }
  /** The blob ends inside an entry, as fetch responses may; sizeInBytes is -1 when unknown. */
  | { kind: 'partial'; at: number; availableBytes: number; sizeInBytes: number }
  | { kind: 'invalid'; at: number; message: string }

export interface SplitBatches {
  batches: BatchSpan[]
  /** Bytes covered by whole entries: the start of the tail. */
  validBytes: number
  tail: BatchesTail
}

export const SPAN_PARTIAL = -1
export const SPAN_INVALID = -2

/** Size of the entry at `at`, SPAN_PARTIAL if the blob ends first, SPAN_INVALID if its length is impossible. */
export function spanSize(buf: Buffer, at: number): number {
  const available = buf.length - at
  if (available < LOG_OVERHEAD) return SPAN_PARTIAL
  const length = buf.readInt32BE(at + BATCH_LENGTH_OFFSET)
  if (length < LEGACY_MESSAGE_OVERHEAD_V0) return SPAN_INVALID
  if (available <= MAGIC_OFFSET) return SPAN_PARTIAL
  if (buf[at + MAGIC_OFFSET] === MAGIC_V2 && length < BATCH_LENGTH_MIN) return SPAN_INVALID
  return available < LOG_OVERHEAD + length ? SPAN_PARTIAL : LOG_OVERHEAD + length
}

function tailAt(buf: Buffer, at: number, size: number): BatchesTail {
  if (size === SPAN_INVALID) {
    return {
      kind: 'invalid',
      at,
      message: `entry length ${buf.readInt32BE(at + BATCH_LENGTH_OFFSET)} is impossible`,
    }
  }
  const known = buf.length - at >= LOG_OVERHEAD
  const sizeInBytes = known ? LOG_OVERHEAD + buf.readInt32BE(at + BATCH_LENGTH_OFFSET) : -1
  return { kind: 'partial', at, availableBytes: buf.length - at, sizeInBytes }
}

/**
 * Walks the entries of a records blob (v2 batches, legacy messages, or both). Yields each
 * whole entry and returns how the blob ends. Checks framing only: validate each batch too.
 */
export function* iterateBatches(buf: Buffer): Generator<BatchSpan, BatchesTail, undefined> {
  let at = 0
  // Each entry takes at least LOG_OVERHEAD bytes, which bounds the loop.
  for (let steps = 0; steps <= buf.length / LOG_OVERHEAD; steps++) {
    if (at === buf.length) return { kind: 'complete' }
    const size = spanSize(buf, at)
    if (size < 0) return tailAt(buf, at, size)
    yield { at, sizeInBytes: size, magic: buf[at + MAGIC_OFFSET] }
    at += size
  }
  assert(false, 'iterateBatches made more steps than the blob has entries')
}

export function splitBatches(buf: Buffer): SplitBatches {
  const batches: BatchSpan[] = []
  const walk = iterateBatches(buf)
  let step = walk.next()
  while (step.done !== true) {
    batches.push(step.value)
    step = walk.next()
  }
  const tail = step.value
  const validBytes = tail.kind === 'complete' ? buf.length : tail.at
  return { batches, validBytes, tail }
}

/** Whether the blob starts with a legacy (magic 0/1) message; needs 17 bytes. */

/**
 * Kafka's varints and varlongs (zigzag) as JavaScript numbers, no BigInt: the sizes and
 * writers of the record encoder, on the producer's hot path, and position readers for the
 * cleaner's record framing. The protocol's Reader and Writer (primitives.ts) keep their
 * own, over their buffers and bigint varlongs.
 */
import { assert } from '../common/assert.js'

export function zigzag32(value: number): number {
  return ((value << 1) ^ (value >> 31)) >>> 0
}

// The producer's append path inlines these into large optimized functions. A branch that
// TurboFan never saw taken (a comparison chain's later arms, a loop's body, Math in a path
// not run yet) is compiled as a deoptimization, and the first record to reach it throws
// away every function that inlined it: the append path, and the caller's send loop with
// it. The record timestamp's delta grows as a batch fills (its varlong reaches 2 bytes at
// 64 ms), so its encoding shares writeUnsignedVarint with the lengths, whose loop runs
// from the first record on, and the sizes are computed without branches.

/** Bytes of a uint32 as an unsigned varint: ceil(significant bits / 7), at least 1. */
export function unsignedVarintBytes(value: number): number {
  return Math.max(1, ((38 - Math.clz32(value)) / 7) | 0)
}

export function varintBytes(value: number): number {
  return unsignedVarintBytes(zigzag32(value))
}

/** A uint32 as an unsigned varint. */
function writeUnsignedVarint(buf: Buffer, at: number, value: number): number {
  let v = value
  while (v >= 0x80) {
    buf[at++] = (v & 0x7f) | 0x80
    v >>>= 7
  }
  buf[at++] = v
  return at
}

export function writeVarint(buf: Buffer, at: number, value: number): number {
  return writeUnsignedVarint(buf, at, zigzag32(value))
}

function zigzag64(value: number): number {
  return value >= 0 ? value * 2 : -value * 2 - 1
}

export function varlongBytes(value: number): number {
  let v = zigzag64(value)
  if (v <= 0xffffffff) return unsignedVarintBytes(v)
  let bytes = 1
  while (v >= 0x80) {
    v = Math.floor(v / 0x80)
    bytes++
  }
  return bytes
}

export function writeVarlong(buf: Buffer, at: number, value: number): number {
  let v = zigzag64(value)
  if (v <= 0xffffffff) return writeUnsignedVarint(buf, at, v)
  while (v >= 0x80) {
    buf[at++] = (v % 0x80) | 0x80
    v = Math.floor(v / 0x80)
  }
  buf[at++] = v
  return at
}

// Readers of a varint at a position, for bytes already checked (a stored batch passed its
// CRC): bad framing there is a bug or disk damage, so it fails an assertion. They return
// the value and the position after it. (RecordCursor in default-record-batch.ts reads
// untrusted bytes and throws CorruptRecordError instead.)

/** Kafka's varint at `at`: [value, position after]. */
export function readVarintAt(buf: Buffer, at: number): [number, number] {
  let raw = 0
  for (let shift = 0, i = at; shift <= 28; shift += 7, i++) {
    assert(i < buf.length, 'varint runs past the records')
    const b = buf[i]
    raw = (raw | ((b & 0x7f) << shift)) >>> 0
    if ((b & 0x80) === 0) return [(raw >>> 1) ^ -(raw & 1), i + 1]
  }
  throw new Error('varint longer than 5 bytes')
}

/** Kafka's varlong at `at`, as a number: [value, position after]. */
export function readVarlongAt(buf: Buffer, at: number): [number, number] {
  let raw = 0
  let scale = 1
  for (let i = at; i < at + 10; i++) {
    assert(i < buf.length, 'varlong runs past the records')
    const b = buf[i]
    raw += (b & 0x7f) * scale
    if ((b & 0x80) === 0) return [raw % 2 === 0 ? raw / 2 : -(raw + 1) / 2, i + 1]
    scale *= 128
  }
  throw new Error('varlong longer than 10 bytes')
}

/**
 * Kafka's varints and varlongs (zigzag) as JavaScript numbers, no BigInt: the sizes and
 * writers of the record encoder, on the producer's hot path. The protocol's Reader and
 * Writer (primitives.ts) keep their own, over their buffers and bigint varlongs.
 */
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

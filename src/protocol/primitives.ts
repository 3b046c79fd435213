/**
 * Kafka's wire primitives. The Reader throws ProtocolDecodeError on any out-of-bounds or
 * malformed value, so generated decoders need no per-field error branches: the connection
 * catches the error and answers or closes that one connection.
 *
 * The Writer keeps a list of chunks: small fields go into a growing scratch buffer, large
 * byte fields (record batches) are appended as references, so a fetch response is written
 * to the socket with writev and no copy of the records.
 */
import { ProtocolDecodeError } from '../common/errors.js'

const MAX_INLINE_BYTES = 4096
const UUID_BYTES = 16

export const ZERO_UUID = 'AAAAAAAAAAAAAAAAAAAAAA'

export class Reader {
  offset: number
  readonly end: number

  constructor(
    readonly buf: Buffer,
    offset = 0,
    end = buf.length,
  ) {
    this.offset = offset
    this.end = end
  }

  get remaining(): number {
    return this.end - this.offset
  }

  private need(bytes: number): number {
    const at = this.offset
    if (bytes < 0 || at + bytes > this.end) {
      throw new ProtocolDecodeError(`need ${bytes} bytes at offset ${at}, have ${this.end - at}`)
    }
    this.offset = at + bytes
    return at
  }

  readInt8(): number {
    return this.buf.readInt8(this.need(1))
  }
  readUInt8(): number {
    return this.buf[this.need(1)]
  }
  readBoolean(): boolean {
    return this.buf[this.need(1)] !== 0
  }
  readInt16(): number {
    return this.buf.readInt16BE(this.need(2))
  }
  readUInt16(): number {
    return this.buf.readUInt16BE(this.need(2))
  }
  readInt32(): number {
    return this.buf.readInt32BE(this.need(4))
  }
  readUInt32(): number {
    return this.buf.readUInt32BE(this.need(4))
  }
  readInt64(): bigint {
    return this.buf.readBigInt64BE(this.need(8))
  }
  readFloat64(): number {
    return this.buf.readDoubleBE(this.need(8))
  }
  readUuid(): string {
    const at = this.need(UUID_BYTES)
    return this.buf.toString('base64url', at, at + UUID_BYTES)
  }

  readUnsignedVarint(): number {
    // Fast path: most lengths and tags fit one byte.
    if (this.offset < this.end && this.buf[this.offset] < 0x80) return this.buf[this.offset++]
    let value = 0
    for (let shift = 0; shift < 35; shift += 7) {
      const byte = this.buf[this.need(1)]
      value += (byte & 0x7f) * 2 ** shift
      if ((byte & 0x80) === 0) {
        if (value > 0xffffffff) throw new ProtocolDecodeError('unsigned varint exceeds 32 bits')
        return value
      }
    }
    throw new ProtocolDecodeError('unsigned varint longer than 5 bytes')
  }

  readVarint(): number {
    const raw = this.readUnsignedVarint()
    // zigzag: 0,-1,1,-2 ... computed in floating point to stay exact above 2^31
    return raw % 2 === 0 ? raw / 2 : -(raw + 1) / 2
  }

  readUnsignedVarlong(): bigint {
    let value = 0n
    for (let shift = 0n; shift < 70n; shift += 7n) {
      const byte = this.buf[this.need(1)]
      value |= BigInt(byte & 0x7f) << shift
      if ((byte & 0x80) === 0) {
        if (value > 0xffffffffffffffffn) throw new ProtocolDecodeError('varlong exceeds 64 bits')
        return value
      }
    }
    throw new ProtocolDecodeError('varlong longer than 10 bytes')
  }

  readVarlong(): bigint {
    const raw = this.readUnsignedVarlong()
    return (raw >> 1n) ^ -(raw & 1n)
  }

  readRaw(length: number): Buffer {
    const at = this.need(length)
    return this.buf.subarray(at, at + length)
  }

  // Strings: int16 length (classic) or unsigned varint length+1 (compact, flexible versions).
  readString(): string {
    const value = this.readNullableString()
    if (value === null) throw new ProtocolDecodeError('null in a non-nullable string')
    return value
  }
  readNullableString(): string | null {
    const length = this.readInt16()
    if (length === -1) return null
    if (length < 0) throw new ProtocolDecodeError(`negative string length ${length}`)
    return this.utf8(length)
  }
  readCompactString(): string {
    const value = this.readCompactNullableString()
    if (value === null) throw new ProtocolDecodeError('null in a non-nullable compact string')
    return value
  }
  readCompactNullableString(): string | null {
    const lengthPlusOne = this.readUnsignedVarint()
    if (lengthPlusOne === 0) return null
    return this.utf8(lengthPlusOne - 1)
  }
  private utf8(length: number): string {
    const at = this.need(length)
    return this.buf.toString('utf8', at, at + length)
  }

  // Bytes are returned as views into the request buffer (no copy).
  readBytes(): Buffer {
    const value = this.readNullableBytes()
    if (value === null) throw new ProtocolDecodeError('null in non-nullable bytes')
    return value
  }
  readNullableBytes(): Buffer | null {
    const length = this.readInt32()
    if (length === -1) return null
    if (length < 0) throw new ProtocolDecodeError(`negative bytes length ${length}`)
    return this.readRaw(length)
  }
  readCompactBytes(): Buffer {
    const value = this.readCompactNullableBytes()
    if (value === null) throw new ProtocolDecodeError('null in non-nullable compact bytes')
    return value
  }
  readCompactNullableBytes(): Buffer | null {
    const lengthPlusOne = this.readUnsignedVarint()
    if (lengthPlusOne === 0) return null
    return this.readRaw(lengthPlusOne - 1)
  }

  /** Array length; -1 means null. Checked against the bytes left so a hostile count cannot allocate. */
  readArrayLength(): number {
    const length = this.readInt32()
    if (length < -1) throw new ProtocolDecodeError(`negative array length ${length}`)
    if (length > this.remaining) throw new ProtocolDecodeError(`array length ${length} exceeds frame`)
    return length
  }
  readCompactArrayLength(): number {
    const length = this.readUnsignedVarint() - 1
    if (length > this.remaining) throw new ProtocolDecodeError(`array length ${length} exceeds frame`)
    return length
  }

  /** Skips one tagged field's value (unknown tag). */
  skipTaggedField(): void {
    this.need(this.readUnsignedVarint())
  }
}

export class Writer {
  private scratch: Buffer
  private pos = 0
  private start = 0
  private readonly chunks: Buffer[] = []
  private flushedBytes = 0

  constructor(initialBytes = 256) {
    this.scratch = Buffer.allocUnsafe(initialBytes)
  }

  /** Bytes written so far. */
  get length(): number {
    return this.flushedBytes + this.pos - this.start
  }

  private ensure(bytes: number): void {
    if (this.pos + bytes <= this.scratch.length) return
    this.cutScratch()
    this.scratch = Buffer.allocUnsafe(Math.max(bytes, this.scratch.length * 2, 256))
    this.pos = 0
    this.start = 0
  }

  private cutScratch(): void {
    if (this.pos > this.start) {
      this.chunks.push(this.scratch.subarray(this.start, this.pos))
      this.flushedBytes += this.pos - this.start
      this.start = this.pos
    }
  }

  writeInt8(value: number): this {
    this.ensure(1)
    this.pos = this.scratch.writeInt8(value, this.pos)
    return this
  }
  writeUInt8(value: number): this {
    this.ensure(1)
    this.scratch[this.pos++] = value
    return this
  }
  writeBoolean(value: boolean): this {
    return this.writeUInt8(value ? 1 : 0)
  }
  writeInt16(value: number): this {
    this.ensure(2)
    this.pos = this.scratch.writeInt16BE(value, this.pos)
    return this
  }
  writeUInt16(value: number): this {
    this.ensure(2)
    this.pos = this.scratch.writeUInt16BE(value, this.pos)
    return this
  }
  writeInt32(value: number): this {
    this.ensure(4)
    this.pos = this.scratch.writeInt32BE(value, this.pos)
    return this
  }
  writeUInt32(value: number): this {
    this.ensure(4)
    this.pos = this.scratch.writeUInt32BE(value, this.pos)
    return this
  }
  writeInt64(value: bigint): this {
    this.ensure(8)
    this.pos = this.scratch.writeBigInt64BE(value, this.pos)
    return this
  }
  writeFloat64(value: number): this {
    this.ensure(8)
    this.pos = this.scratch.writeDoubleBE(value, this.pos)
    return this
  }
  writeUuid(value: string): this {
    const bytes = Buffer.from(value, 'base64url')
    if (bytes.length !== UUID_BYTES) throw new TypeError(`invalid uuid ${value}`)
    return this.writeRawCopy(bytes)
  }

  writeUnsignedVarint(value: number): this {
    this.ensure(5)
    let v = value >>> 0
    while (v >= 0x80) {
      this.scratch[this.pos++] = (v & 0x7f) | 0x80
      v >>>= 7
    }
    this.scratch[this.pos++] = v
    return this
  }
  writeVarint(value: number): this {
    return this.writeUnsignedVarint(((value << 1) ^ (value >> 31)) >>> 0)
  }
  writeUnsignedVarlong(value: bigint): this {
    this.ensure(10)
    let v = BigInt.asUintN(64, value)
    while (v >= 0x80n) {
      this.scratch[this.pos++] = Number(v & 0x7fn) | 0x80
      v >>= 7n
    }
    this.scratch[this.pos++] = Number(v)
    return this
  }
  writeVarlong(value: bigint): this {
    return this.writeUnsignedVarlong(BigInt.asUintN(64, (value << 1n) ^ (value >> 63n)))
  }

  /** Copies small buffers into the scratch; appends large ones by reference (no copy). */
  writeRaw(bytes: Buffer): this {
    if (bytes.length < MAX_INLINE_BYTES) return this.writeRawCopy(bytes)
    this.cutScratch()
    this.chunks.push(bytes)
    this.flushedBytes += bytes.length
    return this
  }
  private writeRawCopy(bytes: Buffer): this {
    this.ensure(bytes.length)
    bytes.copy(this.scratch, this.pos)
    this.pos += bytes.length
    return this
  }

  writeString(value: string): this {
    const length = Buffer.byteLength(value)
    this.writeInt16(length)
    return this.writeUtf8(value, length)
  }
  writeNullableString(value: string | null): this {
    if (value === null) return this.writeInt16(-1)
    return this.writeString(value)
  }
  writeCompactString(value: string): this {
    const length = Buffer.byteLength(value)
    this.writeUnsignedVarint(length + 1)
    return this.writeUtf8(value, length)
  }
  writeCompactNullableString(value: string | null): this {
    if (value === null) return this.writeUnsignedVarint(0)
    return this.writeCompactString(value)
  }
  private writeUtf8(value: string, length: number): this {
    this.ensure(length)
    this.pos += this.scratch.write(value, this.pos, length, 'utf8')
    return this
  }

  /** A byte field may be one buffer or a list of buffers written back to back (fetch records). */
  writeBytes(value: Buffer | readonly Buffer[]): this {
    this.writeInt32(byteLength(value))
    return this.writeByteParts(value)
  }
  writeNullableBytes(value: Buffer | readonly Buffer[] | null): this {
    if (value === null) return this.writeInt32(-1)
    return this.writeBytes(value)
  }
  writeCompactBytes(value: Buffer | readonly Buffer[]): this {
    this.writeUnsignedVarint(byteLength(value) + 1)
    return this.writeByteParts(value)
  }
  writeCompactNullableBytes(value: Buffer | readonly Buffer[] | null): this {
    if (value === null) return this.writeUnsignedVarint(0)
    return this.writeCompactBytes(value)
  }
  private writeByteParts(value: Buffer | readonly Buffer[]): this {
    if (Buffer.isBuffer(value)) return this.writeRaw(value)
    for (const part of value) this.writeRaw(part)
    return this
  }

  writeArrayLength(length: number): this {
    return this.writeInt32(length)
  }
  writeCompactArrayLength(length: number): this {
    return this.writeUnsignedVarint(length + 1)
  }

  /** The written bytes as a list of chunks, for socket.writev / cork. */
  toChunks(): Buffer[] {
    this.cutScratch()
    return this.chunks
  }

  /** The written bytes as one buffer (copies when there is more than one chunk). */
  toBuffer(): Buffer {
    const chunks = this.toChunks()
    return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, this.flushedBytes)
  }
}

export function byteLength(value: Buffer | readonly Buffer[]): number {
  if (Buffer.isBuffer(value)) return value.length
  let total = 0
  for (const part of value) total += part.length
  return total
}

/** Bytes an unsigned varint takes (for precomputing sizes). */
export function unsignedVarintSize(value: number): number {
  let v = value >>> 0
  let bytes = 1
  while (v >= 0x80) {
    v >>>= 7
    bytes++
  }
  return bytes
}

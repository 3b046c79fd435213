/**
 * Splits a TCP byte stream into Kafka frames: a 4-byte big-endian size, then that many
 * bytes. A size that is negative or above `maxFrameBytes` (socket.request.max.bytes) is a
 * framing error: the caller closes the connection, as Kafka's NetworkReceive does.
 *
 * Frames are returned as views into the received chunks when a frame lies inside one
 * chunk (the common case for small requests); only frames that span chunks are copied
 * once into a buffer of exactly the frame's size.
 */
import { assert } from '../common/assert.js'
import { TidelogError } from '../common/errors.js'

const SIZE_BYTES = 4
/** FrameReader's reusable read buffer: frames that fit in it are copied out, larger ones are read in place. */
const SCRATCH_BYTES_DEFAULT = 65536

export class FrameError extends TidelogError {
  constructor(message: string) {
    super('ERR_FRAME', message)
    this.name = 'FrameError'
  }
}

export class FrameDecoder {
  private pending: Buffer[] = []
  private pendingBytes = 0
  /** Size of the frame being assembled, or -1 while its size prefix is incomplete. */
  private frameBytes = -1

  constructor(private readonly maxFrameBytes: number) {}

  /** Bytes held for an incomplete frame (for diagnostics when a peer disconnects). */
  get bufferedBytes(): number {
    return this.pendingBytes
  }

  /** Feeds a chunk; calls onFrame for every complete frame. Throws FrameError on a bad size. */
  push(chunk: Buffer, onFrame: (frame: Buffer) => void): void {
    let data = chunk
    if (this.pendingBytes > 0) {
      const completed = this.completePending(chunk)
      if (completed === null) return
      onFrame(completed.frame)
      data = completed.rest
    }
    let at = 0
    while (data.length - at >= SIZE_BYTES) {
      const size = this.checkSize(data.readInt32BE(at))
      if (data.length - at - SIZE_BYTES < size) break
      onFrame(data.subarray(at + SIZE_BYTES, at + SIZE_BYTES + size))
      at += SIZE_BYTES + size
    }
    if (at < data.length) this.keep(data.subarray(at))
  }

  private checkSize(size: number): number {
    return checkFrameSize(size, this.maxFrameBytes)
  }

  private keep(rest: Buffer): void {
    this.pending = [rest]
    this.pendingBytes = rest.length
    this.frameBytes = rest.length >= SIZE_BYTES ? this.checkSize(rest.readInt32BE(0)) : -1
  }

  /**
   * Appends the chunk to the pending bytes. Once the pending frame is whole, returns it
   * (copied once, exactly its own bytes) and the rest of the chunk as a view; else null.
   */
  private completePending(chunk: Buffer): { frame: Buffer; rest: Buffer } | null {
    const pendingBefore = this.pendingBytes
    this.pending.push(chunk)
    this.pendingBytes += chunk.length
    if (this.frameBytes < 0 && this.pendingBytes >= SIZE_BYTES) {
      const head = Buffer.concat(this.pending, SIZE_BYTES)
      this.frameBytes = this.checkSize(head.readInt32BE(0))
    }
    if (this.frameBytes < 0 || this.pendingBytes < SIZE_BYTES + this.frameBytes) return null
    const frameEnd = SIZE_BYTES + this.frameBytes
    const whole = Buffer.concat(this.pending, frameEnd)
    const rest = chunk.subarray(frameEnd - pendingBefore)
    this.pending = []
    this.pendingBytes = 0
    this.frameBytes = -1
    return { frame: whole.subarray(SIZE_BYTES), rest }
  }
}

function checkFrameSize(size: number, maxFrameBytes: number): number {
  if (size < 0) throw new FrameError(`negative frame size ${size}`)
  if (size > maxFrameBytes) {
    throw new FrameError(`frame size ${size} exceeds socket.request.max.bytes ${maxFrameBytes}`)
  }
  return size
}

/**
 * Frames of a socket read with net's `onread` option, which reads into a buffer we hand
 * out. Reads go into one reusable scratch buffer until a frame is known not to fit in it;
 * that frame gets a buffer of exactly its size and every later read of it goes straight
 * there, so the kernel's copy is its only copy. FrameDecoder (a 'data' event per 64 KiB
 * chunk, then Buffer.concat) copies a multi-megabyte fetch response twice, each into
 * freshly faulted pages.
 *
 * Frames handed to onFrame are the caller's to keep: small ones are copied out of the
 * scratch buffer (which the next read overwrites), large ones are their own buffer.
 */
export class FrameReader {
  private readonly scratch: Buffer
  /** Bytes of an incomplete frame (or size prefix) at the start of the scratch buffer. */
  private held = 0
  /** The frame being read in place, and how much of it has arrived. */
  private frame: Buffer | null = null
  private filled = 0

  constructor(
    private readonly maxFrameBytes: number,
    scratchBytes = SCRATCH_BYTES_DEFAULT,
  ) {
    assert(scratchBytes > SIZE_BYTES, () => `scratch buffer of ${scratchBytes} bytes holds no frame`)
    this.scratch = Buffer.allocUnsafe(scratchBytes)
  }

  /** Bytes held for an incomplete frame (for diagnostics when a peer disconnects). */
  get bufferedBytes(): number {
    return this.frame === null ? this.held : SIZE_BYTES + this.filled
  }

  /** Where the next read goes: never past the end of the frame being read in place. */
  nextBuffer(): Buffer {
    return this.frame === null ? this.scratch.subarray(this.held) : this.frame.subarray(this.filled)
  }

  /** `bytes` were read into the last nextBuffer(); calls onFrame for every complete frame. Throws FrameError on a bad size. */
  onRead(bytes: number, onFrame: (frame: Buffer) => void): void {
    const frame = this.frame
    if (frame !== null) {
      assert(bytes <= frame.length - this.filled, () => `read of ${bytes} bytes past the frame's end`)
      this.filled += bytes
      if (this.filled < frame.length) return
      this.frame = null
      this.filled = 0
      onFrame(frame)
      return
    }
    const scratch = this.scratch
    const end = this.held + bytes
    assert(end <= scratch.length, () => `read of ${bytes} bytes past the scratch buffer`)
    let at = 0
    while (end - at >= SIZE_BYTES) {
      const size = checkFrameSize(scratch.readInt32BE(at), this.maxFrameBytes)
      const start = at + SIZE_BYTES
      if (end - start >= size) {
        const copy = Buffer.allocUnsafe(size)
        scratch.copy(copy, 0, start, start + size)
        at = start + size
        onFrame(copy)
        continue
      }
      if (SIZE_BYTES + size <= scratch.length) break
      // Too large for the scratch buffer: what has arrived moves into the frame's own buffer.
      // Allocated whole from the size prefix, as Kafka's NetworkReceive does; uninitialised
      // memory is not touched until bytes arrive, so a peer announcing a large frame and
      // sending little costs address space, not memory (and the frame goes out only full).
      this.frame = Buffer.allocUnsafe(size)
      this.filled = scratch.copy(this.frame, 0, start, end)
      this.held = 0
      return
    }
    if (at > 0 && at < end) scratch.copyWithin(0, at, end)
    this.held = end - at
  }
}

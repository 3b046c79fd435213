/**
 * Splits a TCP byte stream into Kafka frames: a 4-byte big-endian size, then that many
 * bytes. A size that is negative or above `maxFrameBytes` (socket.request.max.bytes) is a
 * framing error: the caller closes the connection, as Kafka's NetworkReceive does.
 *
 * Frames are returned as views into the received chunks when a frame lies inside one
 * chunk (the common case for small requests); only frames that span chunks are copied
 * once into a buffer of exactly the frame's size.
 */
import { TidelogError } from '../common/errors.js'

const SIZE_BYTES = 4

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
    if (size < 0) throw new FrameError(`negative frame size ${size}`)
    if (size > this.maxFrameBytes) {
      throw new FrameError(`frame size ${size} exceeds socket.request.max.bytes ${this.maxFrameBytes}`)
    }
    return size
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

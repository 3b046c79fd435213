/**
 * The Network on TCP (node:net): what the CLI and startBroker() hand the broker. Nagle is
 * off on every socket (Kafka requests and answers are small and latency-bound).
 */
import { type AddressInfo, connect, createServer } from 'node:net'
import { assert } from '../common/assert.js'
import type { ByteStream, Network, NetworkListener } from '../common/network.js'
import { socketStream } from '../common/socket-stream.js'
import { FrameReader } from '../protocol/frame-decoder.js'

/** Node's own read size for a socket without `onread`. */
const RAW_READ_BYTES = 65536
/** A chunk read up to this size is copied out, and the read buffer kept for the next read. */
const RAW_COPY_BYTES = 16384

export const nodeNetwork: Network = {
  listen(host, port, onConnection) {
    const server = createServer({ noDelay: true }, (socket) => onConnection(socketStream(socket)))
    return new Promise<NetworkListener>((resolve, reject) => {
      server.once('error', reject)
      server.listen({ host, port, backlog: 1024 }, () => {
        server.off('error', reject)
        resolve({
          port: (server.address() as AddressInfo).port,
          close: () => new Promise<void>((done) => server.close(() => done())),
        })
      })
    })
  },
  connect(host, port) {
    return new Promise<ByteStream>((resolve, reject) => {
      const reads = new SocketReads()
      const socket = connect({
        host,
        port,
        noDelay: true,
        onread: {
          buffer: () => reads.nextBuffer(),
          // true: keep reading (false would pause the socket).
          callback: (bytes: number, buffer: Uint8Array) => {
            reads.onRead(bytes, buffer)
            return true
          },
        },
      })
      socket.once('connect', () => {
        socket.off('error', reject)
        resolve(reads.wrap(socketStream(socket)))
      })
      socket.once('error', reject)
    })
  },
}

/**
 * The reads of a socket dialled with net's `onread`, which reads into buffers handed out
 * here. Until `readFrames`, each read goes to the onData listeners as a chunk they may keep
 * (what Node does without `onread`; reads before the first listener wait, in order): a read
 * of up to RAW_COPY_BYTES is copied out and the read buffer is used again, a larger one is
 * handed on as that buffer itself and the next read gets a new one. After it, reads go into FrameReader's buffers: a fetch response of megabytes is
 * read in place instead of arriving in 64 KiB chunks that FrameDecoder then copies into
 * one buffer.
 */
class SocketReads {
  private readonly listeners: ((chunk: Buffer) => void)[] = []
  private early: Buffer[] = []
  private frames: {
    readonly reader: FrameReader
    readonly onFrame: (frame: Buffer) => void
    readonly onError: (error: unknown) => void
  } | null = null
  /** Whether the buffer of the read in progress came from the FrameReader. */
  private readingFrame = false
  /** The read buffer before readFrames, until a large chunk is handed on as a view of it. */
  private rawBuffer: Buffer | null = null
  private failed = false

  nextBuffer(): Buffer {
    this.readingFrame = this.frames !== null
    if (this.frames !== null) return this.frames.reader.nextBuffer()
    this.rawBuffer ??= Buffer.allocUnsafe(RAW_READ_BYTES)
    return this.rawBuffer
  }

  /** The onread callback: never throws (it runs inside the socket's read). */
  onRead(bytes: number, buffer: Uint8Array): void {
    if (this.failed) return
    const frames = this.frames
    if (this.readingFrame && frames !== null) {
      try {
        frames.reader.onRead(bytes, frames.onFrame)
      } catch (error) {
        this.failed = true
        frames.onError(error)
      }
      return
    }
    const chunk = this.rawChunk(bytes, buffer)
    if (frames === null) {
      if (this.listeners.length === 0) this.early.push(chunk)
      else for (const listener of this.listeners) listener(chunk)
      return
    }
    try {
      // The read was handed a chunk's buffer before readFrames: its bytes go in by copy, once.
      this.feed(chunk)
    } catch (error) {
      this.failed = true
      frames.onError(error)
    }
  }

  /** A chunk the listeners may keep: small ones copied (as Node shrinks its read buffer), large ones the buffer itself. */
  private rawChunk(bytes: number, buffer: Uint8Array): Buffer {
    const read = Buffer.from(buffer.buffer, buffer.byteOffset, bytes)
    if (bytes > RAW_COPY_BYTES) {
      this.rawBuffer = null
      return read
    }
    const copy = Buffer.allocUnsafe(bytes)
    read.copy(copy)
    return copy
  }

  private feed(bytes: Buffer): void {
    const frames = this.frames!
    let rest = bytes
    while (rest.length > 0) {
      const copied = rest.copy(frames.reader.nextBuffer())
      frames.reader.onRead(copied, frames.onFrame)
      rest = rest.subarray(copied)
    }
  }

  wrap(stream: ByteStream): ByteStream {
    return {
      ...stream,
      get writableNeedDrain() {
        return stream.writableNeedDrain
      },
      onData: (listener) => {
        assert(this.frames === null, () => 'onData on a stream that reads frames')
        this.listeners.push(listener)
        for (const chunk of this.early.splice(0)) listener(chunk)
      },
      readFrames: (maxFrameBytes, onFrame, onError) => {
        assert(
          this.frames === null && this.listeners.length === 0,
          () => 'readFrames on a stream already read',
        )
        this.frames = { reader: new FrameReader(maxFrameBytes), onFrame, onError }
        try {
          for (const chunk of this.early.splice(0)) this.feed(chunk)
        } catch (error) {
          this.failed = true
          onError(error)
        }
      },
    }
  }
}

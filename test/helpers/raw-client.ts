/**
 * A raw Kafka-protocol socket for tests: send arbitrary bytes or framed requests and read
 * framed responses, to exercise the server with input no real client would send.
 */
import { connect, type Socket } from 'node:net'
import { encodeRequestFrame } from '../../src/protocol/frame-encoder.js'
import { loadAllApiCodecs } from '../../src/protocol/generated/index.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

export class RawClient {
  private buffered = Buffer.alloc(0)
  private waiters: (() => void)[] = []
  closed = false

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, chunk])
      this.wake()
    })
    socket.on('close', () => {
      this.closed = true
      this.wake()
    })
    socket.on('error', () => {})
  }

  static connect(port: number): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port }, () => resolve(new RawClient(socket)))
      socket.once('error', reject)
    })
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter()
  }

  write(bytes: Buffer): void {
    this.socket.write(bytes)
  }

  /** Frames a request of any api key/version with header v1/v2 as the registry says. */
  static frame(apiKey: number, version: number, correlationId: number, body: unknown): Buffer {
    return Buffer.concat(encodeRequestFrame(apiKey, version, correlationId, 'raw-test', body))
  }

  /** Next response frame (without its size), or null if the server closed the socket. */
  async readFrame(timeoutMs = 5000): Promise<Buffer | null> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      if (this.buffered.length >= 4) {
        const size = this.buffered.readInt32BE(0)
        if (this.buffered.length >= 4 + size) {
          const frame = this.buffered.subarray(4, 4 + size)
          this.buffered = this.buffered.subarray(4 + size)
          return frame
        }
      }
      if (this.closed) return null
      const left = deadline - Date.now()
      if (left <= 0) throw new Error('timed out waiting for a response frame')
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
  }

  /** Resolves true once the server has closed the connection (within the timeout). */
  async waitClosed(timeoutMs = 5000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs
    while (!this.closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, deadline - Date.now())
        this.waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
    return this.closed
  }

  close(): void {
    this.socket.destroy()
  }
}

/**
 * A connected Node socket (node:net or node:tls) as a ByteStream: the broker's TCP network
 * (runtime/node-network.ts) and the client's default connector (client/tcp-connector.ts)
 * both wrap their sockets here. The socket is described by the few members used, so this
 * layer names no Node module: the real parts pass their sockets in.
 */
import type { ByteStream } from './network.js'

/** What a ByteStream needs of a socket; node:net's Socket and node:tls's TLSSocket have it. */
export interface ConnectedSocket {
  readonly remoteAddress?: string
  readonly remotePort?: number
  readonly localAddress?: string
  readonly localPort?: number
  readonly writableNeedDrain: boolean
  /** True once 'close' has been emitted. */
  readonly closed: boolean
  setNoDelay(noDelay?: boolean): unknown
  write(chunk: Buffer, callback?: (error?: Error | null) => void): boolean
  cork(): void
  uncork(): void
  pause(): unknown
  resume(): unknown
  destroy(): unknown
  on(event: 'data', listener: (chunk: Buffer) => void): unknown
  on(event: 'drain', listener: () => void): unknown
  on(event: 'error', listener: (error: Error) => void): unknown
  once(event: 'close', listener: () => void): unknown
}

/** The socket as a ByteStream, Nagle off (Kafka requests and answers are small and latency-bound). */
export function socketStream(socket: ConnectedSocket): ByteStream {
  socket.setNoDelay(true)
  let closeError: Error | null = null
  // Without a listener an 'error' would be thrown; the close that follows reports it.
  socket.on('error', (error) => {
    closeError = error
  })
  return {
    remoteAddress: `${socket.remoteAddress}:${socket.remotePort}`,
    localAddress: `${socket.localAddress}:${socket.localPort}`,
    write(chunks, onWritten) {
      // The last chunk's callback runs once libuv has written every chunk before it too.
      const done =
        onWritten === undefined
          ? undefined
          : (error?: Error | null) => {
              if (!error) onWritten()
            }
      if (chunks.length === 1) {
        socket.write(chunks[0], done)
        return
      }
      socket.cork()
      const last = chunks.length - 1
      for (let i = 0; i < last; i++) socket.write(chunks[i])
      socket.write(chunks[last], done)
      socket.uncork()
    },
    get writableNeedDrain() {
      return socket.writableNeedDrain
    },
    pause: () => socket.pause(),
    resume: () => socket.resume(),
    onData: (listener) => socket.on('data', listener),
    onDrain: (listener) => socket.on('drain', listener),
    onClose: (listener) => {
      // A socket dialled with `onread` reads from the start: its close can come before this.
      if (socket.closed) queueMicrotask(() => listener(closeError))
      else socket.once('close', () => listener(closeError))
    },
    destroy: () => socket.destroy(),
  }
}

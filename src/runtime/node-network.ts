/**
 * The Network on TCP (node:net): what the CLI and startBroker() hand the broker. Nagle is
 * off on every socket (Kafka requests and answers are small and latency-bound).
 */
import { type AddressInfo, connect, createServer, type Socket } from 'node:net'
import type { ByteStream, Network, NetworkListener } from '../common/network.js'

/** A socket as a ByteStream. */
export function socketStream(socket: Socket): ByteStream {
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
    onClose: (listener) => socket.once('close', () => listener(closeError)),
    destroy: () => socket.destroy(),
  }
}

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
      const socket = connect({ host, port, noDelay: true })
      socket.once('connect', () => {
        socket.off('error', reject)
        resolve(socketStream(socket))
      })
      socket.once('error', reject)
    })
  },
}

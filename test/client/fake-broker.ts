/**
 * A stand-in broker that serves only ApiVersions and Metadata, for the paths a real
 * tidelog broker no longer takes (e.g. a broker without the consumer-group APIs): the
 * client must say "not supported" instead of failing obscurely.
 */
import { createServer, type Server, type Socket } from 'node:net'
import { FrameDecoder } from '../../src/protocol/frame-decoder.js'
import { encodeResponseFrame } from '../../src/protocol/frame-encoder.js'
import { ApiKey, apis, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { decodeRequestHeader } from '../../src/protocol/generated/request-header.js'
import { Reader } from '../../src/protocol/primitives.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

export interface FakeBroker {
  readonly bootstrap: string
  close(): Promise<void>
}

export async function startFakeBroker(): Promise<FakeBroker> {
  const sockets = new Set<Socket>()
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => socket.destroy())
    const decoder = new FrameDecoder(1 << 20)
    socket.on('data', (chunk: Buffer) => decoder.push(chunk, (frame) => answer(socket, frame, port)))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : 0
  return {
    bootstrap: `127.0.0.1:${port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

function answer(socket: Socket, frame: Buffer, port: number): void {
  const apiKey = frame.readInt16BE(0)
  const version = frame.readInt16BE(2)
  const api = apis.get(apiKey)!
  const header = decodeRequestHeader(new Reader(frame), api.requestHeaderVersion(version))
  const body =
    apiKey === ApiKey.ApiVersions
      ? {
          ...(api.defaultResponse() as object),
          errorCode: 0,
          apiKeys: [
            { apiKey: ApiKey.ApiVersions, minVersion: 0, maxVersion: 3 },
            { apiKey: ApiKey.Metadata, minVersion: 1, maxVersion: 12 },
          ],
        }
      : {
          ...(api.defaultResponse() as object),
          brokers: [{ nodeId: 0, host: '127.0.0.1', port, rack: null }],
          clusterId: 'fake',
          controllerId: 0,
          topics: [],
        }
  socket.write(Buffer.concat(encodeResponseFrame(apiKey, version, header.correlationId, body)))
}

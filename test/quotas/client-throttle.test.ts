/**
 * KIP-219's client side, against a stand-in broker that throttles every Metadata answer by
 * 400 ms but never mutes: tidelog's connection must hold its next request itself, and
 * report each throttle time. The handshake's ApiVersions throttle is reported but not waited
 * for: the client honours the APIs of its CLIENT_THROTTLES_FROM table only.
 */
import assert from 'node:assert/strict'
import { createServer, type Server, type Socket } from 'node:net'
import { test } from 'node:test'
import { BrokerConnection } from '../../src/client/connection.js'
import { tcpConnector } from '../../src/client/tcp-connector.js'
import { systemClock } from '../../src/common/clock.js'
import { FrameDecoder } from '../../src/protocol/frame-decoder.js'
import { encodeResponseFrame } from '../../src/protocol/frame-encoder.js'
import { ApiKey, apis, decodeRequestHeader, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { Reader } from '../../src/protocol/primitives.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

const THROTTLE_MS = 400

test("tidelog's connection waits out a KIP-219 throttle time before its next request", async () => {
  const arrivalsMs: { apiKey: number; atMs: number }[] = []
  const sockets = new Set<Socket>()
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    const decoder = new FrameDecoder(1 << 20)
    socket.on('data', (chunk: Buffer) =>
      decoder.push(chunk, (frame) => {
        const apiKey = frame.readInt16BE(0)
        const version = frame.readInt16BE(2)
        arrivalsMs.push({ apiKey, atMs: performance.now() })
        const api = apis.get(apiKey)!
        const header = decodeRequestHeader(new Reader(frame), api.requestHeaderVersion(version))
        const body =
          apiKey === ApiKey.ApiVersions
            ? {
                ...(api.defaultResponse() as object),
                errorCode: 0,
                throttleTimeMs: THROTTLE_MS,
                apiKeys: [
                  { apiKey: ApiKey.ApiVersions, minVersion: 0, maxVersion: 3 },
                  { apiKey: ApiKey.Metadata, minVersion: 1, maxVersion: 12 },
                ],
              }
            : {
                ...(api.defaultResponse() as object),
                throttleTimeMs: THROTTLE_MS,
                clusterId: 'fake',
                controllerId: 0,
              }
        socket.write(Buffer.concat(encodeResponseFrame(apiKey, version, header.correlationId, body)))
      }),
    )
    socket.on('error', () => socket.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  const throttles: [number, number][] = []
  const connection = await BrokerConnection.open({
    host: '127.0.0.1',
    port,
    clientId: 'throttle-test',
    connectTimeoutMs: 5000,
    requestTimeoutMs: 5000,
    clock: systemClock,
    label: 'fake',
    connector: tcpConnector,
    onThrottle: (apiKey, throttleTimeMs) => throttles.push([apiKey, throttleTimeMs]),
  })
  try {
    const body = {
      ...(apis.get(ApiKey.Metadata)!.defaultRequest() as object),
      topics: [],
      allowAutoTopicCreation: false,
    }
    // The handshake's ApiVersions was answered with a throttle: reported, not waited for.
    const firstSentMs = performance.now()
    await connection.request(ApiKey.Metadata, body)
    assert.ok(performance.now() - firstSentMs < THROTTLE_MS, 'no wait after the ApiVersions throttle')
    const answeredMs = performance.now()
    await connection.request(ApiKey.Metadata, body)
    const metadataArrivals = arrivalsMs.filter((a) => a.apiKey === ApiKey.Metadata)
    assert.equal(metadataArrivals.length, 2)
    assert.ok(
      metadataArrivals[1].atMs - answeredMs >= THROTTLE_MS - 20,
      `second Metadata reached the broker ${Math.round(metadataArrivals[1].atMs - answeredMs)} ms after the throttled answer`,
    )
    assert.deepEqual(throttles, [
      [ApiKey.ApiVersions, THROTTLE_MS],
      [ApiKey.Metadata, THROTTLE_MS],
      [ApiKey.Metadata, THROTTLE_MS],
    ])
  } finally {
    connection.close()
    for (const socket of sockets) socket.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
})

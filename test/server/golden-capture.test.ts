/**
 * Golden bytes from real clients: a recording proxy sits between kcat (librdkafka 2.0.2) /
 * kafkajs and the broker and keeps every request frame the client sent. Each one must
 * decode with our codecs with no byte left over and encode back to exactly the same bytes.
 */
import assert from 'node:assert/strict'
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { apis, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { decodeRequestHeader, encodeRequestHeader } from '../../src/protocol/generated/request-header.js'
import { Reader, Writer } from '../../src/protocol/primitives.js'
import { run, withBroker } from '../helpers/cluster.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

interface Recorder {
  port: number
  frames: Buffer[]
  close(): Promise<void>
}

/** A TCP proxy to `targetPort` that records the client's frames. */
function recordingProxy(targetPort: number): Promise<Recorder> {
  const frames: Buffer[] = []
  const sockets = new Set<Socket>()
  const server: Server = createServer((client) => {
    sockets.add(client)
    client.on('close', () => sockets.delete(client))
    const upstream = connect({ host: '127.0.0.1', port: targetPort })
    let pending = Buffer.alloc(0)
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk)
      pending = Buffer.concat([pending, chunk])
      while (pending.length >= 4 && pending.length >= 4 + pending.readInt32BE(0)) {
        const size = pending.readInt32BE(0)
        frames.push(Buffer.from(pending.subarray(4, 4 + size)))
        pending = pending.subarray(4 + size)
      }
    })
    upstream.on('data', (chunk: Buffer) => client.write(chunk))
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
    client.on('error', () => upstream.destroy())
    upstream.on('error', () => client.destroy())
  })
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      resolve({
        port: (server.address() as AddressInfo).port,
        frames,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done())
            for (const socket of sockets) socket.destroy()
          }),
      })
    })
  })
}

/** Decodes one request frame and re-encodes it; returns the api key and version. */
function roundTrip(frame: Buffer): string {
  const apiKey = frame.readInt16BE(0)
  const version = frame.readInt16BE(2)
  const api = apis.get(apiKey)
  assert.ok(api, `unknown api key ${apiKey}`)
  const reader = new Reader(frame)
  const headerVersion = api.requestHeaderVersion(version)
  const header = decodeRequestHeader(reader, headerVersion)
  const body = api.decodeRequest(reader, version)
  assert.equal(reader.remaining, 0, `${api.name} v${version}: ${reader.remaining} bytes left over`)
  const writer = new Writer()
  encodeRequestHeader(writer, headerVersion, header)
  api.encodeRequest(writer, version, body)
  assert.deepEqual(writer.toBuffer(), frame, `${api.name} v${version} re-encodes differently`)
  return `${api.name} v${version}`
}

async function captured(clientRun: (bootstrap: string) => Promise<void>): Promise<string[]> {
  return withBroker(
    async (cluster) => {
      const proxy = await recordingProxy(cluster.brokers[0].port)
      try {
        await clientRun(`127.0.0.1:${proxy.port}`)
      } finally {
        await proxy.close()
      }
      assert.ok(proxy.frames.length > 0, 'the client sent requests through the proxy')
      return proxy.frames.map(roundTrip)
    },
    { properties: { 'num.partitions': 2 } },
  )
}

test('kcat (librdkafka 2.0.2) requests decode and re-encode byte for byte', async () => {
  const seen = await captured(async (bootstrap) => {
    // Only the bootstrap connection goes through the proxy; that covers ApiVersions v3
    // (flexible) and Metadata, and produce/fetch when the broker answers with itself.
    const produced = await run('kcat', ['-b', bootstrap, '-P', '-t', 'golden', '-K:', '-z', 'gzip'], {
      input: 'a:one\nb:two\n',
    })
    assert.equal(produced.code, 0, produced.stderr)
    const listed = await run('kcat', ['-b', bootstrap, '-L'])
    assert.equal(listed.code, 0, listed.stderr)
  })
  assert.ok(seen.includes('ApiVersions v3'), `saw ${seen.join(', ')}`)
  assert.ok(
    seen.some((s) => s.startsWith('Metadata')),
    `saw ${seen.join(', ')}`,
  )
})

test('kafkajs requests decode and re-encode byte for byte', async () => {
  const seen = await captured(async (bootstrap) => {
    const kafka = new Kafka({ brokers: [bootstrap], logLevel: logLevel.NOTHING })
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({ topics: [{ topic: 'golden-js', numPartitions: 2 }] })
    await admin.fetchTopicMetadata({ topics: ['golden-js'] })
    await admin.disconnect()
  })
  // Later admin requests go to the controller's advertised address, past the proxy.
  assert.ok(seen.includes('ApiVersions v2'), `saw ${seen.join(', ')}`)
  assert.ok(seen.includes('Metadata v6'), `saw ${seen.join(', ')}`)
})

/**
 * Bad input from the network closes only the offending connection (or gets Kafka's error
 * answer where Kafka gives one) and the broker keeps serving everyone else.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { decodeApiVersionsResponse } from '../../src/protocol/generated/api-versions-response.js'
import { ApiKey, apis, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { decodeMetadataResponse } from '../../src/protocol/generated/metadata-response.js'
import { Reader } from '../../src/protocol/primitives.js'
import type { Cluster } from '../../src/server/cluster.js'
import { startBroker } from '../helpers/cluster.js'
import { RawClient } from '../helpers/raw-client.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

const MAX_REQUEST_BYTES = 1024 * 1024

describe('bad input', () => {
  let cluster: Cluster
  let port: number

  before(async () => {
    cluster = await startBroker({ properties: { 'socket.request.max.bytes': MAX_REQUEST_BYTES } })
    port = cluster.brokers[0].port
  })
  after(() => cluster.stop())

  async function assertServing(): Promise<void> {
    const client = await RawClient.connect(port)
    try {
      client.write(RawClient.frame(ApiKey.ApiVersions, 3, 7, apis.get(ApiKey.ApiVersions)!.defaultRequest()))
      const frame = await client.readFrame()
      assert.ok(frame, 'a healthy client still gets answers')
      const r = new Reader(frame)
      assert.equal(r.readInt32(), 7)
      assert.equal(decodeApiVersionsResponse(r, 3).errorCode, ErrorCode.NONE)
    } finally {
      client.close()
    }
  }

  async function assertClosedBy(bytes: Buffer): Promise<void> {
    const client = await RawClient.connect(port)
    client.write(bytes)
    assert.equal(await client.waitClosed(), true, 'server closes the connection')
    await assertServing()
  }

  function sizePrefix(size: number): Buffer {
    const b = Buffer.alloc(4)
    b.writeInt32BE(size)
    return b
  }

  test('a frame size above socket.request.max.bytes closes the connection', async () => {
    await assertClosedBy(sizePrefix(MAX_REQUEST_BYTES + 1))
  })

  test('a negative frame size closes the connection', async () => {
    await assertClosedBy(sizePrefix(-5))
  })

  test('a frame too short for a header closes the connection', async () => {
    await assertClosedBy(Buffer.concat([sizePrefix(3), Buffer.from([0, 18, 0])]))
  })

  test('an unknown api key closes the connection', async () => {
    const frame = RawClient.frame(ApiKey.ApiVersions, 0, 1, {})
    frame.writeInt16BE(999, 4)
    await assertClosedBy(frame)
  })

  test('an unsupported version of a served api closes the connection', async () => {
    const frame = RawClient.frame(ApiKey.Metadata, 1, 1, apis.get(ApiKey.Metadata)!.defaultRequest())
    frame.writeInt16BE(99, 6)
    await assertClosedBy(frame)
  })

  test('a body that does not parse closes the connection', async () => {
    // Metadata v1: header, then a topic array claiming a million entries that are not there.
    const frame = RawClient.frame(ApiKey.Metadata, 1, 1, {
      ...(apis.get(ApiKey.Metadata)!.defaultRequest() as object),
      topics: [],
    })
    const withCount = Buffer.concat([frame.subarray(0, frame.length - 4), Buffer.from([0, 0x0f, 0x42, 0x40])])
    await assertClosedBy(withCount)
  })

  test('garbage bytes close the connection', async () => {
    await assertClosedBy(Buffer.from('GET / HTTP/1.1\r\nHost: localhost\r\n\r\n'))
  })

  test('a client that disconnects mid-frame does not disturb the broker', async () => {
    const client = await RawClient.connect(port)
    client.write(Buffer.concat([sizePrefix(100), Buffer.alloc(10)]))
    client.close()
    await assertServing()
  })

  test('ApiVersions of an unknown version gets the v0-shaped UNSUPPORTED_VERSION answer', async () => {
    const client = await RawClient.connect(port)
    try {
      const frame = RawClient.frame(ApiKey.ApiVersions, 3, 42, apis.get(ApiKey.ApiVersions)!.defaultRequest())
      frame.writeInt16BE(77, 6)
      client.write(frame)
      const response = await client.readFrame()
      assert.ok(response)
      const r = new Reader(response)
      assert.equal(r.readInt32(), 42, 'response header v0 with the correlation id')
      const body = decodeApiVersionsResponse(r, 0)
      assert.equal(body.errorCode, ErrorCode.UNSUPPORTED_VERSION)
      assert.deepEqual(
        body.apiKeys.map((k) => [k.apiKey, k.minVersion, k.maxVersion]),
        [[ApiKey.ApiVersions, 0, 5]],
      )
      assert.equal(r.remaining, 0)
    } finally {
      client.close()
    }
  })

  test('pipelined requests are answered in request order', async () => {
    const client = await RawClient.connect(port)
    try {
      const metadata = apis.get(ApiKey.Metadata)!.defaultRequest() as object
      const versions = apis.get(ApiKey.ApiVersions)!.defaultRequest()
      client.write(
        Buffer.concat([
          RawClient.frame(ApiKey.Metadata, 9, 1, { ...metadata, topics: null }),
          RawClient.frame(ApiKey.ApiVersions, 0, 2, versions),
          RawClient.frame(ApiKey.Metadata, 1, 3, { ...metadata, topics: null }),
        ]),
      )
      const ids: number[] = []
      for (let i = 0; i < 3; i++) {
        const frame = await client.readFrame()
        assert.ok(frame)
        ids.push(frame.readInt32BE(0))
      }
      assert.deepEqual(ids, [1, 2, 3])
    } finally {
      client.close()
    }
  })

  test('metadata v1 answers with the broker and the controller', async () => {
    const client = await RawClient.connect(port)
    try {
      client.write(
        RawClient.frame(ApiKey.Metadata, 1, 5, {
          ...(apis.get(ApiKey.Metadata)!.defaultRequest() as object),
          topics: [],
        }),
      )
      const frame = await client.readFrame()
      assert.ok(frame)
      const r = new Reader(frame)
      assert.equal(r.readInt32(), 5)
      const body = decodeMetadataResponse(r, 1)
      assert.equal(body.brokers.length, 1)
      assert.equal(body.brokers[0].port, port)
      assert.equal(body.controllerId, 0)
      assert.deepEqual(body.topics, [])
    } finally {
      client.close()
    }
  })

  test('fuzz: random and mutated frames never take the broker down', async () => {
    const served = [...apis.values()].filter((a) =>
      cluster.brokers[0].apiVersionRanges().some((range) => range.apiKey === a.apiKey),
    )
    const validFrames = served.flatMap((api) => {
      const frames: Buffer[] = []
      for (let v = api.minVersion; v <= api.maxVersion; v++) {
        try {
          frames.push(RawClient.frame(api.apiKey, v, v, api.defaultRequest()))
        } catch {
          // a default request may be unencodable at some version; skip that one
        }
      }
      return frames
    })
    const mutated = fc
      .tuple(
        fc.constantFrom(...validFrames),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 6 }),
      )
      .map(([frame, flips]) => {
        const copy = Buffer.from(frame)
        for (const [at, byte] of flips) copy[4 + (at % Math.max(1, copy.length - 4))] = byte
        return copy
      })
    const random = fc.uint8Array({ minLength: 0, maxLength: 300 }).map((bytes) => Buffer.from(bytes))
    const truncated = fc.tuple(fc.constantFrom(...validFrames), fc.nat()).map(([frame, cut]) => {
      const body = frame.subarray(4, 4 + (cut % (frame.length - 4)))
      return Buffer.concat([sizePrefix(body.length), body])
    })
    await fc.assert(
      fc.asyncProperty(fc.oneof(mutated, random, truncated), async (bytes) => {
        const client = await RawClient.connect(port)
        client.write(bytes)
        // Either answers or closes; we only need the broker to stay alive and serving.
        await Promise.race([client.readFrame(300).catch(() => null), client.waitClosed(300)])
        client.close()
      }),
      { numRuns: 300, seed: 20261130 },
    )
    await assertServing()
  })
})

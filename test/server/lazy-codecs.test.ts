/**
 * Only the hot APIs' codecs load with the registry; the others load on first use (the
 * broker's start-up compiles less, docs/notes/startup.md). This file must not load them all, so
 * it builds its frames by hand instead of using test/helpers/raw-client.ts.
 */
import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { InvariantError } from '../../src/common/assert.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { decodeApiVersionsResponse } from '../../src/protocol/generated/api-versions-response.js'
import { ApiKey, apiCodec, apis, loadApiCodec } from '../../src/protocol/generated/index.js'
import { Reader } from '../../src/protocol/primitives.js'
import type { Cluster } from '../../src/server/cluster.js'
import { startBroker } from '../helpers/cluster.js'

/** A v0 request with an empty body (ApiVersions v0 and ListGroups v0 have no fields). */
function emptyRequest(apiKey: number, correlationId: number): Buffer {
  const clientId = Buffer.from('lazy-codecs')
  const frame = Buffer.alloc(4 + 10 + clientId.length)
  frame.writeInt32BE(frame.length - 4, 0)
  frame.writeInt16BE(apiKey, 4)
  frame.writeInt16BE(0, 6)
  frame.writeInt32BE(correlationId, 8)
  frame.writeInt16BE(clientId.length, 12)
  clientId.copy(frame, 14)
  return frame
}

/** Writes the frames in one write and reads `count` response frames. */
function exchange(port: number, frames: readonly Buffer[], count: number): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const responses: Buffer[] = []
    let pending = Buffer.alloc(0)
    socket.on('error', reject)
    socket.on('close', () => reject(new Error(`closed after ${responses.length} of ${count} responses`)))
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk])
      while (pending.length >= 4 && pending.length >= 4 + pending.readInt32BE(0)) {
        responses.push(pending.subarray(4, 4 + pending.readInt32BE(0)))
        pending = pending.subarray(4 + pending.readInt32BE(0))
      }
      if (responses.length === count) {
        socket.removeAllListeners('close')
        socket.destroy()
        resolve(responses)
      }
    })
    socket.write(Buffer.concat(frames))
  })
}

describe('codecs loaded on first use', () => {
  let cluster: Cluster
  let port: number

  before(async () => {
    cluster = await startBroker()
    port = cluster.brokers[0].port
  })
  after(() => cluster.stop())

  test('the hot APIs are loaded with the registry, the others are not', () => {
    for (const apiKey of [ApiKey.ApiVersions, ApiKey.Metadata, ApiKey.Produce, ApiKey.Fetch]) {
      assert.ok(apiCodec(apiKey), `api key ${apiKey} is loaded`)
    }
    assert.equal(apiCodec(ApiKey.ListGroups), undefined)
    assert.throws(() => apis.get(ApiKey.ListGroups)!.defaultRequest(), InvariantError)
  })

  test('loadApiCodec loads once and the descriptor then works', async () => {
    const first = loadApiCodec(ApiKey.DescribeAcls)
    assert.equal(loadApiCodec(ApiKey.DescribeAcls), first, 'a second caller shares the load')
    const codec = await first
    assert.equal(apiCodec(ApiKey.DescribeAcls), codec)
    assert.deepEqual(apis.get(ApiKey.DescribeAcls)!.defaultRequest(), codec.defaultRequest())
  })

  test("an API's first request waits for its codec and requests stay in order", async () => {
    assert.equal(apiCodec(ApiKey.ListGroups), undefined, 'nothing in this process loaded it yet')
    const [versions, groups, versionsAgain] = await exchange(
      port,
      [
        emptyRequest(ApiKey.ApiVersions, 1),
        emptyRequest(ApiKey.ListGroups, 2),
        emptyRequest(ApiKey.ApiVersions, 3),
      ],
      3,
    )
    const versionsReader = new Reader(versions)
    assert.equal(versionsReader.readInt32(), 1)
    const advertised = decodeApiVersionsResponse(versionsReader, 0)
    assert.equal(advertised.errorCode, ErrorCode.NONE)
    const describeGroups = advertised.apiKeys.find((k) => k.apiKey === ApiKey.DescribeGroups)
    assert.ok(describeGroups, 'ApiVersions advertises APIs whose codecs are not loaded')
    assert.ok(describeGroups.maxVersion <= apis.get(ApiKey.DescribeGroups)!.maxVersion)
    assert.equal(apiCodec(ApiKey.DescribeGroups), undefined, 'advertising loads no codec')

    const groupsReader = new Reader(groups)
    assert.equal(groupsReader.readInt32(), 2)
    assert.equal(groupsReader.readInt16(), ErrorCode.NONE, 'ListGroups v0 answered')
    assert.equal(new Reader(versionsAgain).readInt32(), 3)
    assert.ok(apiCodec(ApiKey.ListGroups), 'the first ListGroups loaded its codec')
  })
})

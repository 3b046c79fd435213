import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { FrameDecoder } from '../../src/protocol/frame-decoder.js'
import { encodeRequestFrame, encodeResponseFrame } from '../../src/protocol/frame-encoder.js'
import {
  ApiKey,
  apis,
  decodeRequestHeader,
  decodeResponseHeader,
  defaultMetadataRequest,
  loadAllApiCodecs,
} from '../../src/protocol/generated/all.js'
import { Reader } from '../../src/protocol/primitives.js'

before(() => loadAllApiCodecs())

/** The frames a decoder finds in the bytes, each checked to end where the next begins. */
function decodeFrames(bytes: Buffer): Buffer[] {
  const frames: Buffer[] = []
  new FrameDecoder(1 << 20).push(bytes, (frame) => frames.push(Buffer.from(frame)))
  return frames
}

test('a request frame carries its size, the header version its api asks for, and the body', () => {
  // Metadata v9 is flexible (header v2, tagged fields); v4 is not (header v1).
  for (const version of [4, 9, 12]) {
    const body = { ...defaultMetadataRequest(), topics: null }
    const chunks = encodeRequestFrame(ApiKey.Metadata, version, 77, 'frame-test', body)
    const bytes = Buffer.concat(chunks)
    assert.equal(bytes.readInt32BE(0), bytes.length - 4, 'size prefix')
    const [frame, ...rest] = decodeFrames(bytes)
    assert.equal(rest.length, 0)
    const reader = new Reader(frame)
    const api = apis.get(ApiKey.Metadata)!
    const header = decodeRequestHeader(reader, api.requestHeaderVersion(version))
    assert.deepEqual(
      [header.requestApiKey, header.requestApiVersion, header.correlationId, header.clientId],
      [ApiKey.Metadata, version, 77, 'frame-test'],
    )
    const decoded = api.decodeRequest(reader, version) as { topics: unknown }
    assert.equal(decoded.topics, null)
    assert.equal(reader.remaining, 0, `v${version}: bytes left after the body`)
  }
})

test('a response frame round-trips through the decoder, header v0 and v1', () => {
  const api = apis.get(ApiKey.ApiVersions)!
  // ApiVersions answers always use header v0 (KIP-511); Metadata v9+ uses v1.
  const cases: [number, number, unknown][] = [
    [ApiKey.ApiVersions, 3, { ...(api.defaultResponse() as object), errorCode: 35 }],
    [ApiKey.Metadata, 12, apis.get(ApiKey.Metadata)!.defaultResponse()],
  ]
  for (const [apiKey, version, body] of cases) {
    const frames = decodeFrames(Buffer.concat(encodeResponseFrame(apiKey, version, 5, body)))
    assert.equal(frames.length, 1)
    const reader = new Reader(frames[0])
    const descriptor = apis.get(apiKey)!
    assert.equal(decodeResponseHeader(reader, descriptor.responseHeaderVersion(version)).correlationId, 5)
    assert.deepEqual(descriptor.decodeResponse(reader, version), body)
    assert.equal(reader.remaining, 0)
  }
})

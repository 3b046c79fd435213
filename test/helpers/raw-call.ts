/**
 * One request/response round trip on a RawClient, decoded with the generated codecs: for
 * tests that send what no real client would (bad CRCs, partitions that do not exist).
 */
import { apis, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { decodeResponseHeader } from '../../src/protocol/generated/response-header.js'
import { Reader } from '../../src/protocol/primitives.js'
import { RawClient } from './raw-client.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

let nextCorrelationId = 1000

/** Sends `body` as apiKey/version and returns the decoded response body. */
export async function rawCall<T>(
  client: RawClient,
  apiKey: number,
  version: number,
  body: unknown,
  timeoutMs = 5000,
): Promise<T> {
  const api = apis.get(apiKey)!
  const correlationId = nextCorrelationId++
  client.write(
    RawClient.frame(apiKey, version, correlationId, {
      ...(api.defaultRequest() as object),
      ...(body as object),
    }),
  )
  const frame = await client.readFrame(timeoutMs)
  if (frame === null) throw new Error(`connection closed instead of answering ${api.name} v${version}`)
  const r = new Reader(frame)
  const header = decodeResponseHeader(r, api.responseHeaderVersion(version))
  if (header.correlationId !== correlationId)
    throw new Error(`correlation id ${header.correlationId} != ${correlationId}`)
  return api.decodeResponse(r, version) as T
}

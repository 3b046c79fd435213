/**
 * Writes Kafka frames: a 4-byte big-endian size, the request or response header, the body.
 * The other half of frame-decoder.ts, and the one place a frame is put together: the broker's
 * answers, every client's requests (tidelog's client, broker-to-broker, SASL on the
 * inter-broker listener) and the tests' fake peers all come through here.
 *
 * The frame is returned as the Writer's chunks (a large record set stays the buffer it was
 * handed, not copied into one frame buffer); a stream writes them back to back.
 */
import { apis } from './generated/index.js'
import { encodeRequestHeader } from './generated/request-header.js'
import { encodeResponseHeader } from './generated/response-header.js'
import { Writer } from './primitives.js'

const SIZE_BYTES = 4

/**
 * A response body may carry its own encoder under this key: the Metadata handler's, which
 * copies the cached bytes of topics that did not change instead of encoding every
 * partition again. It must write exactly what the API's codec writes for the same body (a
 * test compares them, version by version). A spread copy of the body keeps it, so a copy
 * with another throttle time is encoded the same way.
 */
export const ENCODE_RESPONSE = Symbol('tidelog.encodeResponse')

export type ResponseEncoder = (w: Writer, version: number, body: unknown) => void

/** A request frame; the header version (v1 or v2, with tagged fields) follows the api's registry entry. */
export function encodeRequestFrame(
  apiKey: number,
  apiVersion: number,
  correlationId: number,
  clientId: string | null,
  body: unknown,
  initialBytes = 256,
): Buffer[] {
  const api = apis.get(apiKey)
  if (!api) throw new RangeError(`unknown api key ${apiKey}`)
  const writer = new Writer(initialBytes)
  writer.writeInt32(0) // size, patched below
  encodeRequestHeader(writer, api.requestHeaderVersion(apiVersion), {
    requestApiKey: apiKey,
    requestApiVersion: apiVersion,
    correlationId,
    clientId,
  })
  api.encodeRequest(writer, apiVersion, body)
  return sized(writer)
}

/** A response frame; the header version (v0 or v1, with tagged fields) follows the api's registry entry. */
export function encodeResponseFrame(
  apiKey: number,
  apiVersion: number,
  correlationId: number,
  body: unknown,
  initialBytes = 512,
): Buffer[] {
  const api = apis.get(apiKey)
  if (!api) throw new RangeError(`unknown api key ${apiKey}`)
  const writer = new Writer(initialBytes)
  writer.writeInt32(0) // size, patched below
  encodeResponseHeader(writer, api.responseHeaderVersion(apiVersion), { correlationId })
  const own = (body as { [ENCODE_RESPONSE]?: ResponseEncoder } | null)?.[ENCODE_RESPONSE]
  if (typeof own === 'function') own(writer, apiVersion, body)
  else api.encodeResponse(writer, apiVersion, body)
  return sized(writer)
}

/** The chunks with the size prefix (the first 4 bytes of the first chunk) filled in. */
function sized(writer: Writer): Buffer[] {
  const chunks = writer.toChunks()
  chunks[0].writeInt32BE(writer.length - SIZE_BYTES, 0)
  return chunks
}

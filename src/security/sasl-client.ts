/**
 * The client side of SASL for the inter-broker connections (replica fetchers): a Transport
 * whose connect() runs SaslHandshake v1 and SaslAuthenticate with PLAIN or SCRAM on the new
 * stream and hands it over once authenticated, so BrokerClient speaks Kafka on it as on any.
 */
import type { ByteStream, Transport } from '../common/network.js'
import type { Random } from '../common/random.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { FrameDecoder } from '../protocol/frame-decoder.js'
import { encodeRequestFrame } from '../protocol/frame-encoder.js'
import {
  ApiKey,
  apis,
  decodeResponseHeader,
  loadApiCodecs,
  type SaslAuthenticateResponse,
  type SaslHandshakeResponse,
} from '../protocol/generated/index.js'
import { Reader } from '../protocol/primitives.js'
import { saslClientExchange } from '../protocol/sasl-client.js'
import { SaslAuthenticationError } from './sasl-errors.js'
import type { SaslMechanism } from './sasl-server.js'

export interface SaslClientSettings {
  readonly mechanism: SaslMechanism
  /** PLAIN and SCRAM: the user and password. OAUTHBEARER: `token` instead. */
  readonly username: string
  readonly password: string
  /** OAUTHBEARER: a fresh token for each connection. */
  readonly token?: () => string
  readonly random: Random
  readonly clientId: string
}

const HANDSHAKE_VERSION = 1
const AUTHENTICATE_VERSION = 2
const MAX_RESPONSE_BYTES = 1024 * 1024

export function saslClientTransport(base: Transport, settings: SaslClientSettings): Transport {
  return {
    async connect(host, port) {
      const stream = await base.connect(host, port)
      try {
        return await authenticate(stream, settings)
      } catch (error) {
        stream.destroy()
        throw error
      }
    },
  }
}

async function authenticate(stream: ByteStream, settings: SaslClientSettings): Promise<ByteStream> {
  // Before any listener: the broker sends nothing until the handshake below is written.
  await loadApiCodecs([ApiKey.SaslHandshake, ApiKey.SaslAuthenticate])
  const decoder = new FrameDecoder(MAX_RESPONSE_BYTES)
  const userListeners: ((chunk: Buffer) => void)[] = []
  let authenticating = true
  let waiting: { resolve(frame: Buffer): void; reject(error: Error): void } | null = null
  stream.onData((chunk) => {
    if (!authenticating) {
      for (const listener of userListeners) listener(chunk)
      return
    }
    try {
      decoder.push(chunk, (f) => waiting?.resolve(f))
    } catch (error) {
      waiting?.reject(error as Error)
    }
  })
  stream.onClose((error) =>
    waiting?.reject(error ?? new SaslAuthenticationError('connection closed during SASL authentication')),
  )
  let correlationId = 1
  const call = <T>(apiKey: number, version: number, body: unknown): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = correlationId++
      waiting = {
        resolve: (f) => {
          const api = apis.get(apiKey)!
          const reader = new Reader(f)
          const header = decodeResponseHeader(reader, api.responseHeaderVersion(version))
          if (header.correlationId !== id)
            reject(new SaslAuthenticationError(`unexpected correlation id ${header.correlationId}`))
          else resolve(api.decodeResponse(reader, version) as T)
        },
        reject,
      }
      stream.write(encodeRequestFrame(apiKey, version, id, settings.clientId, body, 128))
    })
  const handshake = await call<SaslHandshakeResponse>(ApiKey.SaslHandshake, HANDSHAKE_VERSION, {
    mechanism: settings.mechanism,
  })
  if (handshake.errorCode !== ErrorCode.NONE)
    throw new SaslAuthenticationError(
      `SASL mechanism ${settings.mechanism} refused (error ${handshake.errorCode}); the broker offers ${handshake.mechanisms.join(', ')}`,
    )
  const step = async (token: Buffer): Promise<Buffer> => {
    const response = await call<SaslAuthenticateResponse>(ApiKey.SaslAuthenticate, AUTHENTICATE_VERSION, {
      authBytes: token,
    })
    if (response.errorCode !== ErrorCode.NONE)
      throw new SaslAuthenticationError(
        `SASL authentication failed: ${response.errorMessage ?? response.errorCode}`,
      )
    return response.authBytes
  }
  await saslClientExchange(settings, settings.random, step)
  authenticating = false
  waiting = null
  return {
    remoteAddress: stream.remoteAddress,
    localAddress: stream.localAddress,
    write: (chunks) => stream.write(chunks),
    get writableNeedDrain() {
      return stream.writableNeedDrain
    },
    pause: () => stream.pause(),
    resume: () => stream.resume(),
    onData: (listener) => {
      userListeners.push(listener)
    },
    onDrain: (listener) => stream.onDrain(listener),
    onClose: (listener) => stream.onClose(listener),
    destroy: () => stream.destroy(),
  }
}

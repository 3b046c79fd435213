/**
 * The client's default connector: TCP (node:net) or TLS (node:tls), Nagle off (requests are
 * small and latency-bound). A plain socket reads with net's `onread` into FrameReader's
 * buffers, so a large fetch response is read straight into a buffer of its own size; its
 * stream delivers frames (`readFrames`) only. A TLS socket delivers chunks (`onData`).
 */
import { connect, isIP, type Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import { assert } from '../common/assert.js'
import type { ByteStream } from '../common/network.js'
import { socketStream } from '../common/socket-stream.js'
import { FrameReader } from '../protocol/frame-decoder.js'
import type { ClientConnector, ConnectTarget } from './connector.js'
import { SslAuthenticationError } from './errors.js'

export const tcpConnector: ClientConnector = (target, signal) =>
  new Promise<ByteStream>((resolve, reject) => {
    const ssl = target.ssl
    const frames = ssl ? null : new SocketFrames(target.maxFrameBytes)
    const socket = ssl ? openTls(target) : openPlain(target, frames!)
    const onAbort = (): void => {
      socket.destroy()
      reject(signal.reason)
    }
    signal.addEventListener('abort', onAbort, { once: true })
    socket.once(ssl ? 'secureConnect' : 'connect', () => {
      signal.removeEventListener('abort', onAbort)
      socket.removeAllListeners('error')
      resolve(clientStream(socket, frames))
    })
    socket.once('error', (error) => {
      signal.removeEventListener('abort', onAbort)
      reject(
        ssl && isCertificateError(error)
          ? new SslAuthenticationError(
              `TLS handshake with ${target.host}:${target.port} failed: ${error.message}`,
              error,
            )
          : error,
      )
    })
  })

function openPlain(target: ConnectTarget, frames: SocketFrames): Socket {
  return connect({
    host: target.host,
    port: target.port,
    noDelay: true,
    onread: {
      buffer: () => frames.reader.nextBuffer(),
      // true: keep reading (false would stop the socket's reads).
      callback: (bytes: number) => {
        frames.onRead(bytes)
        return true
      },
    },
  })
}

function openTls(target: ConnectTarget): Socket {
  const ssl = target.ssl!
  const socket = tlsConnect({
    host: target.host,
    port: target.port,
    ca: ssl.ca,
    cert: ssl.cert,
    key: ssl.key,
    passphrase: ssl.keyPassword,
    rejectUnauthorized: ssl.rejectUnauthorized ?? true,
    ...(ssl.verifyHostname === false ? { checkServerIdentity: () => undefined } : {}),
    // SNI carries names only; an IP address is still checked against the certificate's IP SANs.
    servername: ssl.servername ?? (isIP(target.host) ? undefined : target.host),
  })
  socket.setNoDelay(true)
  return socket
}

/** A connected socket as a ByteStream; with `frames` (an `onread` socket) it delivers frames only. */
function clientStream(socket: Socket, frames: SocketFrames | null): ByteStream {
  const stream = socketStream(socket)
  if (frames === null) return stream
  return {
    ...stream,
    get writableNeedDrain() {
      return stream.writableNeedDrain
    },
    onData: () => assert(false, () => 'onData on a socket that reads frames in place'),
    readFrames: (_maxFrameBytes, onFrame, onError) => frames.attach(onFrame, onError),
  }
}

/**
 * A plain socket's responses: the socket reads (net's `onread`) into FrameReader's buffers.
 * Frames that arrive before the connection attaches (none should: the client speaks first)
 * wait, in order, as with a paused socket.
 */
class SocketFrames {
  readonly reader: FrameReader
  private early: Buffer[] = []
  private onFrame: ((frame: Buffer) => void) | null = null
  private onError: ((error: unknown) => void) | null = null
  private failed: unknown = null

  constructor(maxFrameBytes: number) {
    this.reader = new FrameReader(maxFrameBytes)
  }

  attach(onFrame: (frame: Buffer) => void, onError: (error: unknown) => void): void {
    this.onFrame = onFrame
    this.onError = onError
    if (this.failed !== null) {
      onError(this.failed)
      return
    }
    try {
      for (const frame of this.early.splice(0)) onFrame(frame)
    } catch (error) {
      onError(error)
    }
  }

  /** The onread callback: never throws (it runs inside the socket's read). */
  onRead(bytes: number): void {
    if (this.failed !== null) return
    try {
      this.reader.onRead(bytes, this.onFrame ?? ((frame) => this.early.push(frame)))
    } catch (error) {
      this.failed = error
      this.onError?.(error)
    }
  }
}

/** OpenSSL's verification failures (UNABLE_TO_VERIFY_LEAF_SIGNATURE, CERT_HAS_EXPIRED, ...) and Node's host check. */
function isCertificateError(error: Error): boolean {
  const code = (error as NodeJS.ErrnoException).code ?? ''
  return code === 'ERR_TLS_CERT_ALTNAME_INVALID' || /CERT|SIGNATURE|ISSUER/.test(code)
}

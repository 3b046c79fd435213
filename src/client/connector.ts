/**
 * How the client reaches a broker: an injected connector opens a byte stream (the broker's
 * `ByteStream`, common/network.ts) and the connection speaks Kafka over it, as the broker's
 * own connections do over its injected `Network`. The default is TCP and TLS
 * (tcp-connector.ts, the only client file that touches node:net or node:tls); the simulator
 * hands in its simulated network, so the same producer and consumer run under its faults.
 */
import type { ByteStream } from '../common/network.js'
import type { SslOptions } from './security-options.js'

export interface ConnectTarget {
  readonly host: string
  readonly port: number
  /** TLS (security.protocol SSL or SASL_SSL); absent: plain. */
  readonly ssl?: SslOptions
  /**
   * The largest response frame the connection accepts: a stream that reads frames in place
   * (`readFrames`) needs it from its first read, before the connection asks.
   */
  readonly maxFrameBytes: number
}

/**
 * Opens a stream to the broker. Rejects when it cannot: with a KafkaClientError (an
 * SslAuthenticationError for a refused certificate) that is passed on as it is, or with
 * any other error, which the connection reports as a ConnectionError. When `signal` aborts
 * (the connect timeout), the attempt is to be given up and its stream destroyed.
 */
export type ClientConnector = (target: ConnectTarget, signal: AbortSignal) => Promise<ByteStream>

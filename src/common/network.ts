/**
 * The network as an injected dependency. A broker listens for byte-stream connections and
 * dials other brokers through a `Network`; runtime/node-network.ts is TCP (node:net), the
 * simulator's is a simulated network with delays, resets and cut links. Connection handling
 * (framing, dispatch, in-order responses, back-pressure) works over any `ByteStream`, so every
 * world runs the same code.
 */

/** One side of a connection: ordered bytes both ways, as a TCP socket. */
export interface ByteStream {
  /** `host:port` of the other side, for logs. */
  readonly remoteAddress: string
  /** `host:port` of this side, where the network knows it (TCP does). */
  readonly localAddress?: string
  /**
   * Writes the chunks back to back (one syscall where the OS allows). `onWritten`, where the
   * stream supports it, is called once the OS has all the bytes and the stream holds no
   * reference to the chunks any more; never after a failed write. A stream may ignore it.
   */
  write(chunks: readonly Buffer[], onWritten?: () => void): void
  /** True while written bytes wait for the peer (back-pressure): stop reading until `onDrain`. */
  readonly writableNeedDrain: boolean
  /** Stops delivering data until `resume()`. */
  pause(): void
  resume(): void
  onData(listener: (chunk: Buffer) => void): void
  /**
   * Where the stream can read into buffers it is handed (TCP's `onread`): delivers whole
   * Kafka frames instead of chunks, a large one read straight into a buffer of its own size
   * (FrameReader), where onData's chunks would be copied again to join them. Once called,
   * onData listeners get nothing more. `onError` is told of a framing error (a bad size)
   * or a throw of `onFrame`; the stream is then the caller's to destroy.
   */
  readFrames?(
    maxFrameBytes: number,
    onFrame: (frame: Buffer) => void,
    onError: (error: unknown) => void,
  ): void
  onDrain(listener: () => void): void
  /** Called once when the stream ends, with the error that ended it if any. */
  onClose(listener: (error: Error | null) => void): void
  /** Closes at once, dropping unsent bytes. */
  destroy(): void
}

export interface NetworkListener {
  /** The bound port (differs from the asked one when that was 0). */
  readonly port: number
  /** Stops accepting; connections already accepted stay open. */
  close(): Promise<void>
}

export interface Network {
  /** Listens on host:port (0: a free port) and hands every accepted connection to `onConnection`. */
  listen(host: string, port: number, onConnection: (stream: ByteStream) => void): Promise<NetworkListener>
  /** Opens a connection to host:port; rejects when it cannot be opened. */
  connect(host: string, port: number): Promise<ByteStream>
}

/** How a broker dials another (replica fetchers, markers, inter-broker SASL): the connect half of the Network. */
export type Transport = Pick<Network, 'connect'>

/**
 * What a broker is built from (DESIGN.md, "one broker, many worlds"): time, randomness, the
 * disk, the network, the metadata store and a logger. server/ and the CLI pass Node's real
 * parts (runtime/node-parts.ts), the simulator passes simulated ones (src/sim), and
 * tidelog/testing passes real parts wrapped so a test can inject faults. Nothing in the
 * broker reaches for Date.now, Math.random, node:fs or node:net.
 */
import type { Clock } from '../common/clock.js'
import type { FileSystem } from '../common/file-system.js'
import type { Logger } from '../common/logger.js'
import type { Network } from '../common/network.js'
import type { Random } from '../common/random.js'
import type { MetadataStore } from '../metadata/store/metadata-store.js'
import type { TlsProvider } from '../security/tls.js'
import type { RequestTap } from './connection.js'

export interface BrokerParts {
  readonly clock: Clock
  readonly random: Random
  /** The log directories' disk (and the embedded store's journal when the broker owns it). */
  readonly fileSystem: FileSystem
  /** Where the broker listens for clients and dials other brokers (replica fetchers). */
  readonly network: Network
  readonly logger: Logger
  /** TLS for SSL and SASL_SSL listeners and the inter-broker client; absent where TLS is not available. */
  readonly tls?: TlsProvider
  /**
   * The cluster's metadata store, shared by its brokers (embedded for brokers in one
   * process, etcd across processes). Without one the broker opens an embedded store
   * persisted in its first log directory and owns it.
   */
  readonly store?: MetadataStore
  readonly observer?: BrokerObserver
  /**
   * Compare each metadata image built by deltas with a build from scratch, throwing on a
   * difference (metadata/image-delta.ts): a debug check the simulator turns on.
   */
  readonly checkMetadataImages?: boolean
  /**
   * Log and count stalls of the event loop that endanger the store session
   * (event-loop-stall-monitor.ts): for a real process, not the simulator's time.
   */
  readonly monitorEventLoop?: boolean
}

/**
 * Taps on what the broker does, for whoever embeds it (metrics, the simulator's invariants).
 * They observe; the broker's reactions are its own.
 */
export interface BrokerObserver {
  /** Every request as it is dispatched, and its outcome. */
  readonly onRequest?: RequestTap
  /** A programmer error reached the top (the broker logs it; an InvariantError also stops it). */
  onFatal?(error: unknown): void
  /** A log directory went offline after a disk error; `online` are those left. */
  onLogDirOffline?(dir: string, online: readonly string[]): void
}

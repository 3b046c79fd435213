/**
 * Node's real parts for a broker: the system clock, crypto randomness, node:fs, TCP and TLS.
 * Whoever composes a broker on Node passes these (startCluster/startBroker, the broker
 * threads, tidelog/testing, the CLI through them); the simulator passes its own. The
 * Broker class itself has no default: it is built from what it is given.
 * The shape is declared here from the lower layers' interfaces, not borrowed from the
 * server's BrokerParts: runtime sits below what it serves, and BrokerParts accepts it as is.
 */
import { type Clock, systemClock } from '../common/clock.js'
import type { FileSystem } from '../common/file-system.js'
import type { Network } from '../common/network.js'
import { type Random, systemRandom } from '../common/random.js'
import type { TlsProvider } from '../security/tls.js'
import { nodeFileSystem } from './node-file-system.js'
import { nodeNetwork } from './node-network.js'
import { nodeTls } from './node-tls-network.js'

export interface NodeParts {
  readonly clock: Clock
  readonly random: Random
  readonly fileSystem: FileSystem
  readonly network: Network
  readonly tls: TlsProvider
  /** A real event loop, which can stall (server/event-loop-stall-monitor.ts). */
  readonly monitorEventLoop: true
}

export const nodeParts: NodeParts = {
  clock: systemClock,
  random: systemRandom,
  fileSystem: nodeFileSystem,
  network: nodeNetwork,
  tls: nodeTls,
  monitorEventLoop: true,
}

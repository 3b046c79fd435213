/**
 * Node's real parts for a broker: the system clock, crypto randomness, node:fs and TCP.
 * The CLI and startBroker() build brokers from these; the simulator passes its own.
 * The shape is declared here from the lower layers' interfaces, not borrowed from the
 * server's BrokerParts: runtime sits below what it serves, and BrokerParts accepts it as is.
 */
import { type Clock, systemClock } from '../common/clock.js'
import type { FileSystem } from '../common/file-system.js'
import type { Logger } from '../common/logger.js'
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
  readonly logger: Logger
}

export function nodeBrokerParts(logger: Logger): NodeParts {
  return {
    clock: systemClock,
    random: systemRandom,
    fileSystem: nodeFileSystem,
    network: nodeNetwork,
    tls: nodeTls,
    logger,
  }
}

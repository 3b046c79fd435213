/**
 * Node's real parts for a broker: the system clock, crypto randomness, node:fs and TCP.
 * The CLI and startBroker() build brokers from these; the simulator passes its own.
 */
import { systemClock } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import { systemRandom } from '../common/random.js'
import type { BrokerParts } from '../server/broker-parts.js'
import { nodeFileSystem } from './node-file-system.js'
import { nodeNetwork } from './node-network.js'
import { nodeTls } from './node-tls-network.js'

export function nodeBrokerParts(logger: Logger): Omit<BrokerParts, 'store' | 'observer'> {
  return {
    clock: systemClock,
    random: systemRandom,
    fileSystem: nodeFileSystem,
    network: nodeNetwork,
    tls: nodeTls,
    logger,
  }
}

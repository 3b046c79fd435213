/**
 * Entry module of a broker thread (`startCluster({ workerThreads: true })`, `tidelog start
 * --worker-threads`): the broker built from Node's real parts, on the main thread's store.
 */

import { nodeParts } from '../runtime/node-parts.js'
import { Broker } from './broker.js'
import { brokerConfigFromProperties } from './broker-config.js'
import { serveBrokerThread } from './broker-thread.js'

serveBrokerThread(async (init, { store, logger }) => {
  const config = brokerConfigFromProperties(new Map(init.properties))
  const broker = await Broker.start(config, { ...nodeParts, store, logger })
  return { broker }
})

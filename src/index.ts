/**
 * tidelog's embedding API: start a Kafka-compatible broker inside a Node process.
 *
 *   import { startBroker } from 'tidelog'
 *   const cluster = await startBroker({ port: 0 })   // free port, temporary data dir
 *   // ... use cluster.bootstrapServers with any Kafka client ...
 *   await cluster.stop()
 */
import {
  type Cluster,
  type StartClusterOptions,
  startCluster,
  type WorkerCluster,
  type WorkerClusterOptions,
} from './server/cluster.js'

export { DirectoryLockedError } from './common/file-system.js'
export { Broker } from './server/broker.js'
export type { BrokerThread } from './server/broker-thread.js'
export type { Cluster, StartClusterOptions, WorkerCluster, WorkerClusterOptions }
export { startCluster }

/**
 * Starts one broker; defaults to a free port (unless a `listeners` property names one) and
 * a temporary data directory.
 */
export function startBroker(options: Omit<StartClusterOptions, 'brokers'> = {}): Promise<Cluster> {
  const properties = options.properties
  const hasListeners =
    properties instanceof Map
      ? properties.has('listeners')
      : (properties as Record<string, unknown> | undefined)?.['listeners'] !== undefined
  return startCluster({ ...(hasListeners ? {} : { port: 0 }), ...options, brokers: 1 })
}

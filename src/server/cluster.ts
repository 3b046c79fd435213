/**
 * Starts one or more brokers in this process (`tidelog start`, the embedding API).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import type { Logger } from '../common/logger.js'
import { Broker } from './broker.js'
import { brokerConfigFromProperties } from './broker-config.js'

export interface StartClusterOptions {
  /** Brokers in this process (default 1). */
  brokers?: number
  host?: string
  /** First broker's port; broker i listens on port + i. 0 picks free ports. */
  port?: number
  /** Data directory; a temporary one (removed on stop) when absent. */
  dataDir?: string
  /** Kafka broker properties, by Kafka name. */
  properties?: ReadonlyMap<string, string> | Readonly<Record<string, string | number | boolean>>
  logger?: Logger
}

export interface Cluster {
  readonly brokers: readonly Broker[]
  /** `host:port,host:port` for clients. */
  readonly bootstrapServers: string
  stop(): Promise<void>
}

export async function startCluster(options: StartClusterOptions = {}): Promise<Cluster> {
  const brokerCount = options.brokers ?? 1
  if (brokerCount !== 1) {
    throw new Error(
      'more than one broker per process needs the cluster metadata store, which is not built yet',
    )
  }
  const properties = toMap(options.properties)
  const temporary = options.dataDir === undefined && !properties.has('log.dirs') && !properties.has('log.dir')
  const dataDir = options.dataDir ?? (temporary ? await mkdtemp(join(tmpdir(), 'tidelog-')) : undefined)
  if (dataDir !== undefined && !properties.has('log.dirs')) properties.set('log.dirs', resolve(dataDir))
  if (options.port !== undefined || options.host !== undefined || !properties.has('listeners')) {
    properties.set('listeners', `PLAINTEXT://${options.host ?? '127.0.0.1'}:${options.port ?? 9092}`)
  }
  const config = brokerConfigFromProperties(properties)
  const broker = await Broker.start(config, options.logger ? { logger: options.logger } : {})
  return {
    brokers: [broker],
    bootstrapServers: broker.bootstrapServers,
    async stop() {
      await broker.stop()
      if (temporary && dataDir) await rm(dataDir, { recursive: true, force: true })
    },
  }
}

function toMap(properties: StartClusterOptions['properties']): Map<string, string> {
  if (properties === undefined) return new Map()
  if (properties instanceof Map) return new Map(properties)
  return new Map(Object.entries(properties).map(([key, value]) => [key, String(value)]))
}

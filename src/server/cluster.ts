/**
 * Starts one or more brokers in this process (`tidelog start`, the embedding API).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { systemClock } from '../common/clock.js'
import { ConfigError } from '../common/errors.js'
import { createLogger, type Logger } from '../common/logger.js'
import { EmbeddedStore } from '../metadata/store/embedded-store.js'
import type { MetadataStore } from '../metadata/store/metadata-store.js'
import { nodeFileSystem } from '../runtime/node-file-system.js'
import { nodeParts } from '../runtime/node-parts.js'
import { Broker, type BrokerDependencies } from './broker.js'
import { brokerConfigFromProperties, parseListener, storeLimitsFromProperties } from './broker-config.js'
import { BrokerThread } from './broker-thread.js'

export interface StartClusterOptions {
  /** Brokers in this process (default 1). */
  brokers?: number
  /** Listener host (default 127.0.0.1); must agree with a `listeners` property if both are given. */
  host?: string
  /**
   * First broker's port (default 9092, or the port of a `listeners` property); broker i
   * listens on port + i. 0 picks free ports.
   */
  port?: number
  /** Data directory; a temporary one (removed on stop) when absent. */
  dataDir?: string
  /** Kafka broker properties, by Kafka name. */
  properties?: ReadonlyMap<string, string> | Readonly<Record<string, string | number | boolean>>
  logger?: Logger
  /** A shared metadata store (etcd for multi-process clusters); embedded when absent. */
  metadataStore?: MetadataStore
  /** Parts of the one broker over Node's (`tidelog broker` under test faults: testing/process-faults.ts). */
  brokerParts?: Partial<BrokerDependencies>
}

export interface WorkerClusterOptions extends StartClusterOptions {
  /**
   * Each broker in a worker thread of its own (at least 2 brokers): an event loop, and so a
   * core, per broker instead of one for all. The store stays in this thread; `brokers` are
   * then handles (BrokerThread), not Broker objects.
   */
  workerThreads: true
}

/** startCluster({ workerThreads: true }): brokers in worker threads. */
export interface WorkerCluster {
  readonly brokers: readonly BrokerThread[]
  /** `host:port,host:port` for clients. */
  readonly bootstrapServers: string
  stop(): Promise<void>
}

export interface Cluster {
  readonly brokers: readonly Broker[]
  /** `host:port,host:port` for clients. */
  readonly bootstrapServers: string
  stop(): Promise<void>
}

export function startCluster(options: WorkerClusterOptions): Promise<WorkerCluster>
export function startCluster(options?: StartClusterOptions): Promise<Cluster>
export async function startCluster(
  options: StartClusterOptions & { workerThreads?: boolean } = {},
): Promise<Cluster | WorkerCluster> {
  const brokerCount = options.brokers ?? 1
  if (!Number.isInteger(brokerCount) || brokerCount < 1) throw new Error('brokers must be a positive integer')
  if (options.workerThreads === true && brokerCount < 2)
    throw new ConfigError('workerThreads needs 2 brokers or more: one broker is one event loop either way')
  const properties = toMap(options.properties)
  checkListenerOptions(properties, options)
  const temporary = options.dataDir === undefined && !properties.has('log.dirs') && !properties.has('log.dir')
  const dataDir = options.dataDir ?? (temporary ? await mkdtemp(join(tmpdir(), 'tidelog-')) : undefined)
  const logger = options.logger
  if (brokerCount === 1) {
    // One broker keeps its node.id and log.dirs as configured: alone, with its metadata
    // beside its logs in the data directory itself; or as one process of a cluster on a
    // shared store (`tidelog broker --metadata etcd://...`), where each process has its own.
    if (dataDir !== undefined && !properties.has('log.dirs')) properties.set('log.dirs', resolve(dataDir))
    setListener(properties, options, 0)
    const broker = await Broker.start(brokerConfigFromProperties(properties), {
      ...nodeParts,
      ...(logger ? { logger } : {}),
      ...(options.metadataStore ? { store: options.metadataStore } : {}),
      ...options.brokerParts,
    })
    return clusterOf([broker], null, temporary ? dataDir : undefined)
  }
  const root = resolve(dataDir ?? (properties.get('log.dirs') ?? properties.get('log.dir'))!.split(',')[0])
  const store =
    options.metadataStore ??
    (await EmbeddedStore.open({
      clock: systemClock,
      persistPath: join(root, METADATA_FILE),
      fs: nodeFileSystem,
      limits: storeLimitsFromProperties(properties),
    }))
  if (options.workerThreads === true)
    return startWorkerCluster(options, properties, root, store, temporary ? dataDir : undefined)
  const brokers: Broker[] = []
  try {
    for (let index = 0; index < brokerCount; index++) {
      const brokerProperties = new Map(properties)
      brokerProperties.set('node.id', String(index))
      brokerProperties.set('log.dirs', join(root, `broker-${index}`))
      setListener(brokerProperties, options, index)
      const config = brokerConfigFromProperties(brokerProperties)
      brokers.push(await Broker.start(config, { ...nodeParts, store, ...(logger ? { logger } : {}) }))
    }
  } catch (error) {
    for (const broker of brokers) await broker.stop()
    if (!options.metadataStore) await store.close()
    throw error
  }
  return clusterOf(brokers, options.metadataStore ? null : store, temporary ? dataDir : undefined)
}

const METADATA_FILE = '__tidelog_metadata.log'

/** The brokers of startCluster, each in a worker thread of its own, on `store` (kept here). */
async function startWorkerCluster(
  options: StartClusterOptions,
  properties: ReadonlyMap<string, string>,
  root: string,
  store: MetadataStore,
  temporaryDir: string | undefined,
): Promise<WorkerCluster> {
  const logger = options.logger ?? createLogger('tidelog')
  const entry = new URL('./broker-worker.js', import.meta.url)
  const ownedStore = options.metadataStore ? null : store
  const started = await Promise.allSettled(
    Array.from({ length: options.brokers ?? 1 }, (_, index) => {
      const brokerProperties = new Map(properties)
      brokerProperties.set('node.id', String(index))
      brokerProperties.set('log.dirs', join(root, `broker-${index}`))
      setListener(brokerProperties, options, index)
      return BrokerThread.spawn(
        entry,
        { nodeId: index, properties: [...brokerProperties], extra: null },
        store,
        logger,
      )
    }),
  )
  const brokers = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []))
  const failed = started.find((result) => result.status === 'rejected')
  if (failed !== undefined) {
    for (const broker of brokers) await broker.stop()
    await ownedStore?.close()
    throw failed.reason
  }
  const ids = brokers.map((b) => b.nodeId)
  if (!(await brokers[0].call('waitLeadersServing', { ids, timeoutMs: START_SERVING_WAIT_MS })))
    logger.warn({ timeoutMs: START_SERVING_WAIT_MS }, 'started before every led partition was served')
  return {
    brokers,
    bootstrapServers: brokers.map((b) => b.bootstrapServers).join(','),
    async stop() {
      // One at a time, as in one thread: each hands its leaderships to brokers still running.
      for (const broker of brokers) await broker.stop()
      await ownedStore?.close()
      if (temporaryDir) await rm(temporaryDir, { recursive: true, force: true })
    },
  }
}

/** Refuses a `host` or `port` option that contradicts a configured `listeners`, before anything starts. */
function checkListenerOptions(properties: ReadonlyMap<string, string>, options: StartClusterOptions): void {
  const configured = properties.get('listeners')
  if (configured === undefined) return
  const listener = parseListener(configured.split(',')[0])
  if (options.port !== undefined && options.port !== listener.port)
    throw new ConfigError(`port ${options.port} contradicts listeners=${configured}: give only one of them`)
  if (options.host !== undefined && options.host !== listener.host)
    throw new ConfigError(`host ${options.host} contradicts listeners=${configured}: give only one of them`)
}

/**
 * Broker `index` listens on the first broker's port plus its index (0 stays 0: a free port
 * each). The first broker's address is `listeners` when configured (checkListenerOptions
 * made sure `host` and `port` agree with it), else `host`/`port`.
 */
function setListener(properties: Map<string, string>, options: StartClusterOptions, index: number): void {
  setHttpListener(properties, index)
  const configured = properties.get('listeners')
  const host = options.host ?? '127.0.0.1'
  const base = options.port ?? 9092
  if (configured !== undefined) {
    if (index === 0) return
    // Every named listener (and its advertised address) moves by the broker's index.
    properties.set('listeners', shiftPorts(configured, index))
    const advertised = properties.get('advertised.listeners')
    if (advertised !== undefined) properties.set('advertised.listeners', shiftPorts(advertised, index))
    return
  }
  const port = base === 0 ? 0 : base + index
  if (port > 65535) throw new ConfigError(`broker ${index} would listen on port ${port}, above 65535`)
  properties.set('listeners', `PLAINTEXT://${host.includes(':') ? `[${host}]` : host}:${port}`)
}

/** `NAME://host:port,...` with every non-zero port plus `index`. */
function shiftPorts(listeners: string, index: number): string {
  return listeners
    .split(',')
    .map((entry) => {
      const { port } = parseListener(entry)
      if (port === 0) return entry.trim()
      if (port + index > 65535)
        throw new ConfigError(`broker ${index} would listen on port ${port + index}, above 65535`)
      return entry.trim().replace(/:\d+$/, `:${port + index}`)
    })
    .join(',')
}

/**
 * tidelog.http.listener and tidelog.schema.registry.listener HOST:PORT: broker i serves
 * HTTP on PORT + i, as its Kafka listener does.
 */
function setHttpListener(properties: Map<string, string>, index: number): void {
  for (const name of ['tidelog.http.listener', 'tidelog.schema.registry.listener']) {
    const listener = properties.get(name)
    const match = listener ? /^(.*):(\d+)$/.exec(listener) : null
    if (!match || Number(match[2]) === 0 || index === 0) continue
    properties.set(name, `${match[1]}:${Number(match[2]) + index}`)
  }
}

/**
 * How long a start waits for its brokers to serve what they lead: a broker that restarts on
 * its data serves nothing until it has applied the image (Metadata answers
 * LEADER_NOT_AVAILABLE for those partitions meanwhile), and a caller of startBroker expects
 * its topics usable once it resolves.
 */
const START_SERVING_WAIT_MS = 10000

async function clusterOf(
  brokers: Broker[],
  ownedStore: MetadataStore | null,
  temporaryDir: string | undefined,
): Promise<Cluster> {
  const ids = brokers.map((b) => b.nodeId)
  if (!(await brokers[0].topicAdmin.waitLeadersServing(ids, START_SERVING_WAIT_MS)))
    brokers[0].logger.warn(
      { timeoutMs: START_SERVING_WAIT_MS },
      'started before every led partition was served',
    )
  return {
    brokers,
    bootstrapServers: brokers.map((b) => b.bootstrapServers).join(','),
    async stop() {
      // One at a time: each hands its leaderships to brokers still running.
      for (const broker of brokers) await broker.stop()
      await ownedStore?.close()
      if (temporaryDir) await rm(temporaryDir, { recursive: true, force: true })
    },
  }
}

function toMap(properties: StartClusterOptions['properties']): Map<string, string> {
  if (properties === undefined) return new Map()
  if (properties instanceof Map) return new Map(properties)
  return new Map(Object.entries(properties).map(([key, value]) => [key, String(value)]))
}

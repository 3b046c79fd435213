/**
 * A broker: the listener, the handlers, and the services they use. Start with
 * `Broker.start(config)`; `stop()` closes connections, then flushes and closes the logs.
 */

import { randomInt } from 'node:crypto'
import { InvariantError } from '../common/assert.js'
import { type Clock, systemClock } from '../common/clock.js'
import { createLogger, type Logger } from '../common/logger.js'
import type { ClusterImage, PartitionState, TopicImage } from '../metadata/cluster-image.js'
import { LocalController, type NewTopic } from '../metadata/local-controller.js'
import { logConfigFor, resolveTopicConfig } from '../metadata/topic-config.js'
import { topicNameProblem } from '../metadata/topic-name.js'
import { ReplicaManager, type TopicSettings } from '../replication/replica-manager.js'
import { LogManager } from '../storage/log-manager.js'
import type { BrokerConfig } from './broker-config.js'
import type { BrokerServices } from './broker-services.js'
import { FetchSessionCache } from './fetch-session-cache.js'
import { allHandlers } from './handlers/all.js'
import { HandlerRegistry } from './handlers/registry.js'
import { SocketServer } from './socket-server.js'

export interface BrokerDependencies {
  clock?: Clock
  logger?: Logger
}

export class Broker implements BrokerServices {
  readonly nodeId: number
  readonly handlers: HandlerRegistry
  readonly clock: Clock
  readonly logger: Logger
  readonly replicaManager: ReplicaManager
  readonly fetchSessions: FetchSessionCache
  private socketServer: SocketServer | null = null
  private boundPort = -1
  private stopping: Promise<void> | null = null

  private constructor(
    readonly config: BrokerConfig,
    readonly controller: LocalController,
    readonly logManager: LogManager,
    deps: Required<BrokerDependencies>,
  ) {
    this.nodeId = config.nodeId
    this.clock = deps.clock
    this.logger = deps.logger
    this.handlers = new HandlerRegistry(allHandlers)
    this.replicaManager = new ReplicaManager({
      nodeId: config.nodeId,
      logs: logManager,
      clock: deps.clock,
      logger: deps.logger,
      topicSettings: (image, topic) => this.topicSettings(image, topic),
    })
    const sessionSlots = config.values.get('max.incremental.fetch.session.cache.slots') as number | undefined
    this.fetchSessions = new FetchSessionCache(sessionSlots ?? 1000, () => randomInt(1, 2 ** 31 - 1))
  }

  static async start(config: BrokerConfig, deps: BrokerDependencies = {}): Promise<Broker> {
    const logger = deps.logger ?? createLogger(`broker-${config.nodeId}`)
    const clock = deps.clock ?? systemClock
    const registration = {
      nodeId: config.nodeId,
      host: config.advertisedHost,
      port: config.advertisedPort,
      rack: config.rack,
    }
    const controller = await LocalController.open(config.logDirs[0], registration, config.clusterId, logger)
    const logManager = await LogManager.open({
      logDirs: config.logDirs,
      clock,
      logger,
      retentionCheckIntervalMs: config.values.get('log.retention.check.interval.ms') as number,
      // Logs found on disk open with their topic's config; a topic no longer in the
      // metadata (deleted while stopped) opens with defaults and is removed when applied.
      topicConfig: (topic) =>
        controller.image().topics.has(topic) ? logConfigFor(controller.image(), config, topic) : undefined,
    })
    const broker: Broker = new Broker(config, controller, logManager, { clock, logger })
    await broker.replicaManager.applyImage(controller.image())
    controller.onChange((image) => {
      broker.replicaManager.applyImage(image).catch((error: unknown) => broker.onFatal(error as Error))
    })
    logManager.startup()
    await broker.listen()
    return broker
  }

  /** Effective settings of a topic: its overrides over the broker's defaults. */
  private topicSettings(image: ClusterImage, topic: string): TopicSettings {
    return {
      logConfig: logConfigFor(image, this.config, topic),
      minInsyncReplicas: Number(
        resolveTopicConfig(image, this.config, topic).get('min.insync.replicas')?.value ?? 1,
      ),
    }
  }

  /** The bound port (differs from the configured one when that was 0). */
  get port(): number {
    return this.boundPort
  }

  get bootstrapServers(): string {
    return `${this.config.host}:${this.boundPort}`
  }

  metadataImage(): ClusterImage {
    return this.controller.image()
  }

  /** auto.create.topics.enable: creates missing topics with the broker defaults. */
  async autoCreateTopics(names: readonly string[]): Promise<void> {
    if (this.config.values.get('auto.create.topics.enable') !== true) return
    const valid = names.filter((name) => topicNameProblem(name) === null)
    if (valid.length === 0) return
    await this.controller.update((image) => {
      const topics = new Map(image.topics)
      for (const name of valid) {
        if (topics.has(name)) continue
        topics.set(
          name,
          this.controller.createTopicImage({
            name,
            partitions: this.config.values.get('num.partitions') as number,
            replicationFactor: Math.min(
              this.config.values.get('default.replication.factor') as number,
              image.brokers.size,
            ),
            configs: {},
          }),
        )
        this.logger.info({ topic: name }, 'auto-created topic')
      }
      return topics.size === image.topics.size ? image : { ...image, topics }
    })
  }

  updateMetadata(change: (image: ClusterImage) => ClusterImage): Promise<ClusterImage> {
    return this.controller.update(change)
  }

  placeNewTopic(spec: NewTopic): TopicImage {
    return this.controller.createTopicImage(spec)
  }

  placeNewPartition(partition: number, replicationFactor: number): PartitionState {
    const nodeIds = [...this.controller.image().brokers.keys()]
    return this.controller.newPartition(partition, nodeIds, replicationFactor)
  }

  private async listen(): Promise<void> {
    const server = new SocketServer(
      {
        handlers: this.handlers,
        socketRequestMaxBytes: this.config.socketRequestMaxBytes,
        maxQueuedRequests: this.config.queuedMaxRequests,
        logger: this.logger,
        onFatal: (error) => this.onFatal(error),
        makeContext: (connection, header) => ({
          header,
          apiVersion: header.requestApiVersion,
          connection,
          broker: this,
        }),
      },
      this.logger,
    )
    this.boundPort = await server.listen(this.config.host, this.config.port)
    this.socketServer = server
    if (this.config.advertisedPort === 0) {
      // A free port was asked for: advertise the one actually bound.
      const image = this.controller.image()
      const self = image.brokers.get(this.nodeId)!
      await this.controller.update((current) => ({
        ...current,
        brokers: new Map(current.brokers).set(this.nodeId, { ...self, port: this.boundPort }),
      }))
    }
    this.logger.info({ port: this.boundPort }, 'broker listening')
  }

  /** A programmer error reached the top: stop serving rather than risk corrupting data. */
  onFatal(error: Error): void {
    this.logger.fatal({ err: error }, 'invariant violated; stopping broker')
    if (error instanceof InvariantError) {
      this.stop().catch((stopError: unknown) => this.logger.error({ err: stopError }, 'stop failed'))
    }
  }

  stop(): Promise<void> {
    this.stopping ??= this.doStop()
    return this.stopping
  }

  private async doStop(): Promise<void> {
    await this.socketServer?.close()
    await this.logManager.shutdown()
    this.logger.info('broker stopped')
  }
}

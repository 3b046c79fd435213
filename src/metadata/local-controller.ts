/**
 * The controller of a single-broker cluster: the only writer of the cluster image, which it
 * persists to `<log dir>/__tidelog_metadata.json` (written to a temp file, fsynced, renamed)
 * before any broker acts on a change. Multi-broker clusters replace this with a controller
 * on the metadata store (embedded or etcd).
 */
import { randomBytes } from 'node:crypto'
import { mkdir, open, readFile, rename } from 'node:fs/promises'
import { join } from 'node:path'
import { assert } from '../common/assert.js'
import type { Logger } from '../common/logger.js'
import {
  type BrokerRegistration,
  type ClusterImage,
  checkPartitionState,
  type PartitionState,
  type TopicImage,
} from './cluster-image.js'

const METADATA_FILE = '__tidelog_metadata.json'
const FORMAT_VERSION = 1

export interface NewTopic {
  readonly name: string
  readonly partitions: number
  readonly replicationFactor: number
  readonly configs: Readonly<Record<string, string>>
}

interface PersistedMetadata {
  version: number
  clusterId: string
  topics: TopicImage[]
  /** Dynamic broker configs by broker id ('' = cluster default); missing in older files. */
  brokerConfigs?: Record<string, Record<string, string>>
}

export type ImageListener = (image: ClusterImage, previous: ClusterImage) => void

export class LocalController {
  private current: ClusterImage
  private readonly listeners: ImageListener[] = []
  /** Serializes writes so each change persists before the next starts. */
  private writeChain: Promise<void> = Promise.resolve()

  private constructor(
    private readonly dir: string,
    image: ClusterImage,
    private readonly logger: Logger,
  ) {
    this.current = image
  }

  static async open(dir: string, broker: BrokerRegistration, clusterId: string | null, logger: Logger) {
    await mkdir(dir, { recursive: true })
    const persisted = await readPersisted(join(dir, METADATA_FILE))
    const image: ClusterImage = {
      clusterId: persisted?.clusterId ?? clusterId ?? newUuid(),
      controllerId: broker.nodeId,
      brokers: new Map([[broker.nodeId, broker]]),
      topics: new Map((persisted?.topics ?? []).map((t) => [t.name, t])),
      brokerConfigs: new Map(Object.entries(persisted?.brokerConfigs ?? {})),
    }
    if (clusterId !== null && persisted && persisted.clusterId !== clusterId) {
      throw new Error(`cluster.id ${clusterId} does not match ${persisted.clusterId} stored in ${dir}`)
    }
    const controller = new LocalController(dir, image, logger)
    if (!persisted) await controller.persist(image)
    return controller
  }

  image(): ClusterImage {
    return this.current
  }

  onChange(listener: ImageListener): void {
    this.listeners.push(listener)
  }

  /** Applies `change` to the latest image, persists it, then publishes it. */
  update(change: (image: ClusterImage) => ClusterImage): Promise<ClusterImage> {
    const result = this.writeChain.then(async () => {
      const previous = this.current
      const next = change(previous)
      if (next === previous) return previous
      for (const topic of next.topics.values())
        for (const p of topic.partitions) checkPartitionState(topic.name, p)
      await this.persist(next)
      this.current = next
      for (const listener of this.listeners) listener(next, previous)
      return next
    })
    this.writeChain = result.then(
      () => undefined,
      () => undefined,
    )
    return result
  }

  /** Placement on a single broker: every replica is this broker, which leads. */
  createTopicImage(spec: NewTopic): TopicImage {
    const nodeIds = [...this.current.brokers.keys()]
    assert(spec.replicationFactor <= nodeIds.length, 'replication factor above broker count')
    const partitions: PartitionState[] = []
    for (let partition = 0; partition < spec.partitions; partition++) {
      partitions.push(this.newPartition(partition, nodeIds, spec.replicationFactor))
    }
    return { name: spec.name, topicId: newUuid(), partitions, configs: { ...spec.configs } }
  }

  newPartition(partition: number, nodeIds: readonly number[], replicationFactor: number): PartitionState {
    const replicas: number[] = []
    for (let i = 0; i < replicationFactor; i++) replicas.push(nodeIds[(partition + i) % nodeIds.length])
    return { partition, replicas, isr: [...replicas], leader: replicas[0], leaderEpoch: 0, partitionEpoch: 0 }
  }

  private async persist(image: ClusterImage): Promise<void> {
    const data: PersistedMetadata = {
      version: FORMAT_VERSION,
      clusterId: image.clusterId,
      topics: [...image.topics.values()],
      brokerConfigs: Object.fromEntries(image.brokerConfigs ?? []),
    }
    const path = join(this.dir, METADATA_FILE)
    const temp = `${path}.tmp`
    const file = await open(temp, 'w')
    try {
      await file.writeFile(JSON.stringify(data))
      await file.sync()
    } finally {
      await file.close()
    }
    await rename(temp, path)
    this.logger.debug({ topics: data.topics.length }, 'cluster metadata persisted')
  }
}

async function readPersisted(path: string): Promise<PersistedMetadata | null> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw error
  }
  const data = JSON.parse(text) as PersistedMetadata
  if (data.version !== FORMAT_VERSION)
    throw new Error(`${path}: unknown metadata format version ${data.version}`)
  return data
}

/** A random Kafka Uuid (16 bytes, base64url), never the reserved zero or one ids. */
export function newUuid(): string {
  for (;;) {
    const bytes = randomBytes(16)
    const id = bytes.toString('base64url')
    if (id !== 'AAAAAAAAAAAAAAAAAAAAAA' && id !== 'AAAAAAAAAAAAAAAAAAAAAQ') return id
  }
}

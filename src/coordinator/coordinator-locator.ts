/**
 * FindCoordinator for a coordinator that lives on an internal topic (groups on
 * __consumer_offsets, transactions on __transaction_state): the topic is created on first
 * use, a key maps to one partition, and that partition's leader coordinates it.
 */
import type { Clock } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import { type BrokerId, NO_BROKER_ID } from '../common/types.js'
import { type ClusterImage, leaderServes } from '../metadata/cluster-image.js'
import { ErrorCode } from '../protocol/error-codes.js'

export interface CoordinatorLocation {
  readonly errorCode: number
  readonly errorMessage: string | null
  readonly nodeId: BrokerId
  readonly host: string
  readonly port: number
}

/** What one coordinator tells the locator about its topic and its shards. */
export interface CoordinatorTopic {
  readonly topic: string
  readonly nodeId: BrokerId
  readonly clock: Clock
  readonly logger: Logger
  metadataImage(): ClusterImage
  /** Creates the topic (once, shared by concurrent callers). */
  createTopic(): Promise<void>
  partitionFor(key: string, partitionCount: number): number
  /** True once this broker has loaded `partition`'s state. */
  isLoaded(partition: number): boolean
  isStopped(): boolean
}

/** How long FindCoordinator waits for a shard this broker is loading, to spare a client retry. */
const FIND_WAIT_MS = 3000
const FIND_POLL_MS = 25

export async function locateCoordinator(c: CoordinatorTopic, key: string): Promise<CoordinatorLocation> {
  const unavailable = (message: string): CoordinatorLocation => ({
    errorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    errorMessage: message,
    nodeId: NO_BROKER_ID,
    host: '',
    port: -1,
  })
  if (!c.metadataImage().topics.has(c.topic)) {
    try {
      await c.createTopic()
    } catch (error) {
      c.logger.warn({ err: error }, `creating ${c.topic} failed`)
      return unavailable(`${c.topic} could not be created`)
    }
  }
  const image = c.metadataImage()
  const topic = image.topics.get(c.topic)
  if (!topic) return unavailable(`${c.topic} does not exist yet`)
  const p = c.partitionFor(key, topic.partitions.length)
  const leader = topic.partitions[p].leader
  const broker = image.brokers.get(leader)
  if (!broker) return unavailable(`${c.topic}-${p} has no live leader`)
  // A coordinator still loading would answer COORDINATOR_LOAD_IN_PROGRESS, which some
  // clients (kafkajs's JoinGroup) do not retry at every step; COORDINATOR_NOT_AVAILABLE sends
  // them back to FindCoordinator, which every client retries.
  if (leader === c.nodeId) {
    await waitLoaded(c, p)
    if (!c.isLoaded(p)) return unavailable(`${c.topic}-${p} is still loading on its leader`)
  } else if (!leaderServes(image, topic, topic.partitions[p])) {
    // Another broker leads it but has not taken the role yet (a new topic, a failover): it
    // would answer COORDINATOR_LOAD_IN_PROGRESS (or NOT_COORDINATOR) to the client sent there.
    return unavailable(`${c.topic}-${p} is not served by its leader ${leader} yet`)
  }
  return {
    errorCode: ErrorCode.NONE,
    errorMessage: null,
    nodeId: broker.nodeId,
    host: broker.host,
    port: broker.port,
  }
}

async function waitLoaded(c: CoordinatorTopic, partition: number): Promise<void> {
  const deadline = c.clock.monotonicMs() + FIND_WAIT_MS
  while (!c.isLoaded(partition) && c.clock.monotonicMs() < deadline && !c.isStopped())
    await new Promise<void>((resolve) => c.clock.setTimeout(resolve, FIND_POLL_MS))
}

/**
 * What the topic admin APIs take and answer (topic-admin.ts): the requests, the per-topic
 * and per-partition outcomes with Kafka's error codes, and the errors a plan or a commit
 * fails with. Apart so handlers and callers read the contract without the controller.
 */
import type { Clock } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import { ErrorCode } from '../protocol/error-codes.js'
import type { BrokerId, TopicImage } from './cluster-image.js'
import { type ClusterMetadata, MetadataUpdateConflict } from './cluster-metadata.js'
import { MetadataStoreError } from './store/metadata-store.js'
import type { StaticBrokerConfig } from './topic-config.js'

/** Kafka's controller refuses user operations that would write more records than this. */
export const MAX_PARTITIONS_PER_REQUEST = 10000
/**
 * How long a Metadata request that auto-created topics waits for their leaders (it has no
 * timeout of its own); partitions not served by then answer LEADER_NOT_AVAILABLE.
 */
export const AUTO_CREATE_READY_WAIT_MS = 500

/** A per-topic or per-partition answer. */
export interface Outcome {
  readonly errorCode: number
  readonly errorMessage: string | null
}

export const OK: Outcome = { errorCode: ErrorCode.NONE, errorMessage: null }

/** A topic-level failure: a Kafka error code and Kafka's message. */
export class TopicAdminError extends Error {
  constructor(
    readonly errorCode: number,
    message: string,
  ) {
    super(message)
    this.name = 'TopicAdminError'
  }
}

/** The store did not commit a change: `outcome` answers whatever would have succeeded. */
export class CommitFailedError extends Error {
  constructor(
    readonly outcome: Outcome,
    cause: unknown,
  ) {
    super(outcome.errorMessage ?? 'metadata change not committed', { cause })
    this.name = 'CommitFailedError'
  }
}

/** The outcome of a change the store did not commit, or null for an error that is a bug. */
export function commitFailure(error: unknown): Outcome | null {
  if (error instanceof MetadataStoreError && error.code === 'TXN_TOO_LARGE')
    return {
      errorCode: ErrorCode.POLICY_VIOLATION,
      errorMessage: `Unable to perform excessively large batch operation: ${error.message}`,
    }
  if (error instanceof MetadataStoreError || error instanceof MetadataUpdateConflict)
    return {
      errorCode: ErrorCode.REQUEST_TIMED_OUT,
      errorMessage: `The metadata store did not commit the change: ${error.message}`,
    }
  return null
}

/** `outcomes` with every success replaced by `failed`. */
export function failSuccesses<T extends Outcome>(outcomes: readonly T[], failed: Outcome): T[] {
  return outcomes.map((o) => (o.errorCode === ErrorCode.NONE ? { ...o, ...failed } : o))
}

export interface CreatableTopic {
  readonly name: string
  /** -1: num.partitions (and then assignments must be empty). */
  readonly numPartitions: number
  /** -1: default.replication.factor. */
  readonly replicationFactor: number
  readonly assignments: readonly {
    readonly partitionIndex: number
    readonly brokerIds: readonly BrokerId[]
  }[]
  readonly configs: Readonly<Record<string, string | null>>
}

export interface CreatedTopic extends Outcome {
  readonly name: string
  /** The topic as created (as it would be, under validateOnly); absent on failure. */
  readonly topic?: TopicImage
}

export interface PartitionIncrease {
  readonly name: string
  readonly count: number
  /** One broker list per added partition, or null to place them. */
  readonly assignments: readonly (readonly BrokerId[])[] | null
}

export interface AdminOptions {
  readonly validateOnly: boolean
  /** The request's timeout; 0 or less answers without waiting for the leaders (Kafka's rule). */
  readonly timeoutMs: number
}

export interface DeletableTopic {
  /** Null: by id. */
  readonly name: string | null
  readonly topicId: string
}

export interface DeletedTopic extends Outcome {
  readonly name: string | null
  readonly topicId: string
}

export type ElectionType = 'preferred' | 'unclean'

export interface PartitionOutcome extends Outcome {
  readonly partition: number
}

export interface TopicPartitionOutcomes {
  readonly topic: string
  readonly partitions: readonly PartitionOutcome[]
}

export interface ReassignmentRequest {
  readonly name: string
  /** Null replicas cancel the reassignment in progress. */
  readonly partitions: readonly {
    readonly partitionIndex: number
    readonly replicas: readonly BrokerId[] | null
  }[]
}

/** Where a config resource's overrides live in the image. */
export type ConfigTarget =
  | { readonly kind: 'topic'; readonly topic: string }
  | { readonly kind: 'broker'; readonly key: string }
  | { readonly kind: 'client-metrics'; readonly name: string }
  | { readonly kind: 'group'; readonly groupId: string }

/** A resource's complete new overrides, validated by the caller's rules. */
export interface ConfigChange {
  readonly target: ConfigTarget
  readonly overrides: Readonly<Record<string, string>>
}

/** An internal topic created on first use (__consumer_offsets). */
export interface InternalTopic {
  readonly name: string
  readonly partitions: number
  /** Capped at the registered brokers, so a dev cluster smaller than the factor still works. */
  readonly replicationFactor: number
  readonly configs: Readonly<Record<string, string>>
}

export interface TopicAdminOptions {
  readonly metadata: ClusterMetadata
  readonly config: StaticBrokerConfig
  readonly clock: Clock
  readonly logger: Logger
}

export function excessiveBatch(): TopicAdminError {
  return new TopicAdminError(
    ErrorCode.POLICY_VIOLATION,
    'Unable to perform excessively large batch operation.',
  )
}

export function timedOut(): Outcome {
  return {
    errorCode: ErrorCode.REQUEST_TIMED_OUT,
    errorMessage: 'Timed out waiting for the leaders of the new partitions to serve them.',
  }
}

export function storageError(): Outcome {
  return {
    errorCode: ErrorCode.KAFKA_STORAGE_ERROR,
    errorMessage: 'A leader could not create a partition of the topic: its log directory failed.',
  }
}

export function failure(error: unknown): Outcome {
  if (!(error instanceof TopicAdminError)) throw error
  return { errorCode: error.errorCode, errorMessage: error.message }
}

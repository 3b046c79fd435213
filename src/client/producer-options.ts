/**
 * The producer's configuration: Kafka's property names and defaults, resolved and checked
 * once at construction so a bad value fails with InvalidArgumentError naming the property
 * (and, for idempotence, what to change), instead of misbehaving at the first send.
 */
import { ACKS_ALL, type Acks as WireAcks } from '../common/types.js'
import { CompressionType } from '../protocol/batch-header.js'
import type { ClientOptions, KafkaClient } from './client.js'
import { InvalidArgumentError } from './errors.js'
import { intOption, oneOf } from './options.js'
import type { Bytes, ProducerHeaders } from './producer-batch.js'

export interface ProducerRecord {
  topic: string
  partition?: number
  key?: Bytes | null
  value: Bytes | null
  /** An object, or a list of pairs when a key repeats. */
  headers?: ProducerHeaders
  /** CreateTime in ms since the epoch; default: when send() was called. */
  timestamp?: number
}

/** The broker's three acks, and 'all' for -1 as Kafka's clients spell it. */
export type Acks = WireAcks | 'all'
export type CompressionName = 'none' | 'gzip' | 'snappy' | 'lz4' | 'zstd'

/** A custom partitioner; return undefined to fall back to the default rules. */
export type PartitionerFn = (record: ProducerRecord, numPartitions: number) => number | undefined

export interface ProducerOptions extends Partial<ClientOptions> {
  /** Share an existing client's connections and metadata instead of opening new ones. */
  client?: KafkaClient
  /** acks (default 'all'): 0 no answer, 1 the leader wrote it, 'all'/-1 every ISR member has it. */
  acks?: Acks
  /** producer.type: 'async' (default) or 'sync' (one record at a time, each acknowledged before the next). */
  producerType?: 'sync' | 'async'
  /** batch.size in bytes (default 16384). */
  batchSize?: number
  /** linger.ms (default 5, Kafka 4's default). */
  lingerMs?: number
  /** compression.type (default 'none'). */
  compression?: CompressionName
  compressionLevel?: number
  /** retries (default 2147483647: bounded by deliveryTimeoutMs). */
  retries?: number
  /**
   * delivery.timeout.ms (default 120000, raised to linger.ms + request.timeout.ms when that
   * is more): send to acknowledgement or failure, retries included, queued or in flight.
   */
  deliveryTimeoutMs?: number
  /** max.in.flight.requests.per.connection (default 5). */
  maxInFlightRequestsPerConnection?: number
  /** max.request.size (default 1048576). */
  maxRequestSize?: number
  /** buffer.memory (default 33554432): bytes of records waiting to be acknowledged. */
  bufferMemory?: number
  /** max.block.ms (default 60000): longest send() waits for metadata or buffer space. */
  maxBlockMs?: number
  /** allow.auto.create.topics (default true), as the Java producer. */
  allowAutoTopicCreation?: boolean
  partitioner?: PartitionerFn
  /**
   * enable.idempotence: no duplicates and no reordering across retries (producer id and
   * sequence numbers). Default: on when acks is 'all' (and retries > 0), as in Kafka 3+;
   * off otherwise. `true` with acks other than 'all', retries 0 or more than 5 requests in
   * flight is a configuration error. When on by default, max.in.flight is capped at 5, and
   * a broker without InitProducerId turns it off (explicit `true` then fails the sends).
   */
  enableIdempotence?: boolean
  /**
   * transactional.id: makes the producer transactional (initTransactions, then
   * beginTransaction / send / sendOffsetsToTransaction / commitTransaction or
   * abortTransaction). A new producer with the same id fences the older one. Requires
   * idempotence (the acks=all default).
   */
  transactionalId?: string
  /** transaction.timeout.ms (default 60000): the coordinator aborts a transaction open longer. */
  transactionTimeoutMs?: number
  /**
   * The highest transaction version the producer uses (default 2). At 2 it uses version 2
   * (KIP-890 part 2) when the cluster finalized `transaction.version` 2; 1 keeps version 1's
   * requests (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn v4) whatever the cluster runs,
   * for tests and for comparing the two. Java has no such option.
   */
  transactionVersionMax?: 1 | 2
}

export interface ResolvedProducerOptions {
  readonly acks: WireAcks
  readonly producerType: 'sync' | 'async'
  readonly batchSize: number
  readonly lingerMs: number
  readonly compression: CompressionType
  readonly compressionLevel: number | undefined
  readonly retries: number
  readonly deliveryTimeoutMs: number
  readonly maxInFlight: number
  readonly maxRequestSize: number
  readonly bufferMemory: number
  readonly maxBlockMs: number
  readonly allowAutoTopicCreation: boolean
  readonly requestTimeoutMs: number
  readonly idempotent: boolean
  /** Whether the caller asked for idempotence (else it is the acks=all default). */
  readonly idempotenceExplicit: boolean
  readonly transactionalId: string | null
  readonly transactionTimeoutMs: number
  readonly transactionVersionMax: 1 | 2
}

const COMPRESSION: Readonly<Record<CompressionName, CompressionType>> = {
  none: CompressionType.None,
  gzip: CompressionType.Gzip,
  snappy: CompressionType.Snappy,
  lz4: CompressionType.Lz4,
  zstd: CompressionType.Zstd,
}

/** Added to request.timeout.ms on the client side so the broker's own REQUEST_TIMED_OUT arrives first. */
export const CLIENT_TIMEOUT_MARGIN_MS = 2000

/**
 * A batch must outlive its linger and one request, or it could expire before its answer
 * had a chance (Java's configureDeliveryTimeout): an explicit value below that is an error,
 * the default is raised to it.
 */
function deliveryTimeoutOption(
  value: number | undefined,
  lingerMs: number,
  requestTimeoutMs: number,
): number {
  const lingerAndRequestTimeoutMs = lingerMs + requestTimeoutMs
  const deliveryTimeoutMs = intOption('delivery.timeout.ms', value, 120000, 1)
  if (deliveryTimeoutMs >= lingerAndRequestTimeoutMs) return deliveryTimeoutMs
  if (value !== undefined)
    throw new InvalidArgumentError(
      `delivery.timeout.ms (${deliveryTimeoutMs}) must be at least linger.ms + request.timeout.ms (${lingerAndRequestTimeoutMs})`,
    )
  return lingerAndRequestTimeoutMs
}

/** Batches per partition in flight for an idempotent producer (what a broker caches per producer). */
export const IDEMPOTENT_IN_FLIGHT_MAX = 5

export function resolveProducerOptions(
  options: ProducerOptions,
  requestTimeoutMs: number,
): ResolvedProducerOptions {
  const acksOption = oneOf<Acks>('acks', options.acks, 'all', [0, 1, -1, 'all'])
  const acks = acksOption === 'all' ? ACKS_ALL : acksOption
  const retries = intOption('retries', options.retries, 2147483647, 0)
  let maxInFlight = intOption(
    'max.in.flight.requests.per.connection',
    options.maxInFlightRequestsPerConnection,
    5,
    1,
    1000,
  )
  // Only its type: undefined (the default) and false differ below.
  booleanOption('enable.idempotence', options.enableIdempotence, false)
  let idempotent: boolean
  if (options.enableIdempotence === true) {
    if (acks !== ACKS_ALL) {
      throw new InvalidArgumentError(
        `enable.idempotence requires acks='all', got ${String(acksOption)}; set enableIdempotence: false or acks: 'all'`,
      )
    }
    if (retries === 0) throw new InvalidArgumentError('enable.idempotence requires retries > 0')
    if (maxInFlight > IDEMPOTENT_IN_FLIGHT_MAX) {
      throw new InvalidArgumentError(
        `enable.idempotence requires max.in.flight.requests.per.connection <= ${IDEMPOTENT_IN_FLIGHT_MAX}, got ${maxInFlight}`,
      )
    }
    idempotent = true
  } else {
    // Kafka 3+: on by default unless acks or retries conflict.
    idempotent = options.enableIdempotence === undefined && acks === ACKS_ALL && retries > 0
    if (idempotent) maxInFlight = Math.min(maxInFlight, IDEMPOTENT_IN_FLIGHT_MAX)
  }
  const transactionalId = options.transactionalId ?? null
  if (transactionalId !== null) {
    if (typeof transactionalId !== 'string' || transactionalId === '')
      throw new InvalidArgumentError('transactional.id must be a non-empty string')
    // Java: "Cannot set a transactional.id without also enabling idempotence."
    if (!idempotent)
      throw new InvalidArgumentError(
        `transactional.id requires idempotence: acks='all', retries > 0 and enableIdempotence not false`,
      )
  }
  if (options.partitioner !== undefined && typeof options.partitioner !== 'function') {
    throw new InvalidArgumentError(`partitioner must be a function, got ${typeof options.partitioner}`)
  }
  const lingerMs = intOption('linger.ms', options.lingerMs, 5, 0)
  const deliveryTimeoutMs = deliveryTimeoutOption(options.deliveryTimeoutMs, lingerMs, requestTimeoutMs)
  return {
    acks,
    producerType: oneOf('producer.type', options.producerType, 'async', ['sync', 'async']),
    batchSize: intOption('batch.size', options.batchSize, 16384, 0),
    lingerMs,
    compression:
      COMPRESSION[
        oneOf<CompressionName>(
          'compression.type',
          options.compression,
          'none',
          Object.keys(COMPRESSION) as CompressionName[],
        )
      ],
    compressionLevel: compressionLevel(options.compressionLevel),
    retries,
    deliveryTimeoutMs,
    maxInFlight,
    maxRequestSize: intOption('max.request.size', options.maxRequestSize, 1048576, 1),
    bufferMemory: intOption('buffer.memory', options.bufferMemory, 33554432, 1),
    maxBlockMs: intOption('max.block.ms', options.maxBlockMs, 60000, 0),
    allowAutoTopicCreation: booleanOption('allow.auto.create.topics', options.allowAutoTopicCreation, true),
    requestTimeoutMs,
    idempotent,
    // A transactional producer fails rather than fall back to plain sends.
    idempotenceExplicit: options.enableIdempotence === true || transactionalId !== null,
    transactionalId,
    transactionTimeoutMs: intOption('transaction.timeout.ms', options.transactionTimeoutMs, 60000, 1),
    transactionVersionMax: transactionVersionMax(options.transactionVersionMax),
  }
}

function transactionVersionMax(value: number | undefined): 1 | 2 {
  if (value === undefined || value === 2) return 2
  if (value === 1) return 1
  throw new InvalidArgumentError(`transactionVersionMax must be 1 or 2, got ${String(value)}`)
}

function booleanOption(name: string, value: boolean | undefined, defaultValue: boolean): boolean {
  if (value !== undefined && typeof value !== 'boolean')
    throw new InvalidArgumentError(`${name} must be a boolean, got ${String(value)}`)
  return value ?? defaultValue
}

/** compression.level: each codec checks its own range; here only that it is an integer. */
function compressionLevel(value: number | undefined): number | undefined {
  if (value !== undefined && !Number.isSafeInteger(value))
    throw new InvalidArgumentError(`compression.level must be an integer, got ${String(value)}`)
  return value
}

/**
 * Numbers that mean different things get types of their own (as Redpanda's model::offset
 * and model::term_id), so that an epoch cannot be passed where an offset goes, nor a
 * broker id where a partition epoch goes. The brand exists for the compiler only: at run
 * time each is a plain number or bigint, with no cost on the hot path.
 *
 * A value gets its brand from its source (a getter of the log, the epoch cache, a decoded
 * checkpoint) or through the constructors below, which assert the range (a bug otherwise).
 * Numbers from the network are checked by the code that receives them and answered with a
 * Kafka error code; they are cast with `as` only once that check is the receiver's job.
 *
 * Kafka's -1 ("none": no offset, no epoch, no leader, no producer) is a valid value of
 * each type, as it is on the wire.
 */
import { assert } from './assert.js'

/**
 * int64 on the wire; a JS number here. Exact up to 2^53, which one partition's log does
 * not reach (2^53 records at a million a second is 285 years), and number arithmetic and
 * comparisons keep the append and fetch paths free of bigint allocation.
 */
export type Offset = number & { readonly __brand: 'Offset' }

/** int32 on the wire: a number holds every value exactly. */
export type LeaderEpoch = number & { readonly __brand: 'LeaderEpoch' }

/** int32 on the wire (Kafka's partitionEpoch, the ISR compare-and-set guard): a number. */
export type PartitionEpoch = number & { readonly __brand: 'PartitionEpoch' }

/** int32 on the wire (node.id): a number. */
export type BrokerId = number & { readonly __brand: 'BrokerId' }

/**
 * int64 on the wire, and a bigint here: unlike an offset, it is not a count bounded by one
 * log's growth but an identifier from the controller's blocks that clients echo back in
 * every batch, with no bound below 2^63; batch headers already decode it as a bigint
 * (protocol/batch-header.ts).
 */
export type ProducerId = bigint & { readonly __brand: 'ProducerId' }

/**
 * A produce request's required acks, as the broker takes them: -1 waits for the whole ISR
 * (clients call it "all"), 1 for the leader's append, 0 for nothing (no response). Any other
 * number from the wire is answered INVALID_REQUIRED_ACKS, so it never gets this type.
 */
export type Acks = -1 | 0 | 1

/** acks=all: the high watermark must pass the records (min.insync.replicas checked first). */
export const ACKS_ALL = -1 satisfies Acks
/** acks=1: answered after the leader's own append. */
export const ACKS_LEADER = 1 satisfies Acks
/** acks=0: no response at all. */
export const ACKS_NONE = 0 satisfies Acks

/** Whether a number from the wire is one of the three acks Kafka accepts. */
export function isAcks(value: number): value is Acks {
  return value === ACKS_ALL || value === ACKS_LEADER || value === ACKS_NONE
}

/** Kafka's -1 for "no offset" (an empty append's first offset, an unknown epoch's end). */
export const NO_OFFSET = -1 as Offset

const INT32_MAX = 0x7fffffff
const INT64_MAX = 2n ** 63n - 1n

/** An offset computed by core code: a safe integer, at least -1. */
export function toOffset(value: number): Offset {
  assert(Number.isSafeInteger(value) && value >= -1, () => `not an offset: ${value}`)
  return value as Offset
}

/**
 * An offset a request carries (a fetch position, a reset target): any int64, unchecked on
 * purpose, as `producerIdFromWire` is. The receiver compares it with the log's bounds and
 * answers OFFSET_OUT_OF_RANGE (or the API's error) as Kafka does; an assertion here would
 * turn a client's bad value into a broker bug. Named rather than cast so that every place an
 * offset enters from the wire can be found.
 */
export function offsetFromWire(value: number | bigint): Offset {
  return Number(value) as Offset
}

export function isOffset(value: number): value is Offset {
  return Number.isSafeInteger(value) && value >= -1
}

/** Offset 0: where a new log, and a follower's view of a leader it has not fetched from, start. */
export const FIRST_OFFSET = 0 as Offset

/**
 * The offset after `offset` (a batch's last offset + 1 is the next batch's base, a log end
 * is its last offset + 1): arithmetic on an offset that is already checked, so no assertion.
 */
export function nextOffset(offset: Offset): Offset {
  return (offset + 1) as Offset
}

/**
 * The offset `delta` records after `base`: a batch's base offset plus a record's offsetDelta
 * or the batch's lastOffsetDelta (non-negative int32s of a batch the log holds). Arithmetic
 * on an offset that is already checked, so no assertion, as nextOffset.
 */
export function offsetAfter(base: Offset, delta: number): Offset {
  return (base + delta) as Offset
}

/** The larger of two offsets (Math.max would drop the brand). */
export function maxOffset(a: Offset, b: Offset): Offset {
  return (a > b ? a : b) as Offset
}

/** The smaller of two offsets (Math.min would drop the brand). */
export function minOffset(a: Offset, b: Offset): Offset {
  return (a < b ? a : b) as Offset
}

/** A leader epoch: an int32, at least -1. */
export function toLeaderEpoch(value: number): LeaderEpoch {
  assert(isInt32AtLeastNone(value), () => `not a leader epoch: ${value}`)
  return value as LeaderEpoch
}

/** A partition epoch: an int32, at least -1. */
export function toPartitionEpoch(value: number): PartitionEpoch {
  assert(isInt32AtLeastNone(value), () => `not a partition epoch: ${value}`)
  return value as PartitionEpoch
}

/** Kafka's -1 for "no broker": no leader, no controller, a consumer's replica id. */
export const NO_BROKER_ID = -1 as BrokerId

/** A broker id (node.id): an int32, at least -1 (no leader). */
export function toBrokerId(value: number): BrokerId {
  assert(isBrokerId(value), () => `not a broker id: ${value}`)
  return value as BrokerId
}

/** Whether a decoded number (the metadata store's JSON, a config value) is a broker id. */
export function isBrokerId(value: number): value is BrokerId {
  return isInt32AtLeastNone(value)
}

/**
 * A broker id a request carries (a fetch's replica id, a manual assignment's or a
 * reassignment's replicas): any int32, unchecked on purpose, as `producerIdFromWire` is. The
 * receiver looks it up among the registered brokers or the partition's replicas: an
 * assignment naming an unregistered broker is answered INVALID_REPLICA_ASSIGNMENT, a fetch
 * from a replica the partition does not have moves no follower state. An assertion here
 * would turn a client's bad value into a broker bug. Named rather than cast so that every
 * place a broker id enters from the wire can be found.
 */
export function brokerIdFromWire(value: number): BrokerId {
  return value as BrokerId
}

/** Kafka's -1 for "no producer" (a batch that is not idempotent, an id not yet assigned). */
export const NO_PRODUCER_ID = -1n as ProducerId

/**
 * A producer id a request carries: any int64, unchecked on purpose. The receiver (the
 * transaction coordinator, the producer state) compares it with the id it holds and answers
 * a mismatch with a Kafka error code (INVALID_PRODUCER_ID_MAPPING, UNKNOWN_PRODUCER_ID), as
 * Kafka does; an assertion here would turn a client's bad value into a broker bug. Named
 * rather than cast so that every place a producer id enters from the wire can be found.
 */
export function producerIdFromWire(value: bigint): ProducerId {
  return value as ProducerId
}

/** A producer id: a non-negative int64, or -1 for none. */
export function toProducerId(value: bigint): ProducerId {
  assert(isProducerId(value), () => `not an int64 producer id: ${value}`)
  return value as ProducerId
}

export function isProducerId(value: bigint): value is ProducerId {
  return value >= -1n && value <= INT64_MAX
}

function isInt32AtLeastNone(value: number): boolean {
  return Number.isInteger(value) && value >= -1 && value <= INT32_MAX
}

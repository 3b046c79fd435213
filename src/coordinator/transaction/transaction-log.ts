/**
 * The records of `__transaction_state` in Kafka's own formats (transaction-coordinator
 * message schemas TransactionLogKey and TransactionLogValue), so Kafka's tools could read a
 * tidelog transaction log and the other way round. The key is version 0 and the
 * transactional id; a null value is a tombstone (the id expired). We write value version 0
 * for a transaction of the classic protocol and version 1 (flexible, with tagged previous
 * and next producer ids and the client's transaction version) for one of transaction
 * version 2, whose next producer id and version a new coordinator must know to complete it;
 * both are read. (Kafka picks the value version by the finalized `transaction.version`.)
 */
import { TidelogError } from '../../common/errors.js'
import { isProducerId, type ProducerId } from '../../common/types.js'
import { Reader, Writer } from '../../protocol/primitives.js'
import {
  isTransactionState,
  listPartitions,
  NO_PRODUCER_ID,
  type TopicPartitions,
  TransactionState,
  type TransactionVersion,
  TV_0,
  transactionVersionOf,
} from './transaction-metadata.js'

export const TRANSACTION_STATE_TOPIC = '__transaction_state'

const KEY_VERSION = 0
const VALUE_VERSION = 0
const FLEXIBLE_VALUE_VERSION = 1
const TAG_PREVIOUS_PRODUCER_ID = 0
const TAG_NEXT_PRODUCER_ID = 1
const TAG_CLIENT_TRANSACTION_VERSION = 2

/** What a `__transaction_state` value holds (the in-memory last epoch is not persisted). */
export interface TransactionLogValue {
  readonly producerId: ProducerId
  /** Version 1 only (tagged); -1 otherwise. */
  readonly previousProducerId: ProducerId
  readonly nextProducerId: ProducerId
  readonly producerEpoch: number
  readonly txnTimeoutMs: number
  readonly state: TransactionState
  readonly partitions: TopicPartitions
  readonly txnLastUpdateTimestampMs: number
  readonly txnStartTimestampMs: number
  readonly clientTransactionVersion: TransactionVersion
}

/** A __transaction_state record this version cannot read (an operating error, not a Kafka code). */
export class TransactionLogFormatError extends TidelogError {
  constructor(message: string) {
    super('ERR_TRANSACTION_LOG_FORMAT', message)
    this.name = 'TransactionLogFormatError'
  }
}

export function encodeTransactionLogKey(transactionalId: string): Buffer {
  return new Writer(32).writeInt16(KEY_VERSION).writeString(transactionalId).toBuffer()
}

/** The transactional id of a key; undefined for a key version this broker does not know. */
export function decodeTransactionLogKey(key: Buffer): string | undefined {
  const r = new Reader(key)
  if (r.readInt16() !== KEY_VERSION) return undefined
  return r.readString()
}

/**
 * Value version 0, or 1 for transaction version 2 (or a next producer id to keep).
 * PrepareEpochFence is never written: it is the in-memory step before a coordinator's own
 * abort.
 */
export function encodeTransactionLogValue(
  value: Omit<TransactionLogValue, 'previousProducerId' | 'nextProducerId' | 'clientTransactionVersion'> &
    Partial<TransactionLogValue>,
): Buffer {
  if (value.state === TransactionState.PrepareEpochFence || value.state === TransactionState.Dead)
    throw new TransactionLogFormatError(`state ${value.state} is never written as a value`)
  const clientTransactionVersion = value.clientTransactionVersion ?? TV_0
  const nextProducerId = value.nextProducerId ?? NO_PRODUCER_ID
  if (clientTransactionVersion >= 2 || nextProducerId !== NO_PRODUCER_ID)
    return encodeFlexibleValue({
      ...value,
      previousProducerId: value.previousProducerId ?? NO_PRODUCER_ID,
      nextProducerId,
      clientTransactionVersion,
    })
  const w = new Writer(64)
    .writeInt16(VALUE_VERSION)
    .writeInt64(value.producerId)
    .writeInt16(value.producerEpoch)
    .writeInt32(value.txnTimeoutMs)
    .writeInt8(value.state)
  const partitions = listPartitions(value.partitions)
  w.writeArrayLength(partitions.length)
  for (const entry of partitions) {
    w.writeString(entry.topic)
    w.writeArrayLength(entry.partitions.length)
    for (const partition of entry.partitions) w.writeInt32(partition)
  }
  return w
    .writeInt64(BigInt(value.txnLastUpdateTimestampMs))
    .writeInt64(BigInt(value.txnStartTimestampMs))
    .toBuffer()
}

/** Value version 1: compact arrays and strings, tagged fields only where not the default. */
function encodeFlexibleValue(value: TransactionLogValue): Buffer {
  const w = new Writer(64)
    .writeInt16(FLEXIBLE_VALUE_VERSION)
    .writeInt64(value.producerId)
    .writeInt16(value.producerEpoch)
    .writeInt32(value.txnTimeoutMs)
    .writeInt8(value.state)
  const partitions = listPartitions(value.partitions)
  w.writeCompactArrayLength(partitions.length)
  for (const entry of partitions) {
    w.writeCompactString(entry.topic)
    w.writeCompactArrayLength(entry.partitions.length)
    for (const partition of entry.partitions) w.writeInt32(partition)
    w.writeUnsignedVarint(0)
  }
  w.writeInt64(BigInt(value.txnLastUpdateTimestampMs)).writeInt64(BigInt(value.txnStartTimestampMs))
  const tagged = [
    value.previousProducerId !== NO_PRODUCER_ID,
    value.nextProducerId !== NO_PRODUCER_ID,
    value.clientTransactionVersion !== TV_0,
  ]
  w.writeUnsignedVarint(tagged.filter(Boolean).length)
  // In tag order, each with its size in bytes.
  if (tagged[0])
    w.writeUnsignedVarint(TAG_PREVIOUS_PRODUCER_ID)
      .writeUnsignedVarint(8)
      .writeInt64(value.previousProducerId)
  if (tagged[1])
    w.writeUnsignedVarint(TAG_NEXT_PRODUCER_ID).writeUnsignedVarint(8).writeInt64(value.nextProducerId)
  if (tagged[2])
    w.writeUnsignedVarint(TAG_CLIENT_TRANSACTION_VERSION)
      .writeUnsignedVarint(2)
      .writeInt16(value.clientTransactionVersion)
  return w.toBuffer()
}

export function decodeTransactionLogValue(value: Buffer): TransactionLogValue {
  const r = new Reader(value)
  const version = r.readInt16()
  if (version !== VALUE_VERSION && version !== FLEXIBLE_VALUE_VERSION)
    throw new TransactionLogFormatError(`unknown __transaction_state value version ${version}`)
  const flexible = version === FLEXIBLE_VALUE_VERSION
  const producerId = readProducerId(r)
  const producerEpoch = r.readInt16()
  const txnTimeoutMs = r.readInt32()
  const state = r.readInt8()
  if (!isTransactionState(state)) throw new TransactionLogFormatError(`unknown transaction state ${state}`)
  const arrayLength = (): number => (flexible ? r.readCompactArrayLength() : r.readArrayLength())
  const partitions = new Map<string, Set<number>>()
  const topics = arrayLength()
  for (let i = 0; i < topics; i++) {
    const topic = flexible ? r.readCompactString() : r.readString()
    const count = arrayLength()
    const ids = partitions.get(topic) ?? new Set<number>()
    for (let j = 0; j < count; j++) ids.add(r.readInt32())
    partitions.set(topic, ids)
    if (flexible) skipTaggedFields(r)
  }
  const txnLastUpdateTimestampMs = Number(r.readInt64())
  const txnStartTimestampMs = Number(r.readInt64())
  let previousProducerId = NO_PRODUCER_ID
  let nextProducerId = NO_PRODUCER_ID
  let clientTransactionVersion: TransactionVersion = TV_0
  if (flexible) {
    const tags = r.readUnsignedVarint()
    for (let i = 0; i < tags; i++) {
      const tag = r.readUnsignedVarint()
      const size = r.readUnsignedVarint()
      const start = r.offset
      if (tag === TAG_PREVIOUS_PRODUCER_ID) previousProducerId = readProducerId(r)
      else if (tag === TAG_NEXT_PRODUCER_ID) nextProducerId = readProducerId(r)
      else if (tag === TAG_CLIENT_TRANSACTION_VERSION)
        clientTransactionVersion = transactionVersionOf(r.readInt16())
      r.offset = start + size
    }
  }
  return {
    producerId,
    previousProducerId,
    nextProducerId,
    producerEpoch,
    txnTimeoutMs,
    state,
    partitions,
    txnLastUpdateTimestampMs,
    txnStartTimestampMs,
    clientTransactionVersion,
  }
}

function skipTaggedFields(r: Reader): void {
  const count = r.readUnsignedVarint()
  for (let i = 0; i < count; i++) {
    r.readUnsignedVarint()
    r.skipTaggedField()
  }
}

/** A producer id from __transaction_state: out of range is a bad record, as an unknown state. */
function readProducerId(r: Reader): ProducerId {
  const value = r.readInt64()
  if (!isProducerId(value)) throw new TransactionLogFormatError(`producer id ${value} out of range`)
  return value
}

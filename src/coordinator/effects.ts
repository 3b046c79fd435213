/**
 * What a step of the coordinator state machine asks of its runtime: records to append to
 * the group's __consumer_offsets partition, replies to parked requests ("waiters"), and
 * what to do once the records are committed or failed. Replies in `replies` never depend on
 * the records; anything that does is produced by `afterAppend`.
 */
import { assert } from '../common/assert.js'
import type { Offset } from '../common/types.js'
import type { CoordinatorRecord } from './records.js'
import type { TransactionalProducer } from './runtime/coordinator-runtime.js'

export interface JoinResult {
  readonly errorCode: number
  readonly generationId: number
  readonly protocolType: string | null
  readonly protocolName: string | null
  readonly leader: string
  readonly memberId: string
  readonly skipAssignment: boolean
  readonly members: readonly { memberId: string; groupInstanceId: string | null; metadata: Buffer }[]
}

export interface SyncResult {
  readonly errorCode: number
  readonly protocolType: string | null
  readonly protocolName: string | null
  readonly assignment: Buffer
}

/** Heartbeat, LeaveGroup, DeleteGroups: an error code only. */
export interface CodeResult {
  readonly errorCode: number
}

/** OffsetCommit / OffsetDelete: one code per topic-partition ("topic\0partition"). */
export interface PartitionCodesResult {
  readonly errorCode: number
  readonly partitions: ReadonlyMap<string, number>
}

/** ConsumerGroupHeartbeat (consumer-group.ts's ConsumerHeartbeatResult, kept structural here). */
export interface ConsumerHeartbeatReply {
  readonly errorCode: number
  readonly errorMessage: string | null
  readonly memberId: string | null
  readonly memberEpoch: number
  readonly heartbeatIntervalMs: number
  readonly assignment: { topicId: string; partitions: readonly number[] }[] | null
}

export type WaiterResponse =
  | JoinResult
  | SyncResult
  | CodeResult
  | PartitionCodesResult
  | ConsumerHeartbeatReply

export interface Reply {
  readonly waiter: number
  readonly response: WaiterResponse
}

/** The producer a transactional offset commit's batch is written as (TxnOffsetCommit). */
export type { TransactionalProducer }

export interface Effects {
  readonly records: readonly CoordinatorRecord[]
  readonly replies: readonly Reply[]
  /**
   * Write `records` as one transactional batch of this producer (its COMMIT or ABORT marker
   * ends it in the log); absent for the coordinator's own, non-transactional records.
   */
  readonly transactional?: TransactionalProducer
  /**
   * Called once with NONE when the records are committed, or the error that failed them;
   * `baseOffset` is where their batch starts in __consumer_offsets (-1 if never appended).
   */
  readonly afterAppend?: (errorCode: number, nowMs: number, baseOffset: Offset) => Effects
}

export const NO_EFFECTS: Effects = { records: [], replies: [] }

export function reply(waiter: number, response: WaiterResponse): Effects {
  return { records: [], replies: [{ waiter, response }] }
}

/** Both effects, in order; their afterAppend callbacks (at most one may have one) kept. */
export function combine(a: Effects, b: Effects): Effects {
  // A transactional batch holds one producer's records only.
  assert(a.transactional === undefined && b.transactional === undefined, 'combining transactional effects')
  if (a.afterAppend && b.afterAppend) {
    const first = a.afterAppend
    const second = b.afterAppend
    return {
      records: [...a.records, ...b.records],
      replies: [...a.replies, ...b.replies],
      afterAppend: (code, now, baseOffset) =>
        combine(first(code, now, baseOffset), second(code, now, baseOffset)),
    }
  }
  const afterAppend = a.afterAppend ?? b.afterAppend
  return {
    records: [...a.records, ...b.records],
    replies: [...a.replies, ...b.replies],
    ...(afterAppend ? { afterAppend } : {}),
  }
}

export function joinError(errorCode: number, memberId: string): JoinResult {
  return {
    errorCode,
    generationId: -1,
    protocolType: null,
    protocolName: null,
    leader: '',
    memberId,
    skipAssignment: false,
    members: [],
  }
}

export function syncError(errorCode: number): SyncResult {
  return { errorCode, protocolType: null, protocolName: null, assignment: Buffer.alloc(0) }
}

export function topicPartitionKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`
}

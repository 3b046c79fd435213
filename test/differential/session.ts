/**
 * Recorded client sessions as differential inputs (issue 32, item 3): each request of a
 * session file (recorder.ts) becomes a harness step, sent as the client sent it (same API,
 * version and body) to tidelog and to Kafka 4.4 in the order the proxy received it, and the
 * answers are compared with the harness's normalisation like any other sequence's.
 *
 * What differs between two brokers by nature is rewritten per target before sending, from
 * what that target answered earlier in the replay, paired with what the recorded broker
 * answered at the same place: producer ids and epochs (InitProducerId; also inside the
 * produced batches' headers, whose CRC is then recomputed), member ids and generations
 * (JoinGroup, ConsumerGroupHeartbeat), fetch session ids (Fetch), client instance and
 * subscription ids (GetTelemetrySubscriptions), and topic ids (by the topic's name, from any
 * answer naming both). Record timestamps (batch headers, and
 * ListOffsets by time) move by the time between recording and replay, the same for both
 * targets, so that a session replayed long after its recording is not a retention test.
 * Fetch waits are cut to 100 ms: requests go one at a time, so a consumer's long poll would
 * only hold the replay up. Requests the broker never answered (in flight when the client hung
 * up) are not replayed; acks=0 produces are, as the harness's noResponse steps.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  ATTRIBUTES_OFFSET,
  BASE_TIMESTAMP_OFFSET,
  BATCH_LENGTH_OFFSET,
  CRC_OFFSET,
  LOG_OVERHEAD,
  MAGIC_OFFSET,
  MAX_TIMESTAMP_OFFSET,
  PRODUCER_EPOCH_OFFSET,
  PRODUCER_ID_OFFSET,
  TIMESTAMP_TYPE_MASK,
} from '../../src/protocol/batch-header.js'
import { crc32c } from '../../src/protocol/crc32c.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey, apis, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { decodeRequestHeader } from '../../src/protocol/generated/request-header.js'
import { decodeResponseHeader } from '../../src/protocol/generated/response-header.js'
import { Reader, ZERO_UUID } from '../../src/protocol/primitives.js'
import { repoRoot } from '../helpers/compat-clients.js'
import { errorName, type Sequence, type Step, type TargetContext, TRANSIENT_ERROR_CODES } from './harness.js'
import type { RecordedExchange, SessionHeader } from './recorder.js'

await loadAllApiCodecs()

/** The longest Fetch wait a replayed request keeps. */
const REPLAY_FETCH_WAIT_MS = 100

export interface RecordedSession {
  readonly header: SessionHeader
  readonly exchanges: readonly RecordedExchange[]
}

export function readSession(path: string): RecordedSession {
  const lines = readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
  const first = JSON.parse(lines[0]) as { session?: SessionHeader }
  if (!first.session) throw new Error(`${path}: the first line is not a session header`)
  return {
    header: first.session,
    exchanges: lines.slice(1).map((line) => JSON.parse(line) as RecordedExchange),
  }
}

/**
 * Values that differ by nature, by kind: the field names carrying them in requests and
 * answers. A target's value is learned where its answer and the recorded one hold the field
 * at the same place; a request's recorded value is then replaced by the target's.
 */
const SUBSTITUTED_FIELDS: Readonly<Record<string, string>> = {
  producerId: 'producer',
  producerEpoch: 'producer epoch',
  // AddPartitionsToTxn v0-3 names them so.
  v3AndBelowProducerId: 'producer',
  v3AndBelowProducerEpoch: 'producer epoch',
  ongoingTxnProducerId: 'producer',
  ongoingTxnProducerEpoch: 'producer epoch',
  memberId: 'member',
  leader: 'member',
  generationId: 'generation',
  generationIdOrMemberEpoch: 'generation',
  memberEpoch: 'member epoch',
  sessionId: 'session',
  clientInstanceId: 'client instance',
  subscriptionId: 'subscription',
  // ApiVersions v5 (the Java client 4.4) names the cluster and node it means to reach, as the
  // Metadata answers said; a broker of another cluster answers REBOOTSTRAP_REQUIRED.
  clusterId: 'cluster',
  nodeId: 'node',
}

/** A target's substitutions for one session: `kind:recorded value` to the target's value. */
type Substitutions = Map<string, unknown>

function substitutions(ctx: TargetContext, session: string): Substitutions {
  const key = `session ${session}`
  let map = ctx.vars.get(key) as Substitutions | undefined
  if (!map) ctx.vars.set(key, (map = new Map()))
  return map
}

/** Whether a value of this kind is a real one (not "none yet": -1, 0, empty). */
function isValue(kind: string, value: unknown): boolean {
  if (typeof value === 'bigint') return value >= 0n
  if (typeof value === 'string') return value !== '' && value !== ZERO_UUID
  if (typeof value !== 'number') return false
  // Session and subscription ids are any int32 but 0 (0: none).
  return kind === 'session' || kind === 'subscription' ? value !== 0 : value >= 0
}

/** Pairs the recorded answer with the target's, field by field, and learns what differs. */
function learn(recorded: unknown, target: unknown, into: Substitutions): void {
  if (Array.isArray(recorded) && Array.isArray(target)) {
    for (let i = 0; i < Math.min(recorded.length, target.length); i++) learn(recorded[i], target[i], into)
    return
  }
  if (!isStruct(recorded) || !isStruct(target)) return
  for (const [field, value] of Object.entries(recorded)) {
    const kind = SUBSTITUTED_FIELDS[field]
    if (kind !== undefined) {
      if (isValue(kind, value) && typeof target[field] === typeof value)
        into.set(`${kind}:${String(value)}`, target[field])
    } else learn(value, target[field], into)
  }
}

function isStruct(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && !Buffer.isBuffer(value)
}

/** What a replay needs besides the target's substitutions: the same for both targets. */
interface ReplayShared {
  readonly session: string
  /** Topic name by the recorded broker's topic id. */
  readonly recordedTopicNames: ReadonlyMap<string, string>
  /** Added to every record timestamp: the time between recording and replay. */
  readonly shiftMs: bigint
}

/** The request body for one target: the recorded one with this target's values. */
function rewrite(
  value: unknown,
  field: string,
  apiKey: number,
  ctx: TargetContext,
  shared: ReplayShared,
): unknown {
  const subs = substitutions(ctx, shared.session)
  const kind = SUBSTITUTED_FIELDS[field]
  if (kind !== undefined) {
    // OffsetCommit v9+ carries a classic generation or a KIP-848 member epoch in one field.
    const kinds = field === 'generationIdOrMemberEpoch' ? [kind, 'member epoch'] : [kind]
    const known = kinds.map((k) => `${k}:${String(value)}`).find((key) => subs.has(key))
    return known === undefined ? value : subs.get(known)
  }
  if (field === 'topicId' && typeof value === 'string' && value !== ZERO_UUID) {
    const name = shared.recordedTopicNames.get(value)
    return name === undefined ? value : (ctx.topicIds.get(name) ?? value)
  }
  if (field === 'records' && Buffer.isBuffer(value) && apiKey === ApiKey.Produce)
    return rewriteBatches(value, subs, shared.shiftMs)
  if (field === 'maxWaitMs' && apiKey === ApiKey.Fetch && typeof value === 'number')
    return Math.min(value, REPLAY_FETCH_WAIT_MS)
  if (field === 'timestamp' && apiKey === ApiKey.ListOffsets && typeof value === 'bigint' && value >= 0n)
    return value + shared.shiftMs
  if (Array.isArray(value)) return value.map((item) => rewrite(item, '', apiKey, ctx, shared))
  if (isStruct(value)) {
    const out: Record<string, unknown> = {}
    for (const [name, inner] of Object.entries(value)) out[name] = rewrite(inner, name, apiKey, ctx, shared)
    return out
  }
  return value
}

/**
 * A copy of produced batches with this target's producer id and epoch and shifted
 * timestamps (records hold deltas from the batch's base timestamp, so the header is all that
 * changes), each CRC-32C computed again over attributes..end.
 */
function rewriteBatches(records: Buffer, subs: Substitutions, shiftMs: bigint): Buffer {
  const out = Buffer.from(records)
  for (let at = 0; at + LOG_OVERHEAD <= out.length; ) {
    const size = LOG_OVERHEAD + out.readInt32BE(at + BATCH_LENGTH_OFFSET)
    if (at + size > out.length || out[at + MAGIC_OFFSET] !== 2) break
    const producerId = out.readBigInt64BE(at + PRODUCER_ID_OFFSET)
    const id = subs.get(`producer:${producerId}`)
    if (typeof id === 'bigint') out.writeBigInt64BE(id, at + PRODUCER_ID_OFFSET)
    const epoch = subs.get(`producer epoch:${out.readInt16BE(at + PRODUCER_EPOCH_OFFSET)}`)
    if (typeof id === 'bigint' && typeof epoch === 'number')
      out.writeInt16BE(epoch, at + PRODUCER_EPOCH_OFFSET)
    if ((out.readInt16BE(at + ATTRIBUTES_OFFSET) & TIMESTAMP_TYPE_MASK) === 0) {
      for (const offset of [BASE_TIMESTAMP_OFFSET, MAX_TIMESTAMP_OFFSET]) {
        const ts = out.readBigInt64BE(at + offset)
        if (ts >= 0n) out.writeBigInt64BE(ts + shiftMs, at + offset)
      }
    }
    out.writeUInt32BE(crc32c(out.subarray(at + ATTRIBUTES_OFFSET, at + size)), at + CRC_OFFSET)
    at += size
  }
  return out
}

/** Topic name by id in any answer struct holding both. */
function topicNamesOf(value: unknown, into: Map<string, string>): void {
  if (Array.isArray(value)) for (const item of value) topicNamesOf(item, into)
  else if (isStruct(value)) {
    const name = value.name ?? value.topic
    // Fetch v13+ answers name a topic by id alone (an empty name).
    if (
      typeof name === 'string' &&
      name !== '' &&
      typeof value.topicId === 'string' &&
      value.topicId !== ZERO_UUID
    )
      into.set(value.topicId, name)
    for (const inner of Object.values(value)) topicNamesOf(inner, into)
  }
}

interface Decoded {
  readonly exchange: RecordedExchange
  readonly body: Record<string, unknown>
  readonly answer: Record<string, unknown> | null
}

function decode(exchange: RecordedExchange): Decoded {
  const api = apis.get(exchange.apiKey)
  if (!api) throw new Error(`#${exchange.seq}: no codec for api key ${exchange.apiKey}`)
  const r = new Reader(Buffer.from(exchange.request, 'base64'))
  decodeRequestHeader(r, api.requestHeaderVersion(exchange.version))
  const body = api.decodeRequest(r, exchange.version) as Record<string, unknown>
  let answer: Record<string, unknown> | null = null
  if (exchange.response !== null) {
    const a = new Reader(Buffer.from(exchange.response, 'base64'))
    decodeResponseHeader(a, api.responseHeaderVersion(exchange.version))
    answer = api.decodeResponse(a, exchange.version) as Record<string, unknown>
  }
  return { exchange, body, answer }
}

/** Codes a client resends on: a new topic the broker's metadata does not hold yet. */
const UNKNOWN_TOPIC_CODES: ReadonlySet<number> = new Set([
  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
  ErrorCode.UNKNOWN_TOPIC_ID,
])

/**
 * Whether to resend: a transient code (as every harness step), or a topic the recorded
 * broker knew at this point and the target does not yet. Kafka 4.4 answers CreateTopics once
 * its controller committed the topic, before its broker's metadata cache has it; a client
 * resends then (as kafkajs did during the recording where tidelog was quicker).
 */
function settling(recorded: Record<string, unknown>, target: Record<string, unknown>): boolean {
  const codes = allErrorCodes(target)
  if (codes.some((code) => TRANSIENT_ERROR_CODES.has(code))) return true
  const recordedCodes = new Set(allErrorCodes(recorded))
  if (codes.some((code) => UNKNOWN_TOPIC_CODES.has(code) && !recordedCodes.has(code))) return true
  return behind(recorded, target)
}

/** Offsets a broker moves after it answered the request that moves them (transaction markers). */
const SETTLING_OFFSETS: ReadonlySet<string> = new Set(['highWatermark', 'lastStableOffset'])

/**
 * Whether the target's answer has a high watermark or last stable offset below the recorded
 * one at the same place: Kafka writes a transaction's markers after it answered EndTxn, so a
 * read_committed Fetch right after may not see them yet; the client's next fetch would.
 */
function behind(recorded: unknown, target: unknown): boolean {
  if (Array.isArray(recorded) && Array.isArray(target))
    return recorded.some((item, i) => i < target.length && behind(item, target[i]))
  if (!isStruct(recorded) || !isStruct(target)) return false
  return Object.entries(recorded).some(([field, value]) =>
    SETTLING_OFFSETS.has(field) && typeof value === 'bigint' && typeof target[field] === 'bigint'
      ? (target[field] as bigint) < value
      : behind(value, target[field]),
  )
}

/** Every error code in an answer, also those named otherwise (`partitionErrorCode`). */
function allErrorCodes(value: unknown, into: number[] = []): number[] {
  if (Array.isArray(value)) for (const item of value) allErrorCodes(item, into)
  else if (isStruct(value)) {
    for (const [key, inner] of Object.entries(value)) {
      if (/errorCode$/i.test(key) && typeof inner === 'number') into.push(inner)
      else allErrorCodes(inner, into)
    }
  }
  return into
}

/** The settled error codes of an answer: its codes but none and the transient ones, once each. */
function settledErrors(answer: Record<string, unknown>): string[] {
  const codes = allErrorCodes(answer).filter((code) => code !== 0 && !TRANSIENT_ERROR_CODES.has(code))
  return [...new Set(codes)].sort((a, b) => a - b).map(errorName)
}

/**
 * A replay that does not do what the client did (a topic id or member id not rewritten, so
 * both brokers refuse the request alike) would compare equal and prove nothing: Kafka's
 * answer must carry the error codes the recorded one did (transient ones aside, which the
 * harness resends past). Checked against Kafka, not tidelog, so that a tidelog bug shows
 * as a difference from Kafka rather than as a broken replay.
 */
function checkFaithful(
  exchange: RecordedExchange,
  recorded: Record<string, unknown>,
  kafka: Record<string, unknown>,
) {
  const want = settledErrors(recorded)
  const got = settledErrors(kafka)
  if (want.join() !== got.join())
    throw new Error(
      `replay of #${exchange.seq} ${exchange.api} is not faithful: recorded errors [${want.join(', ')}], Kafka answered [${got.join(', ')}]`,
    )
}

/**
 * FindCoordinator v4+ answers in `coordinators` only: the top-level node id, host and port
 * are not on the wire (versions 0-3), so both decode as 0, which the node-id normalisation
 * would name differently on two brokers of other ids.
 */
function dropUnsentCoordinator(answer: Record<string, unknown>): void {
  delete answer.nodeId
  delete answer.host
  delete answer.port
}

/** A recorded session as a harness sequence named `session <name>`. */
export function sessionSequence(name: string, session: RecordedSession): Sequence {
  const decoded = session.exchanges.map(decode)
  const recordedTopicNames = new Map<string, string>()
  for (const d of decoded) topicNamesOf(d.answer, recordedTopicNames)
  const shared: ReplayShared = {
    session: name,
    recordedTopicNames,
    shiftMs: BigInt(Date.now() - Date.parse(session.header.recordedAt)),
  }
  const steps: Step[] = []
  for (const { exchange, body, answer } of decoded) {
    const acks0 = exchange.apiKey === ApiKey.Produce && body.acks === 0
    if (answer === null && !acks0) continue
    steps.push({
      name: `#${exchange.seq} ${exchange.api} (connection ${exchange.conn})`,
      apiKey: exchange.apiKey,
      version: exchange.version,
      body: (ctx) => rewrite(body, '', exchange.apiKey, ctx, shared),
      ...(acks0 ? { noResponse: true } : {}),
      ...(exchange.apiKey === ApiKey.FindCoordinator && exchange.version >= 4
        ? { normalize: dropUnsentCoordinator }
        : {}),
      retryWhile: (target) => (answer === null ? false : settling(answer, target)),
      capture: (target, ctx) => {
        if (answer === null) return
        learn(answer, target, substitutions(ctx, name))
        if (ctx.name === 'kafka') checkFaithful(exchange, answer, target)
      },
    })
  }
  return { name: `session ${name}`, steps }
}

/** Where the recorded sessions are kept (`npm run record:session` records them again). */
export function sessionsDir(): string {
  return join(repoRoot(), 'test', 'differential', 'sessions')
}

/** The names of the recorded sessions: `kafkajs` for sessions/kafkajs.jsonl. */
export function recordedSessionNames(): string[] {
  return readdirSync(sessionsDir())
    .filter((file) => file.endsWith('.jsonl'))
    .map((file) => file.replace(/\.jsonl$/, ''))
    .sort()
}

/** The recorded session `name` as a sequence, its timestamps moved to now. */
export function recordedSession(name: string): Sequence {
  return sessionSequence(name, readSession(join(sessionsDir(), `${name}.jsonl`)))
}

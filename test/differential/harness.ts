/**
 * The differential harness (issue 32, item 3): the same request sequence goes to tidelog and
 * to Apache Kafka 4.4 (the reference broker), both answers are decoded with the generated
 * codecs, fields that differ by nature (node ids, ports, cluster and topic ids, producer and
 * member ids, throttle times, free-text messages) are normalised, and what remains is
 * compared field by field. A difference is either listed in known-differences.ts, with why,
 * or it fails the run.
 *
 * Each step is sent to both brokers at once and compared before the next is sent, so a step
 * may use what an earlier one answered on the same broker (a topic id, a producer id).
 */
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey, apis, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { decodeResponseHeader } from '../../src/protocol/generated/response-header.js'
import { Reader, Writer, ZERO_UUID } from '../../src/protocol/primitives.js'
import { decodeRecordBatchSync, iterateBatches, readBatchHeader } from '../../src/protocol/record-batch.js'
import { RawClient } from '../helpers/raw-client.js'

await loadAllApiCodecs()

export type TargetName = 'tidelog' | 'kafka'

/** What one broker under test has answered so far, for the steps that follow. */
export class TargetContext {
  /** Topic name by topic id, from every response that carried both. */
  readonly topicNames = new Map<string, string>()
  /** Topic id by topic name. */
  readonly topicIds = new Map<string, string>()
  /** Values a step captured for later steps (producer ids, epochs, member ids, generations). */
  readonly vars = new Map<string, unknown>()
  /** The brokers' node ids in ascending order: node#i in normalised answers. */
  nodeIds: number[] = []
  /** Highest version of each API key this broker supports. */
  readonly maxVersions = new Map<number, number>()
  /** Ordinals of values seen, per kind (producer ids, member ids, session ids). */
  private readonly ordinals = new Map<string, Map<string, number>>()

  constructor(
    readonly name: TargetName,
    readonly port: number,
  ) {}

  /** This broker's node id of node#index (for requests naming a broker, e.g. DescribeConfigs). */
  nodeId(index = 0): number {
    const id = this.nodeIds[index]
    if (id === undefined) throw new Error(`${this.name}: no node#${index}`)
    return id
  }

  topicId(name: string): string {
    return this.topicIds.get(name) ?? ZERO_UUID
  }

  variable<T>(key: string): T {
    if (!this.vars.has(key)) throw new Error(`${this.name}: step variable ${key} not captured`)
    return this.vars.get(key) as T
  }

  /** `kind#n`: the n-th distinct value of this kind this broker answered (1-based). */
  ordinal(kind: string, value: string): string {
    let seen = this.ordinals.get(kind)
    if (!seen) this.ordinals.set(kind, (seen = new Map()))
    let n = seen.get(value)
    if (n === undefined) seen.set(value, (n = seen.size + 1))
    return `${kind}#${n}`
  }
}

export interface Step {
  /** Names the step in diffs and in known-differences' `step` patterns. */
  readonly name: string
  readonly apiKey: number
  /**
   * The version to send; default the highest both brokers support. A version above that
   * must set `raw` to say how it is framed.
   */
  readonly version?: number
  /** The request body (merged over the API's defaults), per broker and version. */
  readonly body: (ctx: TargetContext, version: number) => unknown
  /**
   * A request no codec can write at `version` (an unsupported version): the header says
   * `version`, the body is encoded at `bodyVersion`, the answer decoded at `answerVersion`
   * with response header version `answerHeaderVersion` (Kafka answers an ApiVersions it
   * cannot parse in version 0).
   */
  readonly raw?: {
    readonly bodyVersion: number
    readonly answerVersion: number
    readonly answerHeaderVersion: number
  }
  /** acks=0: the broker sends nothing back; compared by whether it kept the connection. */
  readonly noResponse?: boolean
  /** Records what later steps need from the answer. */
  readonly capture?: (answer: Record<string, unknown>, ctx: TargetContext) => void
  /** Steps that only set up state (waits, topic creation for the random sequences) are not compared. */
  readonly compare?: boolean
  /**
   * Resend while this holds for the answer (state settling: a coordinator loading, a new
   * topic's leader not yet known); default: while any error code in it is a transient one.
   */
  readonly retryWhile?: (answer: Record<string, unknown>, ctx: TargetContext) => boolean
  /** Extra normalisation of this step's answer, after the general one. */
  readonly normalize?: (answer: Record<string, unknown>, ctx: TargetContext) => void
}

export interface Sequence {
  readonly name: string
  readonly steps: readonly Step[]
}

/** Codes that say "not yet" while a topic or coordinator settles; steps resend on them. */
export const TRANSIENT_ERROR_CODES: ReadonlySet<number> = new Set([
  ErrorCode.LEADER_NOT_AVAILABLE,
  ErrorCode.NOT_LEADER_OR_FOLLOWER,
  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
  ErrorCode.NOT_COORDINATOR,
  ErrorCode.CONCURRENT_TRANSACTIONS,
])

const ERROR_NAMES = new Map<number, string>(Object.entries(ErrorCode).map(([name, code]) => [code, name]))

/** `15 COORDINATOR_NOT_AVAILABLE` for diffs. */
export function errorName(code: number): string {
  return `${code} ${ERROR_NAMES.get(code) ?? '?'}`
}

/** Every `errorCode` field in an answer. */
export function errorCodes(value: unknown, into: number[] = []): number[] {
  if (Array.isArray(value)) for (const item of value) errorCodes(item, into)
  else if (value !== null && typeof value === 'object' && !Buffer.isBuffer(value)) {
    for (const [key, inner] of Object.entries(value)) {
      if (key === 'errorCode' && typeof inner === 'number') into.push(inner)
      else errorCodes(inner, into)
    }
  }
  return into
}

function hasTransientError(answer: Record<string, unknown>): boolean {
  return errorCodes(answer).some((code) => TRANSIENT_ERROR_CODES.has(code))
}

/** What a broker did with a request: answered (decoded), or closed the connection. */
export type Outcome =
  | { readonly closed: true }
  | {
      readonly answer: Record<string, unknown>
      /** The request was sent again after a transient error (a resent batch is a duplicate). */
      readonly resent?: boolean
    }

/** A broker under test: a raw connection, reopened after the broker closes one. */
export class Target {
  private client: RawClient | null = null
  private correlationId = 1
  readonly ctx: TargetContext

  constructor(name: TargetName, port: number) {
    this.ctx = new TargetContext(name, port)
  }

  private async connection(): Promise<RawClient> {
    if (this.client === null || this.client.closed) this.client = await RawClient.connect(this.ctx.port)
    return this.client
  }

  close(): void {
    this.client?.close()
    this.client = null
  }

  /** Learns the broker's API versions and node ids (node#i in answers). */
  async open(): Promise<void> {
    // Kafka refuses an empty client software name (INVALID_REQUEST, no api keys).
    const versions = await this.send(
      {
        name: 'open',
        apiKey: 18,
        version: 3,
        body: () => ({ clientSoftwareName: 'differential', clientSoftwareVersion: '1' }),
      },
      3,
    )
    if (!('answer' in versions)) throw new Error(`${this.ctx.name} closed the connection on ApiVersions`)
    for (const api of versions.answer.apiKeys as { apiKey: number; maxVersion: number }[])
      this.ctx.maxVersions.set(api.apiKey, api.maxVersion)
    const metadata = await this.send(
      { name: 'open', apiKey: 3, version: 12, body: () => ({ topics: [] }) },
      12,
    )
    if (!('answer' in metadata)) throw new Error(`${this.ctx.name} closed the connection on Metadata`)
    this.ctx.nodeIds = (metadata.answer.brokers as { nodeId: number }[])
      .map((b) => b.nodeId)
      .sort((a, b) => a - b)
  }

  /** Sends one step at `version` and decodes the answer. */
  async send(step: Step, version: number, timeoutMs = 15_000): Promise<Outcome> {
    const api = apis.get(step.apiKey)
    if (!api) throw new Error(`no codec for api key ${step.apiKey}`)
    const client = await this.connection()
    const correlationId = this.correlationId++
    const body = withTopicIds(
      step.apiKey,
      version,
      { ...(api.defaultRequest() as object), ...(step.body(this.ctx, version) as object) },
      this.ctx,
    )
    const bodyVersion = step.raw?.bodyVersion ?? version
    const w = new Writer()
    // The header: v2 (flexible) or v1 as the body's version has it; the version field says
    // `version` even when the body is written at another.
    const headerVersion = api.requestHeaderVersion(bodyVersion)
    w.writeInt16(step.apiKey)
    w.writeInt16(version)
    w.writeInt32(correlationId)
    w.writeNullableString('differential')
    if (headerVersion >= 2) w.writeUnsignedVarint(0)
    api.encodeRequest(w, bodyVersion, body)
    const payload = w.toBuffer()
    const size = Buffer.alloc(4)
    size.writeInt32BE(payload.length)
    client.write(Buffer.concat([size, payload]))
    if (step.noResponse) return this.probe()
    const frame = await client.readFrame(timeoutMs)
    if (frame === null) return { closed: true }
    const r = new Reader(frame)
    const answerVersion = step.raw?.answerVersion ?? version
    const header = decodeResponseHeader(
      r,
      step.raw?.answerHeaderVersion ?? api.responseHeaderVersion(answerVersion),
    )
    if (header.correlationId !== correlationId)
      throw new Error(`${this.ctx.name}: correlation id ${header.correlationId} != ${correlationId}`)
    return { answer: api.decodeResponse(r, answerVersion) as Record<string, unknown> }
  }

  /**
   * After a request that gets no answer (acks=0): whether the broker kept the connection
   * (a broker closes it when an acks=0 produce fails, so that the producer refreshes its
   * metadata). An ApiVersions round trip tells; the next step then gets a fresh connection.
   */
  private async probe(): Promise<Outcome> {
    const client = await this.connection()
    const correlationId = this.correlationId++
    client.write(RawClient.frame(18, 0, correlationId, {}))
    const frame = await client.readFrame(15_000)
    if (frame === null) return { closed: true }
    return { answer: { connection: 'kept' } }
  }

  /** `send`, resent while the step's retryWhile holds (30 s at most), then captured. */
  async run(step: Step, version: number, settleMs = 30_000): Promise<Outcome> {
    const deadline = Date.now() + settleMs
    const retryWhile = step.retryWhile ?? hasTransientError
    for (let resent = false; ; resent = true) {
      const outcome = await this.send(step, version)
      if (
        'answer' in outcome &&
        !step.noResponse &&
        retryWhile(outcome.answer, this.ctx) &&
        Date.now() < deadline
      ) {
        await new Promise((resolve) => setTimeout(resolve, 100))
        continue
      }
      if ('answer' in outcome && !step.noResponse) {
        learnTopicIds(outcome.answer, this.ctx)
        step.capture?.(outcome.answer, this.ctx)
        return resent ? { ...outcome, resent } : outcome
      }
      return outcome
    }
  }
}

/** Remembers topic name <-> id from any struct with both. */
function learnTopicIds(value: unknown, ctx: TargetContext): void {
  if (Array.isArray(value)) for (const item of value) learnTopicIds(item, ctx)
  else if (value !== null && typeof value === 'object' && !Buffer.isBuffer(value)) {
    const o = value as Record<string, unknown>
    const name = o.name ?? o.topic
    if (typeof name === 'string' && name !== '' && typeof o.topicId === 'string' && o.topicId !== ZERO_UUID) {
      ctx.topicNames.set(o.topicId, name)
      ctx.topicIds.set(name, o.topicId)
    }
    for (const inner of Object.values(o)) learnTopicIds(inner, ctx)
  }
}

// ---- normalisation ---------------------------------------------------------------------------

/** Fields holding a node id (or a list of them): node#i, by the broker's rank. */
const NODE_ID_FIELDS = new Set([
  'nodeId',
  'leaderId',
  'controllerId',
  'replicaNodes',
  'isrNodes',
  'offlineReplicas',
  'eligibleLeaderReplicas',
  'lastKnownElr',
  'preferredReadReplica',
  'coordinatorId',
  'brokerId',
])

/** Fields set to a fixed placeholder when present: they differ between any two clusters. */
const PLACEHOLDER_FIELDS: Readonly<Record<string, string>> = {
  host: '<host>',
  port: '<port>',
  clusterId: '<cluster-id>',
  rack: '<rack>',
}

/** Fields whose value is named by its order of appearance on that broker. */
const ORDINAL_FIELDS: Readonly<Record<string, string>> = {
  producerId: 'producer',
  memberId: 'member',
  leader: 'member',
  groupInstanceId: 'instance',
  sessionId: 'session',
  // KIP-714: the broker draws a client instance id; the subscription id hashes it in.
  clientInstanceId: 'client-instance',
}

/**
 * The answer with nondeterministic fields replaced: what two correct brokers must agree on.
 * Record batches are decoded into their header fields and records.
 */
export function normalize(value: unknown, ctx: TargetContext, key = ''): unknown {
  if (value === null || value === undefined) return value ?? null
  if (typeof value === 'bigint') {
    if (key === 'producerId') return value < 0n ? Number(value) : ctx.ordinal('producer', String(value))
    return Number(value)
  }
  if (Buffer.isBuffer(value)) return key === 'records' ? normalizeRecords(value, ctx) : bufferText(value)
  if (Array.isArray(value)) {
    if (NODE_ID_FIELDS.has(key)) return value.map((id) => nodeName(id as number, ctx))
    return value.map((item) => normalize(item, ctx))
  }
  if (typeof value === 'object') {
    const out: Record<string, unknown> = {}
    for (const [field, inner] of Object.entries(value as Record<string, unknown>)) {
      if (field === '_unknownTaggedFields') continue
      out[field] = normalizeField(field, inner, ctx)
    }
    return out
  }
  return value
}

function normalizeField(field: string, value: unknown, ctx: TargetContext): unknown {
  if (field === 'throttleTimeMs') return 0
  // Free text: each broker words its messages its own way; the error code is what counts.
  if (field === 'errorMessage' || field === 'message' || field === 'batchIndexErrorMessage') return null
  if (field in PLACEHOLDER_FIELDS && value !== null) return PLACEHOLDER_FIELDS[field]
  if (NODE_ID_FIELDS.has(field) && typeof value === 'number') return nodeName(value, ctx)
  if (field === 'topicId' && typeof value === 'string')
    return value === ZERO_UUID ? value : `<id of ${ctx.topicNames.get(value) ?? '?'}>`
  if (field in ORDINAL_FIELDS && typeof value === 'string' && value !== '' && value !== ZERO_UUID)
    return ctx.ordinal(ORDINAL_FIELDS[field], value)
  if (field === 'sessionId' && typeof value === 'number' && value !== 0)
    return ctx.ordinal('session', String(value))
  if (field === 'subscriptionId' && typeof value === 'number' && value !== 0)
    return ctx.ordinal('subscription', String(value))
  if (field === 'logAppendTimeMs' && typeof value === 'bigint' && value >= 0n) return '<append-time>'
  if (field === 'finalizedFeaturesEpoch' && typeof value === 'bigint' && value >= 0n) return '<epoch>'
  return normalize(value, ctx, field)
}

function nodeName(id: number, ctx: TargetContext): string | number {
  if (id < 0) return id
  const index = ctx.nodeIds.indexOf(id)
  return index < 0 ? `node?${id}` : `node#${index}`
}

/** UTF-8 if it reads back the same, else hex. */
function bufferText(buf: Buffer): string {
  const text = buf.toString('utf8')
  const printable = [...text].every((c) => c.charCodeAt(0) >= 0x09)
  return Buffer.from(text, 'utf8').equals(buf) && printable ? text : `0x${buf.toString('hex')}`
}

/** Record batches as comparable objects: header fields (not the CRC, derived) and records. */
function normalizeRecords(buf: Buffer, ctx: TargetContext): unknown {
  const batches: unknown[] = []
  const spans = iterateBatches(buf)
  for (;;) {
    const next = spans.next()
    if (next.done) {
      if (next.value.kind !== 'complete') batches.push({ tail: next.value.kind })
      break
    }
    const at = next.value.at
    try {
      const header = readBatchHeader(buf, at)
      const batch = decodeRecordBatchSync(buf, at)
      // A transaction marker is stamped when the coordinator writes it: now, not a record's time.
      const stamped = header.timestampType === 1 || header.isControl
      const stamp = header.isControl ? '<marker-time>' : '<append-time>'
      batches.push({
        baseOffset: header.baseOffset,
        lastOffsetDelta: header.lastOffsetDelta,
        partitionLeaderEpoch: header.partitionLeaderEpoch,
        magic: header.magic,
        attributes: header.attributes,
        baseTimestamp: stamped ? stamp : header.baseTimestamp,
        maxTimestamp: stamped ? stamp : header.maxTimestamp,
        producerId:
          header.producerId < 0n
            ? Number(header.producerId)
            : ctx.ordinal('producer', String(header.producerId)),
        producerEpoch: header.producerEpoch,
        baseSequence: header.baseSequence,
        records: batch.records.map((record) => ({
          offset: record.offset,
          timestamp: stamped ? stamp : record.timestamp,
          key: record.key === null ? null : bufferText(record.key),
          value: record.value === null ? null : bufferText(record.value),
          headers: record.headers.map((h) => ({
            key: h.key,
            value: h.value === null ? null : bufferText(h.value),
          })),
        })),
      })
    } catch (error) {
      batches.push({ undecodable: String(error) })
    }
  }
  return batches
}

// ---- comparison ------------------------------------------------------------------------------

export interface Difference {
  readonly sequence: string
  readonly step: string
  readonly api: string
  /** e.g. `responses[0].partitionResponses[0].errorCode`; array items keyed by name when they have one. */
  readonly path: string
  readonly tidelog: unknown
  readonly kafka: unknown
}

/** Arrays whose order no broker promises, sorted (by these fields) before comparing. */
const UNORDERED_ARRAYS: Readonly<Record<string, readonly string[]>> = {
  brokers: ['nodeId'],
  apiKeys: ['apiKey'],
  configs: ['name'],
  supportedFeatures: ['name'],
  finalizedFeatures: ['name'],
  // SCRAM credential results: Kafka builds them from hash maps (ScramControlManager, ScramImage).
  results: ['user'],
  credentialInfos: ['mechanism'],
}

/** Arrays whose order means something (a config's synonyms, by precedence; records; batches). */
const ORDERED_ARRAYS: ReadonlySet<string> = new Set([
  'synonyms',
  'records',
  'recordErrors',
  'abortedTransactions',
])

function sortKey(item: unknown, fields: readonly string[]): string {
  if (item === null || typeof item !== 'object') return String(item)
  const o = item as Record<string, unknown>
  return fields.map((f) => String(o[f])).join('|')
}

/** What names an item of a list: `name=x`, `partitionIndex=0`... (null if nothing does). */
function label(item: unknown): string | null {
  if (item === null || typeof item !== 'object') return null
  const o = item as Record<string, unknown>
  for (const field of [
    'name',
    'topic',
    'topicId',
    'groupId',
    'transactionalId',
    'resourceName',
    'apiKey',
    'partitionIndex',
    'index',
    'partition',
  ]) {
    const value = o[field]
    if ((typeof value === 'string' && value !== '') || typeof value === 'number') return `${field}=${value}`
  }
  return null
}

/** Labels of all items if each has one and none repeats; else null. */
function distinctLabels(items: readonly unknown[]): string[] | null {
  const labels = items.map(label)
  if (labels.some((l) => l === null) || new Set(labels).size !== labels.length) return null
  return labels as string[]
}

/** Field-by-field differences between two normalised answers. */
export function compare(
  tidelog: unknown,
  kafka: unknown,
  path = '',
  into: { path: string; tidelog: unknown; kafka: unknown }[] = [],
) {
  if (Array.isArray(tidelog) && Array.isArray(kafka)) {
    const field = path.split('.').pop()?.replace(/\[.*$/, '') ?? ''
    const order = UNORDERED_ARRAYS[field]
    const sorted = (items: unknown[]) =>
      order ? [...items].sort((x, y) => sortKey(x, order).localeCompare(sortKey(y, order))) : items
    const a = sorted(tidelog)
    const b = sorted(kafka)
    const labelsA = ORDERED_ARRAYS.has(field) ? null : distinctLabels(a)
    const labelsB = ORDERED_ARRAYS.has(field) ? null : distinctLabels(b)
    if (labelsA && labelsB) {
      // Items matched by what names them (a partition, a topic), so that answers listing the
      // same items in another order agree, and one missing item is one difference.
      const pairs = new Map<string, [unknown, unknown]>()
      for (const [i, x] of a.entries()) pairs.set(labelsA[i], [x, undefined])
      for (const [i, y] of b.entries()) pairs.set(labelsB[i], [pairs.get(labelsB[i])?.[0], y])
      for (const [name, [x, y]] of pairs) compare(x, y, `${path}[${name}]`, into)
      return into
    }
    if (a.length !== b.length) into.push({ path: `${path}.length`, tidelog: a.length, kafka: b.length })
    for (let i = 0; i < Math.min(a.length, b.length); i++) compare(a[i], b[i], `${path}[${i}]`, into)
    return into
  }
  if (isObject(tidelog) && isObject(kafka)) {
    const keys = new Set([...Object.keys(tidelog), ...Object.keys(kafka)])
    for (const key of keys) compare(tidelog[key], kafka[key], path ? `${path}.${key}` : key, into)
    return into
  }
  if (!sameValue(tidelog, kafka))
    into.push({ path, tidelog: describe(tidelog, path), kafka: describe(kafka, path) })
  return into
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b)
}

function describe(value: unknown, path: string): unknown {
  if (typeof value === 'number' && path.endsWith('errorCode')) return errorName(value)
  return value === undefined ? '(absent)' : value
}

/** One difference as a line: `sequence / step (Api vN) path: tidelog X, kafka Y`. */
export function formatDifference(d: Difference): string {
  const show = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v))
  return `${d.sequence} / ${d.step} (${d.api}) ${d.path || '(answer)'}: tidelog ${show(d.tidelog)}, kafka ${show(d.kafka)}`
}

// ---- running sequences -----------------------------------------------------------------------

export interface SequenceResult {
  readonly differences: Difference[]
  /** Steps compared. */
  readonly steps: number
}

/** The version a step is sent at: its own, or the highest both brokers support. */
export function stepVersion(step: Step, a: TargetContext, b: TargetContext): number {
  if (step.version !== undefined) return step.version
  const api = apis.get(step.apiKey)
  const ours = api?.maxVersion ?? 0
  return Math.min(ours, a.maxVersions.get(step.apiKey) ?? -1, b.maxVersions.get(step.apiKey) ?? -1)
}

/** Runs a sequence on both brokers, step by step, and returns every difference. */
export async function runSequence(
  sequence: Sequence,
  tidelog: Target,
  kafka: Target,
): Promise<SequenceResult> {
  const differences: Difference[] = []
  let steps = 0
  for (const step of sequence.steps) {
    const version = stepVersion(step, tidelog.ctx, kafka.ctx)
    if (version < 0)
      throw new Error(`${sequence.name} / ${step.name}: api ${step.apiKey} not served by both brokers`)
    const api = `${apis.get(step.apiKey)?.name ?? step.apiKey} v${version}`
    let outcomes: [Outcome, Outcome]
    try {
      outcomes = await Promise.all([tidelog.run(step, version), kafka.run(step, version)])
    } catch (error) {
      throw new Error(`${sequence.name} / ${step.name} (${api}): ${String(error)}`, { cause: error })
    }
    if (step.compare === false) continue
    steps++
    // One broker closing the connection where the other answers is one difference, not one per field.
    const closed = outcomes.map((o) => !('answer' in o))
    if (closed[0] || closed[1]) {
      if (closed[0] !== closed[1]) {
        const says = (c: boolean) => (c ? 'closed the connection' : 'answered')
        differences.push({
          sequence: sequence.name,
          step: step.name,
          api,
          path: '(connection)',
          tidelog: says(closed[0]),
          kafka: says(closed[1]),
        })
      }
      continue
    }
    const [a, b] = outcomes.map((o, i) => {
      const ctx = i === 0 ? tidelog.ctx : kafka.ctx
      const normalized = normalize((o as { answer: unknown }).answer, ctx) as Record<string, unknown>
      step.normalize?.(normalized, ctx)
      return normalized
    })
    if (
      process.env.DIFFERENTIAL_SHOW &&
      `${sequence.name} / ${step.name}`.includes(process.env.DIFFERENTIAL_SHOW)
    )
      console.log(
        `${sequence.name} / ${step.name} (${api})\n  tidelog ${JSON.stringify(a)}\n  kafka   ${JSON.stringify(b)}`,
      )
    // A batch resent after a transient error is answered as a duplicate, with the batch's
    // timestamp for logAppendTimeMs (Kafka's and tidelog's duplicate path), where a first
    // append on a CreateTime topic answers -1.
    const resent = outcomes.some((o) => 'resent' in o && o.resent)
    for (const d of compare(a, b))
      if (!(resent && d.path.endsWith('.logAppendTimeMs')))
        differences.push({ sequence: sequence.name, step: step.name, api, ...d })
  }
  return { differences, steps }
}

/**
 * Sequences name their topics; OffsetCommit and OffsetFetch v10, Produce v13 and
 * TxnOffsetCommit v6 address them by id only (KIP-848, KIP-516, KIP-1319), so the ids this broker answered with are filled in here (a name the broker never
 * answered gets the zero id, which it does not know either).
 */
function withTopicIds(apiKey: number, version: number, body: object, ctx: TargetContext): object {
  type Named = { name: string; topicId: string }
  const fill = (topics: Named[] | null) =>
    topics === null
      ? null
      : topics.map((t) => (t.topicId === ZERO_UUID ? { ...t, topicId: ctx.topicId(t.name) } : t))
  if (apiKey === ApiKey.OffsetCommit && version >= 10) {
    const b = body as { topics: Named[] }
    return { ...b, topics: fill(b.topics) }
  }
  if ((apiKey === ApiKey.Produce && version >= 13) || (apiKey === ApiKey.TxnOffsetCommit && version >= 6)) {
    const field = apiKey === ApiKey.Produce ? 'topicData' : 'topics'
    const b = body as Record<string, Named[]>
    return { ...b, [field]: fill(b[field]) }
  }
  if (apiKey === ApiKey.OffsetFetch && version >= 10) {
    const b = body as { groups: { topics: Named[] | null }[] }
    return { ...b, groups: b.groups.map((g) => ({ ...g, topics: fill(g.topics) })) }
  }
  return body
}

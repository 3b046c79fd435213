/**
 * A history: JSON lines of what producers and consumers saw (docs/history-format.md).
 * Parsing checks each line on its own (types, required fields) and the lines against each
 * other (an ack names an earlier send, a send is answered once, values are unique per
 * topic), and gives every problem with its line number: a checker that guessed at a
 * malformed history would report anomalies the system never had.
 */

import { assert } from '../common/assert.js'
import { TidelogError } from '../common/errors.js'

export const HISTORY_FORMAT = 'tidelog-history'
export const HISTORY_VERSION = 1

/** Problems reported before parsing gives up: enough to see a pattern, not a flood. */
export const HISTORY_ERRORS_MAX = 50

interface EventBase {
  /** 1-based line of the event in its file. */
  readonly line: number
  /** Milliseconds since the epoch when the writer saw the event; informational. */
  readonly time?: number
}

/** Declares a producer. Duplicates of a producer declared `idempotent: false` are expected. */
export interface ProducerEvent extends EventBase {
  readonly type: 'producer'
  readonly producer: string
  readonly idempotent: boolean
  readonly transactionalId?: string
}

export interface SendEvent extends EventBase {
  readonly type: 'send'
  readonly producer: string
  /** The producer's own numbering, increasing in the order it called send. */
  readonly seq: number
  readonly topic: string
  /** The partition the producer asked for, when it chose one. */
  readonly partition?: number
  /** Absent: keys are not compared on reads; null: the record has no key. */
  readonly key?: string | null
  readonly value: string
  /** The producer's transaction the send belongs to (with the send's `producer`). */
  readonly txn?: string
}

export interface AckEvent extends EventBase {
  readonly type: 'ack'
  readonly producer: string
  readonly seq: number
  readonly topic: string
  readonly partition: number
  /** null when the producer learnt no offset (acks=0). */
  readonly offset: number | null
  /** Optional copy of the send's value; must match it. */
  readonly value?: string
}

/** The producer reported an error: the record may or may not have been written. */
export interface FailEvent extends EventBase {
  readonly type: 'fail'
  readonly producer: string
  readonly seq: number
  readonly error?: string
}

export interface ReadEvent extends EventBase {
  readonly type: 'read'
  readonly consumer?: string
  readonly topic: string
  readonly partition: number
  readonly offset: number
  readonly key?: string | null
  readonly value: string
  /** Only read_committed reads are held to transactions' outcomes. */
  readonly isolation?: 'read_committed' | 'read_uncommitted'
  /** Reads with the same consumer and poll came back from one poll (Jepsen's internal checks). */
  readonly poll?: number
  /**
   * The read was part of producer `producer`'s transaction `txn` (consume-transform-produce:
   * its offset went into that transaction), so the transaction depends on what it read.
   */
  readonly producer?: string
  readonly txn?: string
}

/**
 * The consumer was (re)assigned the partition or moved its position on it (assign,
 * subscribe's rebalance, seek): its next read there need not follow its last one.
 */
export interface AssignEvent extends EventBase {
  readonly type: 'assign'
  readonly consumer: string
  readonly topic: string
  readonly partition: number
}

/**
 * The consumer crashed: it stopped without committing or leaving its group, so the group's
 * next owner of its partitions starts from the last committed offsets and may read again
 * what it read after its last commit (a new consumer name: no nonmonotonic read). It reads
 * nothing after this line.
 */
export interface CrashEvent extends EventBase {
  readonly type: 'crash'
  readonly consumer: string
  readonly group?: string
}

/**
 * A reader read every record of the partition from `startOffset` until the partition's end,
 * which was `endOffset`; acknowledged writes before this line must be among those reads.
 */
export interface CoveredEvent extends EventBase {
  readonly type: 'covered'
  readonly consumer?: string
  readonly topic: string
  readonly partition: number
  readonly startOffset: number
  readonly endOffset: number
}

/**
 * Declares a consumer (optional, anywhere in the history): `group` names the consumer group
 * it is a member of, so its reads count for that group's `group-offset` lines.
 */
export interface ConsumerEvent extends EventBase {
  readonly type: 'consumer'
  readonly consumer: string
  readonly group?: string
}

/**
 * A consumer group's committed offset on a partition, as the writer fetched it (after its
 * members stopped): every record below `offset` was consumed by some member. `endOffset`,
 * if given, is the partition's end the group had been given time to consume to (the high
 * watermark, or the last stable offset for read_committed members), so a committed offset
 * below it with unread records there says the group stalled.
 */
export interface GroupOffsetEvent extends EventBase {
  readonly type: 'group-offset'
  readonly group: string
  readonly topic: string
  readonly partition: number
  readonly offset: number
  readonly endOffset?: number
}

/**
 * A transaction's start (`begin`, optional) or outcome: `commit` when the client reported
 * the commit done, `abort` when the transaction was aborted. Neither: undecided (the
 * outcome is unknown, e.g. the commit's answer was lost).
 */
export interface TransactionEvent extends EventBase {
  readonly type: 'begin' | 'commit' | 'abort'
  readonly producer: string
  readonly txn: string
}

export type HistoryEvent =
  | ProducerEvent
  | SendEvent
  | AckEvent
  | FailEvent
  | ReadEvent
  | CoveredEvent
  | AssignEvent
  | CrashEvent
  | ConsumerEvent
  | GroupOffsetEvent
  | TransactionEvent

export interface History {
  readonly lines: number
  readonly producers: ReadonlyMap<string, ProducerEvent>
  readonly sends: readonly SendEvent[]
  readonly acks: readonly AckEvent[]
  readonly fails: readonly FailEvent[]
  readonly reads: readonly ReadEvent[]
  readonly covered: readonly CoveredEvent[]
  readonly assigns: readonly AssignEvent[]
  readonly crashes: readonly CrashEvent[]
  /** consumer → its group, from `consumer` lines that name one. */
  readonly consumerGroups: ReadonlyMap<string, string>
  readonly groupOffsets: readonly GroupOffsetEvent[]
  /** begin, commit and abort events, in line order. */
  readonly transactions: readonly TransactionEvent[]
  /** Sends, acks, fails and reads that name a transaction, plus begins, commits and aborts. */
  readonly transactionalEvents: number
}

export interface HistoryLineError {
  readonly line: number
  readonly message: string
}

/** A history that does not follow the format; `errors` holds up to HISTORY_ERRORS_MAX problems. */
export class HistoryFormatError extends TidelogError {
  constructor(
    readonly errors: readonly HistoryLineError[],
    readonly truncated: boolean,
  ) {
    super(
      'ERR_HISTORY_FORMAT',
      errors.map((e) => `line ${e.line}: ${e.message}`).join('\n') +
        (truncated ? `\n(stopped after ${errors.length} errors)` : ''),
    )
    this.name = 'HistoryFormatError'
  }
}

/** One field's problem inside a line; the parser adds the line number. */
class FieldError extends Error {}

const EVENT_TYPES = new Set([
  'header',
  'producer',
  'send',
  'ack',
  'fail',
  'read',
  'covered',
  'assign',
  'crash',
  'consumer',
  'group-offset',
  'begin',
  'commit',
  'abort',
])

type Json = Record<string, unknown>

function describe(value: unknown): string {
  return value === undefined ? 'nothing' : JSON.stringify(value)
}

function requiredString(json: Json, field: string): string {
  const value = json[field]
  if (typeof value !== 'string' || value === '')
    throw new FieldError(`'${field}' must be a non-empty string, got ${describe(value)}`)
  return value
}

function optionalString(json: Json, field: string): string | undefined {
  return json[field] === undefined ? undefined : requiredString(json, field)
}

function integer(json: Json, field: string): number {
  const value = json[field]
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    throw new FieldError(`'${field}' must be an integer >= 0, got ${describe(value)}`)
  return value
}

function optionalInteger(json: Json, field: string): number | undefined {
  return json[field] === undefined ? undefined : integer(json, field)
}

/** A key: absent (not compared), null or a string. */
function key(json: Json): string | null | undefined {
  const value = json['key']
  if (value === undefined || value === null || typeof value === 'string') return value
  throw new FieldError(`'key' must be a string or null, got ${describe(value)}`)
}

function value(json: Json): string {
  const v = json['value']
  if (typeof v !== 'string')
    throw new FieldError(
      `'value' must be a string (values identify records; write a unique text for each send), got ${describe(v)}`,
    )
  return v
}

function time(json: Json): { time?: number } {
  const t = json['time']
  if (t === undefined) return {}
  if (typeof t !== 'number' || !Number.isFinite(t))
    throw new FieldError(`'time' must be a number of milliseconds, got ${describe(t)}`)
  return { time: t }
}

function isolationOf(json: Json): ReadEvent['isolation'] {
  const isolation = json['isolation']
  if (isolation === undefined || isolation === 'read_committed' || isolation === 'read_uncommitted')
    return isolation
  throw new FieldError(
    `'isolation' must be "read_committed" or "read_uncommitted", got ${describe(isolation)}`,
  )
}

/** Spreads only the optional fields that are present, so events carry no `undefined` values. */
function present<T extends Record<string, unknown>>(fields: T): Partial<T> {
  const out: Partial<T> = {}
  for (const [name, v] of Object.entries(fields)) if (v !== undefined) (out as Json)[name] = v
  return out
}

/** One line's event, checked on its own; null for the header line. */
function parseEvent(text: string, line: number): HistoryEvent | null {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw new FieldError(`not JSON: ${(error as Error).message}`)
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new FieldError(`expected a JSON object, got ${describe(json)}`)
  const j = json as Json
  const type = j['type']
  if (typeof type !== 'string' || !EVENT_TYPES.has(type))
    throw new FieldError(`'type' must be one of ${[...EVENT_TYPES].join(', ')}, got ${describe(type)}`)
  const base = { line, ...time(j) }
  if (type === 'begin' || type === 'commit' || type === 'abort') return parseTxnEnd(j, base, type)
  const parser = EVENT_PARSERS[type]
  assert(parser !== undefined, `no parser for event type ${type}`)
  return parser(j, base)
}

/** The parser of each event type but the transaction boundaries (parseTxnEnd). */
const EVENT_PARSERS: Readonly<Record<string, (j: Json, base: EventBase) => HistoryEvent | null>> = {
  header: parseHeader,
  producer: parseProducer,
  send: parseSend,
  ack: parseAck,
  fail: parseFail,
  read: parseRead,
  assign: parseAssign,
  crash: (j, base) => ({
    type: 'crash' as const,
    ...base,
    consumer: requiredString(j, 'consumer'),
    group: optionalString(j, 'group'),
  }),
  covered: parseCovered,
  consumer: (j, base) => ({
    type: 'consumer' as const,
    ...base,
    consumer: requiredString(j, 'consumer'),
    ...present({ group: optionalString(j, 'group') }),
  }),
  'group-offset': parseGroupOffset,
}

function parseGroupOffset(j: Json, base: EventBase): HistoryEvent {
  // An end below the committed offset is no malformed line: the group committed past the
  // end of the partition, and the records it passed over show as group skips.
  const offset = integer(j, 'offset')
  const endOffset = optionalInteger(j, 'endOffset')
  return {
    type: 'group-offset' as const,
    ...base,
    group: requiredString(j, 'group'),
    topic: requiredString(j, 'topic'),
    partition: integer(j, 'partition'),
    offset,
    ...present({ endOffset }),
  }
}

function parseHeader(j: Json): null {
  if (j['format'] !== HISTORY_FORMAT)
    throw new FieldError(`header: 'format' must be "${HISTORY_FORMAT}", got ${describe(j['format'])}`)
  if (j['version'] !== HISTORY_VERSION)
    throw new FieldError(
      `header: this checker reads version ${HISTORY_VERSION}, got ${describe(j['version'])}`,
    )
  return null
}

function parseProducer(j: Json, base: EventBase): HistoryEvent {
  if (typeof j['idempotent'] !== 'boolean')
    throw new FieldError(`'idempotent' must be true or false, got ${describe(j['idempotent'])}`)
  return {
    type: 'producer' as const,
    ...base,
    producer: requiredString(j, 'producer'),
    idempotent: j['idempotent'],
    ...present({ transactionalId: optionalString(j, 'transactionalId') }),
  }
}

function parseSend(j: Json, base: EventBase): HistoryEvent {
  return {
    type: 'send' as const,
    ...base,
    producer: requiredString(j, 'producer'),
    seq: integer(j, 'seq'),
    topic: requiredString(j, 'topic'),
    value: value(j),
    ...present({
      partition: optionalInteger(j, 'partition'),
      key: key(j),
      txn: optionalString(j, 'txn'),
    }),
  }
}

function parseAck(j: Json, base: EventBase): HistoryEvent {
  const offset = j['offset']
  // Kafka's clients say -1 for "no offset known" (acks=0); null says the same in JSON.
  const known = offset === null || offset === -1 ? null : integer(j, 'offset')
  return {
    type: 'ack' as const,
    ...base,
    producer: requiredString(j, 'producer'),
    seq: integer(j, 'seq'),
    topic: requiredString(j, 'topic'),
    partition: integer(j, 'partition'),
    offset: known,
    ...present({ value: j['value'] === undefined ? undefined : value(j) }),
  }
}

function parseFail(j: Json, base: EventBase): HistoryEvent {
  return {
    type: 'fail' as const,
    ...base,
    producer: requiredString(j, 'producer'),
    seq: integer(j, 'seq'),
    ...present({ error: optionalString(j, 'error') }),
  }
}

function parseRead(j: Json, base: EventBase): HistoryEvent {
  const producer = optionalString(j, 'producer')
  const txn = optionalString(j, 'txn')
  if ((producer === undefined) !== (txn === undefined))
    throw new FieldError("a read names its transaction with both 'producer' and 'txn', or neither")
  const isolation = isolationOf(j)
  return {
    type: 'read' as const,
    ...base,
    topic: requiredString(j, 'topic'),
    partition: integer(j, 'partition'),
    offset: integer(j, 'offset'),
    value: value(j),
    ...present({
      consumer: optionalString(j, 'consumer'),
      key: key(j),
      isolation,
      poll: optionalInteger(j, 'poll'),
      producer,
      txn,
    }),
  }
}

function parseAssign(j: Json, base: EventBase): HistoryEvent {
  return {
    type: 'assign' as const,
    ...base,
    consumer: requiredString(j, 'consumer'),
    topic: requiredString(j, 'topic'),
    partition: integer(j, 'partition'),
  }
}

function parseCovered(j: Json, base: EventBase): HistoryEvent {
  const startOffset = integer(j, 'startOffset')
  const endOffset = integer(j, 'endOffset')
  if (endOffset < startOffset)
    throw new FieldError(`'endOffset' ${endOffset} is below 'startOffset' ${startOffset}`)
  return {
    type: 'covered' as const,
    ...base,
    topic: requiredString(j, 'topic'),
    partition: integer(j, 'partition'),
    startOffset,
    endOffset,
    ...present({ consumer: optionalString(j, 'consumer') }),
  }
}

function parseTxnEnd(j: Json, base: EventBase, type: 'begin' | 'commit' | 'abort'): HistoryEvent {
  return {
    type,
    ...base,
    producer: requiredString(j, 'producer'),
    txn: requiredString(j, 'txn'),
  }
}

/**
 * Builds a History from lines fed in order, checking each against the ones before it.
 * `finish()` throws a HistoryFormatError listing every problem found.
 */
export class HistoryParser {
  private line = 0
  private sawEvent = false
  private readonly errors: HistoryLineError[] = []
  private truncated = false
  private readonly producers = new Map<string, ProducerEvent>()
  private readonly sends: SendEvent[] = []
  private readonly acks: AckEvent[] = []
  private readonly fails: FailEvent[] = []
  private readonly reads: ReadEvent[] = []
  private readonly covered: CoveredEvent[] = []
  private readonly assigns: AssignEvent[] = []
  /** consumer → its crash line. */
  private readonly crashes = new Map<string, CrashEvent>()
  /** consumer → its declaration. */
  private readonly consumers = new Map<string, ConsumerEvent>()
  private readonly groupOffsets: GroupOffsetEvent[] = []
  private readonly transactions: TransactionEvent[] = []
  private transactionalEvents = 0
  /** producer \0 seq → the send, and the line of its outcome once one arrived. */
  private readonly sent = new Map<string, { send: SendEvent; outcomeLine: number | null }>()
  /** topic \0 value → line of the send. */
  private readonly values = new Map<string, number>()
  /** producer \0 txn → its begin and its end (commit or abort), as far as seen. */
  private readonly txnStates = new Map<string, { begin?: TransactionEvent; end?: TransactionEvent }>()

  /** Feeds the next line of the file (without its newline). */
  add(text: string): void {
    this.line++
    if (this.truncated || text.trim() === '') return
    try {
      const event = parseEvent(text, this.line)
      if (event === null) {
        if (this.sawEvent) throw new FieldError('the header must come before every event')
        return
      }
      this.sawEvent = true
      this.accept(event)
    } catch (error) {
      if (!(error instanceof FieldError)) throw error
      this.errors.push({ line: this.line, message: error.message })
      if (this.errors.length >= HISTORY_ERRORS_MAX) this.truncated = true
    }
  }

  finish(): History {
    if (this.errors.length > 0) throw new HistoryFormatError(this.errors, this.truncated)
    return {
      lines: this.line,
      producers: this.producers,
      sends: this.sends,
      acks: this.acks,
      fails: this.fails,
      reads: this.reads,
      covered: this.covered,
      assigns: this.assigns,
      crashes: [...this.crashes.values()],
      consumerGroups: new Map(
        [...this.consumers.values()].flatMap((c) => (c.group === undefined ? [] : [[c.consumer, c.group]])),
      ),
      groupOffsets: this.groupOffsets,
      transactions: this.transactions,
      transactionalEvents: this.transactionalEvents,
    }
  }

  private accept(event: HistoryEvent): void {
    switch (event.type) {
      case 'producer': {
        const earlier = this.producers.get(event.producer)
        if (earlier)
          throw new FieldError(`producer '${event.producer}' already declared on line ${earlier.line}`)
        this.producers.set(event.producer, event)
        return
      }
      case 'send':
        this.acceptSend(event)
        return
      case 'ack':
      case 'fail': {
        const entry = this.sent.get(sendId(event.producer, event.seq))
        if (!entry)
          throw new FieldError(
            `${event.type} for producer '${event.producer}' seq ${event.seq}, which no earlier line sent`,
          )
        if (entry.outcomeLine !== null)
          throw new FieldError(
            `producer '${event.producer}' seq ${event.seq} was already answered on line ${entry.outcomeLine}`,
          )
        if (event.type === 'ack' && event.topic !== entry.send.topic)
          throw new FieldError(
            `ack names topic '${event.topic}' but seq ${event.seq} was sent to '${entry.send.topic}' (line ${entry.send.line})`,
          )
        if (event.type === 'ack' && event.value !== undefined && event.value !== entry.send.value)
          throw new FieldError(
            `ack value ${JSON.stringify(event.value)} differs from the value sent on line ${entry.send.line}`,
          )
        entry.outcomeLine = event.line
        if (entry.send.txn !== undefined) this.transactionalEvents++
        if (event.type === 'ack') this.acks.push(event)
        else this.fails.push(event)
        return
      }
      case 'read':
        this.checkNotCrashed(event.consumer, 'read')
        if (event.txn !== undefined) {
          this.checkTxnOpen(event.producer!, event.txn, 'read in')
          this.transactionalEvents++
        }
        this.reads.push(event)
        return
      case 'covered':
        this.covered.push(event)
        return
      case 'assign':
        this.checkNotCrashed(event.consumer, 'assign')
        this.assigns.push(event)
        return
      case 'crash':
        this.checkNotCrashed(event.consumer, 'crash')
        this.crashes.set(event.consumer, event)
        return
      case 'consumer':
      case 'group-offset':
        this.acceptGroupEvent(event)
        return
      default:
        this.acceptTransactionEvent(event)
    }
  }

  /** A send has a seq new to its producer and a value new to its topic. */
  private acceptSend(event: SendEvent): void {
    const id = sendId(event.producer, event.seq)
    const earlier = this.sent.get(id)
    if (earlier)
      throw new FieldError(
        `producer '${event.producer}' already sent seq ${event.seq} on line ${earlier.send.line}`,
      )
    const valueId = `${event.topic}\u0000${event.value}`
    const sameValue = this.values.get(valueId)
    if (sameValue !== undefined)
      throw new FieldError(
        `value ${JSON.stringify(event.value)} was already sent to '${event.topic}' on line ${sameValue} (values identify records and must be unique per topic)`,
      )
    if (event.txn !== undefined) this.checkTxnOpen(event.producer, event.txn, 'sent in')
    this.sent.set(id, { send: event, outcomeLine: null })
    this.values.set(valueId, event.line)
    this.sends.push(event)
    if (event.txn !== undefined) this.transactionalEvents++
  }

  /** A consumer is declared once; a group's offsets need a member declared before them. */
  private acceptGroupEvent(event: ConsumerEvent | GroupOffsetEvent): void {
    if (event.type === 'consumer') {
      const earlier = this.consumers.get(event.consumer)
      if (earlier)
        throw new FieldError(`consumer '${event.consumer}' already declared on line ${earlier.line}`)
      this.consumers.set(event.consumer, event)
      return
    }
    if (![...this.consumers.values()].some((c) => c.group === event.group))
      throw new FieldError(
        `group '${event.group}' has no member: declare its consumers ('consumer' lines with 'group') before its offsets`,
      )
    this.groupOffsets.push(event)
  }

  /** A transaction begins at most once, before anything else of it, and ends at most once. */
  private acceptTransactionEvent(event: TransactionEvent): void {
    const id = `${event.producer}\u0000${event.txn}`
    const state = this.txnStates.get(id)
    const name = `transaction '${event.txn}' of producer '${event.producer}'`
    if (event.type === 'begin') {
      if (state?.begin) throw new FieldError(`${name} already began on line ${state.begin.line}`)
      if (state) throw new FieldError(`${name} had events before this begin: a begin comes first`)
      this.txnStates.set(id, { begin: event })
    } else {
      if (state?.end)
        throw new FieldError(`${name} already ended (${state.end.type}, line ${state.end.line})`)
      this.txnStates.set(id, { ...state, end: event })
    }
    this.transactions.push(event)
    this.transactionalEvents++
  }

  /** A crashed consumer does nothing more: its partitions' next reads are another consumer's. */
  private checkNotCrashed(consumer: string | undefined, what: string): void {
    const crash = consumer === undefined ? undefined : this.crashes.get(consumer)
    if (crash) throw new FieldError(`${what} by consumer '${consumer}', which crashed on line ${crash.line}`)
  }

  /** Sends and reads name transactions that have not ended yet. */
  private checkTxnOpen(producer: string, txn: string, what: string): void {
    const id = `${producer}\u0000${txn}`
    const state = this.txnStates.get(id)
    if (state?.end)
      throw new FieldError(
        `${what} transaction '${txn}' of producer '${producer}', which ended on line ${state.end.line} (${state.end.type})`,
      )
    if (!state) this.txnStates.set(id, {})
  }
}

function sendId(producer: string, seq: number): string {
  return `${producer}\u0000${seq}`
}

/** A whole history held in a string (tests, small files). */
export function parseHistory(text: string): History {
  const parser = new HistoryParser()
  const lines = text.split('\n')
  // A final newline ends the last line; it does not start another.
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop()
  for (const line of lines) parser.add(line.endsWith('\r') ? line.slice(0, -1) : line)
  return parser.finish()
}

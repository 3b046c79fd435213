/**
 * Incremental fetch sessions (KIP-227). A client that opens a session sends its partition
 * list once; later fetches carry only partitions whose position changed and the broker
 * answers only partitions with news (records, a moved high watermark / log start, or an
 * error). Sessions are bounded by max.incremental.fetch.session.cache.slots; the least
 * recently used one is evicted to make room, and its client falls back to a full fetch on
 * FETCH_SESSION_ID_NOT_FOUND.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import { KafkaError } from '../replication/kafka-error.js'

export const INITIAL_EPOCH = 0
export const FINAL_EPOCH = -1
export const INVALID_SESSION_ID = 0

export interface SessionPartition {
  readonly topic: string
  readonly topicId: string
  readonly partition: number
  fetchOffset: number
  partitionMaxBytes: number
  currentLeaderEpoch: number
  /** What the client last saw, to tell whether anything changed since. */
  lastHighWatermark: number
  lastLogStartOffset: number
}

export interface FetchSession {
  readonly id: number
  /** The epoch the next request must carry. */
  epoch: number
  readonly partitions: Map<string, SessionPartition>
  lastUsedMs: number
}

export function sessionKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`
}

export type SessionDecision =
  /** Full fetch; `session` set when a new session was created for it. */
  { kind: 'full'; session: FetchSession | null } | { kind: 'incremental'; session: FetchSession }

export class FetchSessionCache {
  private readonly sessions = new Map<number, FetchSession>()

  constructor(
    private readonly maxSessions: number,
    private readonly randomId: () => number,
  ) {}

  get size(): number {
    return this.sessions.size
  }

  /**
   * Interprets a request's session id and epoch; throws KafkaError with
   * FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH when the client is out of step.
   */
  begin(sessionId: number, epoch: number, nowMs: number): SessionDecision {
    if (sessionId !== INVALID_SESSION_ID && (epoch === INITIAL_EPOCH || epoch === FINAL_EPOCH)) {
      this.sessions.delete(sessionId)
    }
    if (epoch === FINAL_EPOCH) return { kind: 'full', session: null }
    if (epoch === INITIAL_EPOCH) return { kind: 'full', session: this.create(nowMs) }
    const session = this.sessions.get(sessionId)
    if (!session)
      throw new KafkaError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, `fetch session ${sessionId} not found`)
    if (session.epoch !== epoch) {
      throw new KafkaError(
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        `session ${sessionId} expects epoch ${session.epoch}, got ${epoch}`,
      )
    }
    session.lastUsedMs = nowMs
    // As Kafka's FetchManager.newContext: an accepted incremental request moves the epoch on
    // at once. A new session starts at epoch 1, which its first incremental request carries.
    session.epoch = session.epoch === 2147483647 ? 1 : session.epoch + 1
    this.sessions.delete(sessionId) // re-insert: Map order is our LRU order
    this.sessions.set(sessionId, session)
    return { kind: 'incremental', session }
  }

  private create(nowMs: number): FetchSession | null {
    if (this.maxSessions <= 0) return null
    if (this.sessions.size >= this.maxSessions) {
      const oldest = this.sessions.keys().next().value
      if (oldest !== undefined) this.sessions.delete(oldest)
    }
    let id = this.randomId()
    while (id === INVALID_SESSION_ID || this.sessions.has(id)) id = this.randomId()
    const session: FetchSession = { id, epoch: 1, partitions: new Map(), lastUsedMs: nowMs }
    this.sessions.set(id, session)
    return session
  }
}

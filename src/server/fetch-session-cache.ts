/**
 * Incremental fetch sessions (KIP-227). A client that opens a session sends its partition
 * list once; later fetches carry only partitions whose position changed and the broker
 * answers only partitions with news (records, a moved high watermark / log start, or an
 * error). Sessions are bounded by max.incremental.fetch.session.cache.slots. As Kafka's
 * FetchSessionCache, a new session takes the slot of one unused for
 * MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, else of the least valuable one if it is worth
 * less than the newcomer: a follower's session outranks any consumer's, then more partitions
 * outrank fewer. Consumers thus never evict a live follower's session, which replication
 * depends on. Otherwise the fetch goes without a session (answered with session id 0). An
 * evicted session's client falls back to a full fetch on FETCH_SESSION_ID_NOT_FOUND.
 */
import type { Offset } from '../common/types.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { KafkaError } from '../replication/kafka-error.js'

export const INITIAL_EPOCH = 0
export const FINAL_EPOCH = -1
export const INVALID_SESSION_ID = 0
/** Kafka's KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (a constant there too). */
export const MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120000

export interface SessionPartition {
  readonly topic: string
  readonly topicId: string
  readonly partition: number
  fetchOffset: Offset
  partitionMaxBytes: number
  currentLeaderEpoch: number
  /** What the client last saw, to tell whether anything changed since. */
  lastHighWatermark: Offset
  lastLogStartOffset: Offset
  lastLastStableOffset: Offset
}

export interface FetchSession {
  readonly id: number
  /** The epoch the next request must carry. */
  epoch: number
  readonly partitions: Map<string, SessionPartition>
  lastUsedMs: number
  /** A follower's (replicaId >= 0): outranks consumers' sessions for a slot. */
  readonly privileged: boolean
  /** Called once when the cache drops the session (closed, re-created, evicted). */
  onClose: (() => void) | null
}

/** Who opens a session, for the eviction policy. */
export interface SessionRequester {
  readonly privileged: boolean
  /** Partitions the opening (full) fetch carries. */
  readonly partitionCount: number
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
  begin(sessionId: number, epoch: number, nowMs: number, requester: SessionRequester): SessionDecision {
    if (sessionId !== INVALID_SESSION_ID && (epoch === INITIAL_EPOCH || epoch === FINAL_EPOCH)) {
      this.drop(sessionId)
    }
    if (epoch === FINAL_EPOCH) return { kind: 'full', session: null }
    if (epoch === INITIAL_EPOCH) return { kind: 'full', session: this.create(nowMs, requester) }
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

  /** Drops a session whose client cannot know of it (the answer that named it was lost). */
  remove(sessionId: number): void {
    this.drop(sessionId)
  }

  private drop(sessionId: number): void {
    const session = this.sessions.get(sessionId)
    if (session === undefined) return
    this.sessions.delete(sessionId)
    session.onClose?.()
  }

  private create(nowMs: number, requester: SessionRequester): FetchSession | null {
    if (this.maxSessions <= 0) return null
    if (this.sessions.size >= this.maxSessions && !this.evictFor(nowMs, requester)) return null
    let id = this.randomId()
    while (id === INVALID_SESSION_ID || this.sessions.has(id)) id = this.randomId()
    const session: FetchSession = {
      id,
      epoch: 1,
      partitions: new Map(),
      lastUsedMs: nowMs,
      privileged: requester.privileged,
      onClose: null,
    }
    this.sessions.set(id, session)
    return session
  }

  /**
   * Frees a slot for `requester` (Kafka's FetchSessionCache.tryEvict): the least recently
   * used session if it is stale, else the least valuable one (unprivileged before
   * privileged, then fewer partitions) if the newcomer is worth at least as much. A scan of
   * the sessions, only when the cache is full and a session opens.
   */
  private evictFor(nowMs: number, requester: SessionRequester): boolean {
    const oldest = this.sessions.values().next().value
    if (oldest === undefined) return false
    if (nowMs - oldest.lastUsedMs > MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS) {
      this.drop(oldest.id)
      return true
    }
    let least: FetchSession | null = null
    for (const session of this.sessions.values())
      if (least === null || worth(session.privileged, session.partitions.size, least) < 0) least = session
    if (least === null || worth(requester.privileged, requester.partitionCount, least) < 0) return false
    this.drop(least.id)
    return true
  }
}

/** Negative when (privileged, size) is worth less than `session`, 0 when equal. */
function worth(privileged: boolean, size: number, session: FetchSession): number {
  if (privileged !== session.privileged) return privileged ? 1 : -1
  return size - session.partitions.size
}

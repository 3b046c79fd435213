/**
 * The fetching side of an incremental fetch session (KIP-227), as Java's FetchSessionHandler:
 * the first fetch is full and opens a session (epoch 0); later ones carry only the partitions
 * added or whose fetch position changed, and name the removed ones in forgottenTopicsData.
 * The leader keeps every other partition's last position, and its answer lists only the
 * partitions with news. Any failure (a top-level error, no answer, a new connection) makes the
 * next fetch full again, closing the old session so that its slot is not left to expire.
 */
import type { Offset } from '../common/types.js'
import { ErrorCode } from '../protocol/error-codes.js'

const INVALID_SESSION_ID = 0
const INITIAL_EPOCH = 0
const MAX_EPOCH = 2147483647

/** What a fetch tells the leader about one partition; a change is sent in the next fetch. */
export interface SessionPartitionData {
  readonly fetchOffset: Offset
  readonly logStartOffset: Offset
  readonly currentLeaderEpoch: number
  readonly partitionMaxBytes: number
}

export interface SessionEntry<P> {
  readonly topic: string
  readonly topicId: string
  readonly partition: number
  readonly data: SessionPartitionData
  /** The caller's handle for the partition (the fetcher's Followed). */
  readonly handle: P
}

export interface SessionFetch<P> {
  readonly sessionId: number
  readonly sessionEpoch: number
  /** True when this fetch carries every partition (it opens a session, or no session is kept). */
  readonly full: boolean
  /** The partitions the request carries: all of them when full, else the added and changed ones. */
  readonly toSend: readonly SessionEntry<P>[]
  /** Removed since the last fetch (empty when full). */
  readonly toForget: readonly SessionEntry<P>[]
}

export class FetchSessionHandler<P> {
  private sessionId = INVALID_SESSION_ID
  private nextEpoch = INITIAL_EPOCH
  /** What the leader holds for this session, by key, as of the last fetch sent. */
  private readonly sent = new Map<string, SessionEntry<P>>()
  /** The epoch of the fetch in flight, to match its answer (-1: none). */
  private inFlightEpoch = -1

  /** The session the leader gave us, INVALID_SESSION_ID (0) while none. */
  get id(): number {
    return this.sessionId
  }

  /**
   * The next fetch for `next` (every partition to fetch now, by key). Every build must be
   * followed by handleResponse or handleError before the next one. `changed`, when given,
   * lists every key whose entry in `next` may differ from the previous build's (added,
   * removed, or a new entry object): an incremental fetch then looks at those only.
   */
  build(next: ReadonlyMap<string, SessionEntry<P>>, changed?: readonly string[]): SessionFetch<P> {
    this.inFlightEpoch = this.nextEpoch
    if (this.nextEpoch === INITIAL_EPOCH) {
      this.sent.clear()
      for (const [key, entry] of next) this.sent.set(key, entry)
      return {
        sessionId: this.sessionId,
        sessionEpoch: INITIAL_EPOCH,
        full: true,
        toSend: [...next.values()],
        toForget: [],
      }
    }
    const toSend: SessionEntry<P>[] = []
    const toForget: SessionEntry<P>[] = []
    if (changed !== undefined) {
      for (const key of changed) this.diff(key, next.get(key), toSend, toForget)
      return { sessionId: this.sessionId, sessionEpoch: this.nextEpoch, full: false, toSend, toForget }
    }
    for (const [key, previous] of this.sent) {
      if (!next.has(key)) {
        toForget.push(previous)
        this.sent.delete(key)
      }
    }
    for (const [key, entry] of next) {
      const previous = this.sent.get(key)
      if (previous === undefined || !sameData(previous.data, entry.data)) toSend.push(entry)
      // The handle is kept up to date even when the data is not sent: answers map to it.
      this.sent.set(key, entry)
    }
    return { sessionId: this.sessionId, sessionEpoch: this.nextEpoch, full: false, toSend, toForget }
  }

  private diff(
    key: string,
    entry: SessionEntry<P> | undefined,
    toSend: SessionEntry<P>[],
    toForget: SessionEntry<P>[],
  ): void {
    const previous = this.sent.get(key)
    if (entry === undefined) {
      if (previous !== undefined) toForget.push(previous)
      this.sent.delete(key)
      return
    }
    if (previous === entry) return
    if (previous === undefined || !sameData(previous.data, entry.data)) toSend.push(entry)
    this.sent.set(key, entry)
  }

  /** The entry the last build left for `key`, to find the partition an answer is about. */
  entry(key: string): SessionEntry<P> | undefined {
    return this.sent.get(key)
  }

  /**
   * Takes the answer's session id and top-level error; false when the answer carries no
   * partition data to apply (a session error: the next fetch is full with a new session).
   */
  handleResponse(errorCode: number, responseSessionId: number): boolean {
    const epoch = this.inFlightEpoch
    this.inFlightEpoch = -1
    if (errorCode !== ErrorCode.NONE) {
      // FETCH_SESSION_ID_NOT_FOUND: the leader has no such session (evicted, or restarted):
      // there is nothing to close. Any other error: close ours while opening a new one.
      if (errorCode === ErrorCode.FETCH_SESSION_ID_NOT_FOUND) this.sessionId = INVALID_SESSION_ID
      this.nextEpoch = INITIAL_EPOCH
      return false
    }
    if (epoch === INITIAL_EPOCH) {
      // A full fetch's answer: a session id when the leader opened one, 0 when it had no slot
      // (the next fetch is full again, and asks again).
      this.sessionId = responseSessionId
      this.nextEpoch = responseSessionId === INVALID_SESSION_ID ? INITIAL_EPOCH : 1
      return true
    }
    if (responseSessionId !== this.sessionId) {
      // The leader closed the session: this answer is still a full account of the partitions
      // it carries, but the next fetch must open a new one.
      this.sessionId = INVALID_SESSION_ID
      this.nextEpoch = INITIAL_EPOCH
      return true
    }
    this.nextEpoch = this.nextEpoch === MAX_EPOCH ? 1 : this.nextEpoch + 1
    return true
  }

  /**
   * The fetch failed without an answer (connection lost, timed out, cut short), or a new
   * connection starts: the leader may or may not have applied the last fetch, so the next
   * one is full, closing the session (a leader that no longer has it ignores that).
   */
  handleError(): void {
    this.inFlightEpoch = -1
    this.nextEpoch = INITIAL_EPOCH
  }
}

function sameData(a: SessionPartitionData, b: SessionPartitionData): boolean {
  return (
    a.fetchOffset === b.fetchOffset &&
    a.logStartOffset === b.logStartOffset &&
    a.currentLeaderEpoch === b.currentLeaderEpoch &&
    a.partitionMaxBytes === b.partitionMaxBytes
  )
}

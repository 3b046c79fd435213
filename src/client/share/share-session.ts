/**
 * A share consumer's share session with one broker (KIP-932, Java's ShareSessionHandler):
 * the epoch of the next ShareFetch/ShareAcknowledge and the partitions the session holds.
 *
 * - Epoch 0 opens a session and names every partition to fetch; it may carry no
 *   acknowledgements (the broker refuses them), so they wait for the next request.
 * - Each answered request moves the epoch on (1, 2, ... wrapping to 1); an incremental
 *   fetch names only the partitions added and those with acknowledgements, and lists the
 *   partitions dropped in ForgottenTopicsData.
 * - SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH or a lost connection: the next
 *   request opens a new session (epoch 0), as Java's nextCloseExistingAttemptNew.
 * - Epoch -1 closes it (ShareAcknowledge at close).
 *
 * Requests of one session go one at a time (`exclusive`): the broker checks each epoch
 * against the last, so a commitAsync's ShareAcknowledge and a poll's ShareFetch must not
 * overtake each other.
 */
import { assert } from '../../common/assert.js'

/** A share session epoch: 0 opens, -1 closes, 1..2^31-1 continue. */
export type ShareSessionEpoch = number & { readonly __brand: 'ShareSessionEpoch' }

export const INITIAL_SHARE_SESSION_EPOCH = 0 as ShareSessionEpoch
export const FINAL_SHARE_SESSION_EPOCH = -1 as ShareSessionEpoch
const MAX_SHARE_SESSION_EPOCH = 0x7fffffff

/** A partition by topic id, as share sessions name them. */
export interface TopicIdPartition {
  readonly topicId: string
  readonly topic: string
  readonly partition: number
}

export function tipKey(tip: { readonly topicId: string; readonly partition: number }): string {
  return `${tip.topicId}/${tip.partition}`
}

/** What the next ShareFetch names: partitions to add, partitions to forget. */
export interface SessionChange {
  readonly added: TopicIdPartition[]
  readonly forgotten: TopicIdPartition[]
}

export class ShareSession {
  private epoch: ShareSessionEpoch = INITIAL_SHARE_SESSION_EPOCH
  /** The partitions the broker holds in this session (after the last answered fetch). */
  private readonly partitions = new Map<string, TopicIdPartition>()
  private tail: Promise<unknown> = Promise.resolve()

  constructor(readonly nodeId: number) {}

  get nextEpoch(): ShareSessionEpoch {
    return this.epoch
  }

  /** Whether the broker holds a session for us (so acknowledgements may be sent). */
  get isOpen(): boolean {
    return this.epoch > 0
  }

  /**
   * The partitions the next fetch adds and forgets to make the session hold `wanted`. A new
   * session names every wanted partition and forgets none. The session's set becomes
   * `wanted` at once: a failed fetch resets the session, so the broker never holds a set
   * the client does not know.
   */
  change(wanted: readonly TopicIdPartition[]): SessionChange {
    const wantedKeys = new Set(wanted.map(tipKey))
    if (!this.isOpen) {
      this.partitions.clear()
      for (const tip of wanted) this.partitions.set(tipKey(tip), tip)
      return { added: [...wanted], forgotten: [] }
    }
    const forgotten = [...this.partitions.values()].filter((tip) => !wantedKeys.has(tipKey(tip)))
    for (const tip of forgotten) this.partitions.delete(tipKey(tip))
    const added = wanted.filter((tip) => !this.partitions.has(tipKey(tip)))
    for (const tip of added) this.partitions.set(tipKey(tip), tip)
    return { added, forgotten }
  }

  /** The broker answered without a session error: the next request continues the session. */
  onAnswered(): void {
    assert(this.epoch >= 0, 'a closed share session got an answer to continue')
    this.epoch = (this.epoch >= MAX_SHARE_SESSION_EPOCH ? 1 : this.epoch + 1) as ShareSessionEpoch
  }

  /** The session is gone (session error, lost connection): the next request opens a new one. */
  reset(): void {
    this.epoch = INITIAL_SHARE_SESSION_EPOCH
    this.partitions.clear()
  }

  /** The session was closed with epoch -1; nothing more is sent on it. */
  markClosed(): void {
    this.epoch = FINAL_SHARE_SESSION_EPOCH
    this.partitions.clear()
  }

  /** Runs `task` after every earlier request of this session has finished. */
  exclusive<T>(task: () => Promise<T>): Promise<T> {
    const run = this.tail.then(task, task)
    this.tail = run.catch(() => undefined)
    return run
  }
}

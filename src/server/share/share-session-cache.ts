/**
 * Share sessions (Kafka's ShareSessionCache, KIP-932): one per (group, member) on each
 * broker a share consumer fetches from, holding the share-partitions it fetches so that
 * later requests name only what changed. The epoch orders the requests: 0 opens a session
 * (replacing the member's old one), -1 closes it, and every other request must carry the
 * session's current epoch, which then moves on by one (wrapping past Int32 max to 1).
 *
 * Errors as Kafka's SharePartitionManager.newContext gives them: an unknown session
 * SHARE_SESSION_NOT_FOUND, a wrong epoch INVALID_SHARE_SESSION_EPOCH, acknowledgements in
 * the request that opens a session INVALID_REQUEST, and SHARE_SESSION_LIMIT_REACHED for a new
 * session while `maxSessions` (group.share.max.share.sessions) are open: as Kafka's
 * ShareSessionCache, a full cache evicts nothing, and a member opening its session again
 * frees its old one first.
 */
import { ErrorCode } from '../../protocol/error-codes.js'

/** ShareRequestMetadata's epochs. */
export const INITIAL_SHARE_SESSION_EPOCH = 0
export const FINAL_SHARE_SESSION_EPOCH = -1

export interface ShareSessionPartition {
  readonly topicId: string
  readonly partition: number
}

export interface ShareSession {
  readonly groupId: string
  readonly memberId: string
  /** The epoch the next request must carry. */
  epoch: number
  /** Keyed by shareSessionPartitionKey. */
  readonly partitions: Map<string, ShareSessionPartition>
}

export type ShareSessionStep =
  | { readonly kind: 'open' | 'continue' | 'close'; readonly session: ShareSession }
  | { readonly kind: 'error'; readonly errorCode: number }

export function shareSessionPartitionKey(topicId: string, partition: number): string {
  return `${topicId}:${partition}`
}

/** The epoch after `epoch`: Int32 max wraps to 1, never back to the initial or final epoch. */
export function nextShareSessionEpoch(epoch: number): number {
  return epoch >= 0x7fffffff ? 1 : epoch + 1
}

export class ShareSessionCache {
  private readonly sessions = new Map<string, ShareSession>()

  constructor(readonly maxSessions = Number.MAX_SAFE_INTEGER) {}

  get size(): number {
    return this.sessions.size
  }

  /** Partitions over all sessions (Kafka's SharePartitionsCount). */
  get partitionCount(): number {
    let count = 0
    for (const session of this.sessions.values()) count += session.partitions.size
    return count
  }

  get(groupId: string, memberId: string): ShareSession | undefined {
    return this.sessions.get(keyOf(groupId, memberId))
  }

  /**
   * The session a request with `epoch` works on. An opening request replaces the member's
   * session (`replaced` lets the caller release what the old one held); a closing one
   * removes it from the cache and returns it for its last use.
   */
  begin(
    groupId: string,
    memberId: string,
    epoch: number,
    hasAcknowledgements: boolean,
    replaced: (old: ShareSession) => void,
  ): ShareSessionStep {
    const key = keyOf(groupId, memberId)
    const existing = this.sessions.get(key)
    if (epoch === INITIAL_SHARE_SESSION_EPOCH) {
      if (hasAcknowledgements) return { kind: 'error', errorCode: ErrorCode.INVALID_REQUEST }
      if (existing) {
        this.sessions.delete(key)
        replaced(existing)
      }
      if (this.sessions.size >= this.maxSessions)
        return { kind: 'error', errorCode: ErrorCode.SHARE_SESSION_LIMIT_REACHED }
      const session: ShareSession = {
        groupId,
        memberId,
        epoch: nextShareSessionEpoch(INITIAL_SHARE_SESSION_EPOCH),
        partitions: new Map(),
      }
      this.sessions.set(key, session)
      return { kind: 'open', session }
    }
    if (existing === undefined) return { kind: 'error', errorCode: ErrorCode.SHARE_SESSION_NOT_FOUND }
    if (epoch === FINAL_SHARE_SESSION_EPOCH) {
      this.sessions.delete(key)
      return { kind: 'close', session: existing }
    }
    if (epoch !== existing.epoch) return { kind: 'error', errorCode: ErrorCode.INVALID_SHARE_SESSION_EPOCH }
    existing.epoch = nextShareSessionEpoch(existing.epoch)
    return { kind: 'continue', session: existing }
  }

  /** Whether a session of `groupId` other than `except` fetches `tp`. */
  anyHolds(groupId: string, tp: { topicId: string; partition: number }, except?: ShareSession): boolean {
    const key = shareSessionPartitionKey(tp.topicId, tp.partition)
    for (const session of this.sessions.values())
      if (session !== except && session.groupId === groupId && session.partitions.has(key)) return true
    return false
  }

  /** Drops the sessions of a member (it left its group, or was fenced); returns them. */
  removeMember(groupId: string, memberId: string): ShareSession | undefined {
    const key = keyOf(groupId, memberId)
    const session = this.sessions.get(key)
    this.sessions.delete(key)
    return session
  }
}

function keyOf(groupId: string, memberId: string): string {
  return `${groupId}\u0000${memberId}`
}

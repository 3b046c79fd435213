/**
 * Group-level checks: what one consumer's reads cannot show. A consumer that crashes after
 * reading, a coordinator that answers OffsetFetch one past the committed offset, or a
 * session that never expires leave each consumer's reads in order (no poll skip), yet the
 * group as a whole passes over records or stops consuming. A `group-offset` line gives the
 * group's committed offset on a partition at the end of a run; the reads of the consumers
 * declared in that group (`consumer` lines) are judged against it:
 * - group skip: a visible acknowledged record below the committed offset that no member of
 *   the group read: the group committed past it;
 * - group stall: with `endOffset` (the end the group had time to reach), a visible
 *   acknowledged record from the committed offset to `endOffset` that no member read.
 * "Visible" is the loss check's: outside transactions, or of a committed one; records of
 * aborted and undecided transactions are never required.
 */
import type { AckEvent, GroupOffsetEvent, History, SendEvent } from './history.js'

/** How many unread records one finding lists; `unreadCount` has them all. */
export const GROUP_UNREAD_LISTED_MAX = 20

export interface GroupUnreadRecord {
  readonly send: SendEvent
  readonly ack: AckEvent
}

export interface GroupFinding {
  readonly groupOffset: GroupOffsetEvent
  /** The first GROUP_UNREAD_LISTED_MAX unread records, by offset. */
  readonly unread: readonly GroupUnreadRecord[]
  readonly unreadCount: number
}

export interface GroupAnomalies {
  readonly groupSkips: readonly GroupFinding[]
  readonly groupStalls: readonly GroupFinding[]
}

const partitionKey = (topic: string, partition: number): string => `${topic}\u0000${partition}`
const recordKey = (topic: string, value: string): string => `${topic}\u0000${value}`

export function findGroupAnomalies(
  history: History,
  sendOfAck: (ack: AckEvent) => SendEvent,
  visible: (send: SendEvent) => boolean,
): GroupAnomalies {
  const acksByPartition = new Map<string, GroupUnreadRecord[]>()
  for (const ack of history.acks) {
    const send = sendOfAck(ack)
    if (ack.offset === null || !visible(send)) continue
    const key = partitionKey(ack.topic, ack.partition)
    const list = acksByPartition.get(key) ?? []
    list.push({ send, ack })
    acksByPartition.set(key, list)
  }
  for (const list of acksByPartition.values()) list.sort((a, b) => a.ack.offset! - b.ack.offset!)
  const readByGroup = new Map<string, Set<string>>()
  for (const read of history.reads) {
    const group = read.consumer === undefined ? undefined : history.consumerGroups.get(read.consumer)
    if (group === undefined) continue
    const records = readByGroup.get(group) ?? new Set<string>()
    records.add(recordKey(read.topic, read.value))
    readByGroup.set(group, records)
  }
  const groupSkips: GroupFinding[] = []
  const groupStalls: GroupFinding[] = []
  for (const groupOffset of history.groupOffsets) {
    const read = readByGroup.get(groupOffset.group) ?? new Set<string>()
    const unreadIn = (from: number, to: number): GroupUnreadRecord[] =>
      (acksByPartition.get(partitionKey(groupOffset.topic, groupOffset.partition)) ?? []).filter(
        (r) =>
          r.ack.offset! >= from && r.ack.offset! < to && !read.has(recordKey(r.send.topic, r.send.value)),
      )
    const finding = (unread: GroupUnreadRecord[]): GroupFinding => ({
      groupOffset,
      unread: unread.slice(0, GROUP_UNREAD_LISTED_MAX),
      unreadCount: unread.length,
    })
    const skipped = unreadIn(0, groupOffset.offset)
    if (skipped.length > 0) groupSkips.push(finding(skipped))
    if (groupOffset.endOffset === undefined) continue
    const stalled = unreadIn(groupOffset.offset, groupOffset.endOffset)
    if (stalled.length > 0) groupStalls.push(finding(stalled))
  }
  return { groupSkips, groupStalls }
}

/**
 * The acquiring part of a ShareFetch (Kafka's DelayedShareFetch, simplified): each session
 * partition acquires what it may for the member, within the request's record and byte
 * limits; when nothing was acquired the fetch waits up to maxWaitMs for new data on those
 * partitions and tries once more. (Records released by another member meanwhile are found
 * by the member's next fetch.)
 */

import { topicById } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { fetchWatch, waitForFetchData } from '../../replication/delayed-operations.js'
import type { RequestContext } from '../request-context.js'
import type { AcquireMode } from './share-partition.js'
import { countOne } from './share-partition-manager.js'
import { type PartitionOutcome, resolveSharePartition } from './share-requests.js'
import { sharePartitionManagerOf } from './share-services.js'

export interface ShareFetchLimits {
  readonly maxRecords: number
  readonly maxBytes: number
  readonly maxWaitMs: number
  readonly mode: AcquireMode
}

/**
 * Acquires on every target (their outcomes are filled in place); waits once when none got
 * records. Counted as Kafka's SharePartitionManager counts a share fetch:
 * TotalShareFetchRequestsPerSec once per topic fetched, FailedShareFetchRequestsPerSec once per
 * partition answered with an error (UNKNOWN_TOPIC_ID ones have no topic to count under).
 */
export async function acquireForMember(
  context: RequestContext,
  groupId: string,
  memberId: string,
  targets: PartitionOutcome[],
  limits: ShareFetchLimits,
): Promise<void> {
  await acquireAndWait(context, groupId, memberId, targets, limits)
  const counted = sharePartitionManagerOf(context.broker).stats.topicRequests
  const image = context.broker.metadataImage()
  const topics = new Set<string>()
  for (const t of targets) {
    const name = topicById(image, t.topicId)?.name
    if (name === undefined) continue
    if (!topics.has(name)) {
      topics.add(name)
      countOne(counted.fetch, name)
    }
    if (t.errorCode !== ErrorCode.NONE) countOne(counted.failedFetch, name)
  }
}

async function acquireAndWait(
  context: RequestContext,
  groupId: string,
  memberId: string,
  targets: PartitionOutcome[],
  limits: ShareFetchLimits,
): Promise<void> {
  let got = await acquireOnce(context, groupId, memberId, targets, limits)
  const anyError = targets.some((t) => t.errorCode !== ErrorCode.NONE)
  if (got > 0 || anyError || limits.maxWaitMs <= 0 || targets.length === 0) return
  // A read_committed group waits for the last stable offset: records of an open transaction
  // above it are no use to it.
  const wakeOn =
    sharePartitionManagerOf(context.broker).isolationLevel(groupId) === 'read_committed'
      ? 'lastStableOffset'
      : 'highWatermark'
  const watches = []
  for (const t of targets) {
    const tp = resolveSharePartition(context, t.topicId, t.partition)
    if (typeof tp === 'number') continue
    // The partition's visible end only: a share-partition whose state could not be read
    // is not read again here (the next fetch does).
    const partition = context.broker.replicaManager.getPartition(tp.topic, tp.partition)
    if (!partition?.isLeader || partition.id.topicId !== tp.topicId) continue
    const visibleEnd = wakeOn === 'lastStableOffset' ? partition.lastStableOffset : partition.highWatermark
    watches.push(fetchWatch(partition, visibleEnd, wakeOn))
  }
  if (watches.length === 0) return
  await waitForFetchData(
    context.broker.timingWheel,
    watches,
    1,
    limits.maxWaitMs,
    wakeOn,
    context.purgatoryTimer,
  )
  if (context.connection.isClosed) return
  got = await acquireOnce(context, groupId, memberId, targets, limits)
}

async function acquireOnce(
  context: RequestContext,
  groupId: string,
  memberId: string,
  targets: PartitionOutcome[],
  limits: ShareFetchLimits,
): Promise<number> {
  const manager = sharePartitionManagerOf(context.broker)
  let recordsLeft = limits.maxRecords
  let bytesLeft = limits.maxBytes
  let total = 0
  for (const target of targets) {
    if (target.errorCode !== ErrorCode.NONE) continue
    if (recordsLeft <= 0 || bytesLeft <= 0) break
    const tp = resolveSharePartition(context, target.topicId, target.partition)
    if (typeof tp === 'number') {
      target.errorCode = tp
      continue
    }
    const result = await manager.acquire(groupId, memberId, tp, {
      maxRecords: recordsLeft,
      maxBytes: bytesLeft,
      mode: limits.mode,
    })
    target.errorCode = result.errorCode
    if (result.acquired.length === 0) continue
    const count = result.acquired.reduce((n, r) => n + r.lastOffset - r.firstOffset + 1, 0)
    recordsLeft -= count
    bytesLeft -= result.records.reduce((n, b) => n + b.length, 0)
    total += count
    target.records.push(...result.records)
    target.acquired.push(
      ...result.acquired.map((r) => ({
        firstOffset: BigInt(r.firstOffset),
        lastOffset: BigInt(r.lastOffset),
        deliveryCount: r.deliveryCount,
      })),
    )
  }
  return total
}

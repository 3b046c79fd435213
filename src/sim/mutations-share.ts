/**
 * The share group's planted bugs (`--share`), as mutations.ts plants the others: one method
 * of a real broker class replaced for one run.
 */
import { ShareCoordinator } from '../coordinator/share/share-coordinator.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { AcknowledgeType, RecordState, SharePartition } from '../server/share/share-partition.js'
import { SharePartitionManager } from '../server/share/share-partition-manager.js'

type Log = (message: string) => void

/** What share-ack-answered-unwritten reaches inside the SharePartitionManager (private there). */
interface PersistingManager {
  persist(hosted: unknown): Promise<number>
  acknowledge(...args: unknown[]): Promise<number>
}

/**
 * `share-ack-answered-unwritten`: an acknowledgement is answered without its state being
 * written to the share coordinator; only a released lock or a closed session writes (the
 * whole state). A failover before such a write forgets what was accepted.
 */
export function plantShareAckAnsweredUnwritten(log: Log): () => void {
  const target = SharePartitionManager.prototype as unknown as PersistingManager
  const originalPersist = target.persist
  const originalAcknowledge = target.acknowledge
  let acknowledging = false
  let logged = false
  target.persist = function (this: PersistingManager, hosted: unknown): Promise<number> {
    if (!acknowledging) return originalPersist.call(this, hosted)
    if (!logged) log('MUTATION: an acknowledgement answered without writing the share-partition state')
    logged = true
    return Promise.resolve(ErrorCode.NONE)
  }
  // The original calls persist before its first await: the flag covers exactly that call.
  target.acknowledge = function (this: PersistingManager, ...args: unknown[]): Promise<number> {
    acknowledging = true
    try {
      return originalAcknowledge.apply(this, args)
    } finally {
      acknowledging = false
    }
  }
  return () => {
    target.persist = originalPersist
    target.acknowledge = originalAcknowledge
  }
}

/** What share-release-ignores-limit reaches inside a SharePartition (private there). */
interface SettlingPartition {
  settle(
    record: { state: number; deliveryCount: number; memberId: string; lockId: number },
    type: number,
  ): void
}

/**
 * `share-release-ignores-limit`: a record released (by its member, or by its lock running
 * out) is made available again even at the delivery count limit, instead of archived.
 */
export function plantShareReleaseIgnoresLimit(log: Log): () => void {
  const target = SharePartition.prototype as unknown as SettlingPartition
  const original = target.settle
  target.settle = function (this: SettlingPartition, record, type): void {
    original.call(this, record, type)
    if (type === AcknowledgeType.RELEASE && record.state === RecordState.ARCHIVED) {
      log(`MUTATION: a record released at delivery count ${record.deliveryCount} made available again`)
      record.state = RecordState.AVAILABLE
    }
  }
  return () => {
    target.settle = original
  }
}

/** What share-state-ops-unordered reaches inside the ShareCoordinator (private there). */
interface OrderingCoordinator {
  run(...args: unknown[]): Promise<unknown>
  runNow(...args: unknown[]): Promise<unknown>
}

/**
 * `share-state-ops-unordered`: the share coordinator runs a key's operations at once instead
 * of one after the other, each on the committed state (seed 7's bug: a new leader's read
 * answered without the old leader's write being committed, which was then answered as done).
 */
export function plantShareStateOpsUnordered(log: Log): () => void {
  const target = ShareCoordinator.prototype as unknown as OrderingCoordinator
  const original = target.run
  let logged = false
  target.run = function (this: OrderingCoordinator, ...args: unknown[]): Promise<unknown> {
    if (!logged) log('MUTATION: share coordinator operations of one key not ordered')
    logged = true
    return this.runNow(...args)
  }
  return () => {
    target.run = original
  }
}

/** What share-read-before-dropped-write reaches inside the SharePartitionManager (private there). */
interface DrainingManager {
  drop(key: string, hosted: unknown): void
  readonly draining: Map<string, Promise<void>>
}

/**
 * `share-read-before-dropped-write`: a dropped share-partition's last write is not waited for,
 * so the next one made for the same group and partition may read the state without it.
 */
export function plantShareReadBeforeDroppedWrite(log: Log): () => void {
  const target = SharePartitionManager.prototype as unknown as DrainingManager
  const original = target.drop
  let logged = false
  target.drop = function (this: DrainingManager, key: string, hosted: unknown): void {
    original.call(this, key, hosted)
    if (this.draining.delete(key) && !logged) {
      log("MUTATION: a dropped share-partition's last write not waited for")
      logged = true
    }
  }
  return () => {
    target.drop = original
  }
}

/**
 * The groups of one `__consumer_offsets` partition led here (Kafka's GroupCoordinatorShard
 * with its GroupMetadataManager and OffsetMetadataManager), on the coordinator runtime
 * (runtime/coordinator-runtime.ts), which loads it, unloads it and writes its records.
 *
 * Requests run the deterministic steps of rebalance.ts / offsets.ts / consumer-group.ts,
 * whose Effects say what to append and whom to answer; requests parked until then are
 * "waiters", answered NOT_COORDINATOR if the shard is dropped first. Each group has one
 * timer, armed at its next deadline, and the shard one more for offset expiration.
 */

import type { Clock } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import type { TransactionResult } from '../common/transaction.js'
import type { ProducerId } from '../common/types.js'
import { ErrorCode } from '../protocol/error-codes.js'
import {
  type ConsumerGroupConfig,
  checkSingleOwners,
  consumerGroupTick,
  nextConsumerDeadline,
  snapshotConsumerGroup,
} from './consumer-group.js'
import { type Effects, NO_EFFECTS, type WaiterResponse } from './effects.js'
import type { CoordinatorConfig, Group } from './group.js'
import { completeTransaction, expireOffsets, OffsetsLoader } from './offsets.js'
import { nextDeadline, tick } from './rebalance.js'
import { type CoordinatorRecord, decodeKey } from './records.js'
import type { CoordinatorRuntime, ShardContext } from './runtime/coordinator-runtime.js'
import type { CoordinatorShard, ReplayedBatch } from './runtime/coordinator-shard.js'
import type { ShareGroup } from './share-group.js'

export interface GroupShardConfig extends CoordinatorConfig {
  readonly offsetsCommitTimeoutMs: number
  readonly offsetsRetentionCheckIntervalMs: number
}

/** What a group shard needs besides its context: the runtime that writes, time, logs. */
export interface GroupShardServices {
  readonly runtime: CoordinatorRuntime<GroupCoordinatorShard, CoordinatorRecord>
  readonly clock: Clock
  readonly logger: Logger
  readonly config: GroupShardConfig
  readonly consumerConfig: ConsumerGroupConfig
  /** Once the shard is loaded: the share and streams coordinators arm their replayed groups' timers. */
  readonly onLoaded?: (shard: GroupCoordinatorShard) => void
}

interface Waiter {
  readonly resolve: (response: WaiterResponse) => void
  /** The answer when the shard is dropped before the request completes. */
  readonly notCoordinator: WaiterResponse
}

/** How long a consumer group's refused timeout write waits before it is tried again (Kafka's timer retry). */
const CONSUMER_TIMER_RETRY_BACKOFF_MS = 500

/** The shard timer that expires offsets (group timers are keyed by group id). */
const EXPIRY_TIMER = Symbol('offset expiry')

export const COORDINATOR_RECORD_SERDE = {
  serialize: (r: CoordinatorRecord) => r,
  deserialize: (key: Buffer, value: Buffer | null): CoordinatorRecord => ({ key, value }),
}

export class GroupCoordinatorShard implements CoordinatorShard<CoordinatorRecord> {
  readonly groups = new Map<string, Group>()
  /** Share groups (share-group-coordinator.ts): apart from `groups`, as a group id names one type. */
  readonly shareGroups = new Map<string, ShareGroup>()
  private readonly waiters = new Map<number, Waiter>()
  private nextWaiter = 1
  /** Replays the partition while loading; null once loaded. */
  private loader: OffsetsLoader | null
  /**
   * Consumer, share and streams groups with a write in flight, and the steps waiting for it:
   * one write at a time per group, so that a write refused before reaching the log can be
   * undone in memory without a later step having built on it.
   */
  private readonly consumerWrites = new WeakMap<object, (() => boolean)[]>()
  /** A consumer group whose timeout write was refused tries again only from here (Kafka: 500 ms later). */
  private readonly consumerTimerRetryAtMs = new WeakMap<Group, number>()

  constructor(
    readonly context: ShardContext<GroupCoordinatorShard>,
    private readonly services: GroupShardServices,
  ) {
    this.loader = new OffsetsLoader(
      this.groups,
      services.clock.nowMs(),
      services.consumerConfig.sessionTimeoutMs,
      this.shareGroups,
    )
  }

  get partition(): number {
    return this.context.partition
  }

  /** True once the runtime dropped this shard: its groups are no longer this broker's. */
  get unloaded(): boolean {
    return this.context.state === 'closed'
  }

  private get clock(): Clock {
    return this.services.clock
  }

  // ---- the runtime's callbacks ---------------------------------------------------------------

  replay(batch: ReplayedBatch<CoordinatorRecord>): void {
    this.loader?.replayBatch(batch)
  }

  replayEndTransactionMarker(producerId: ProducerId, result: TransactionResult): void {
    if (this.loader) this.loader.endTransaction(producerId, result === 'commit')
    else for (const group of this.groups.values()) completeTransaction(group, producerId, result === 'commit')
  }

  onLoaded(): void {
    this.loader?.finish()
    this.loader = null
    for (const group of this.groups.values()) {
      if (group.consumer !== null) checkSingleOwners(group.consumer)
      this.schedule(group)
    }
    this.scheduleExpiry()
    this.services.onLoaded?.(this)
  }

  onUnloaded(): void {
    for (const [id, waiter] of [...this.waiters]) {
      this.waiters.delete(id)
      waiter.resolve(waiter.notCoordinator)
    }
  }

  summary() {
    return { groups: this.groups.size }
  }

  // ---- running steps -------------------------------------------------------------------------

  /** Parks a waiter for the request, runs the step and returns the waiter's answer. */
  run(
    group: Group,
    notCoordinator: WaiterResponse,
    step: (waiter: number, nowMs: number) => Effects,
  ): Promise<WaiterResponse> {
    const id = this.nextWaiter++
    const promise = new Promise<WaiterResponse>((resolve) => {
      this.waiters.set(id, { resolve, notCoordinator })
    })
    this.execute(group, step(id, this.clock.nowMs()))
    return promise
  }

  /** Answers the step's replies, writes its records (then runs its afterAppend), re-arms the group's timer. */
  execute(group: Group, effects: Effects): void {
    for (const r of effects.replies) {
      const waiter = this.waiters.get(r.waiter)
      if (!waiter) continue
      this.waiters.delete(r.waiter)
      waiter.resolve(r.response)
    }
    if (effects.records.length > 0) {
      const afterAppend = effects.afterAppend
      void this.services.runtime
        .scheduleWriteOperation(this.context, {
          records: effects.records,
          timeoutMs: this.services.config.offsetsCommitTimeoutMs,
          ...(effects.transactional ? { transactional: effects.transactional } : {}),
          complete: (errorCode, baseOffset) => ({ errorCode, baseOffset }),
          // Its waiters were answered when the shard was dropped.
          notCoordinator: () => null,
        })
        .then((written) => {
          if (written === null || !afterAppend || this.unloaded) return
          this.execute(group, afterAppend(written.errorCode, this.clock.nowMs(), written.baseOffset))
        })
    }
    if (group.state === 'Dead' && this.groups.get(group.groupId) === group) {
      this.groups.delete(group.groupId)
      this.context.timer.cancel(group.groupId)
      return
    }
    this.schedule(group)
  }

  // ---- consumer groups: one write at a time --------------------------------------------------

  /**
   * Runs `step` once no other write of the group is in flight; `step` returns whether it
   * started a write (whose end, through undoIfRefused, lets the next step go).
   */
  consumerWrite(group: object, step: () => boolean): void {
    const queue = this.consumerWrites.get(group)
    if (queue) {
      queue.push(step)
      return
    }
    this.consumerWrites.set(group, [])
    if (!step()) this.nextConsumerWrite(group)
  }

  private nextConsumerWrite(group: object): void {
    const queue = this.consumerWrites.get(group)
    if (!queue) return
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) if (next()) return
    this.consumerWrites.delete(group)
  }

  /**
   * Wraps a consumer-group step's effects: a write refused before reaching the log (no base
   * offset) puts the group's state back as it was before the step, and once the write has
   * ended the group's next queued step may run. A shard dropped meanwhile never calls back;
   * its groups are discarded with it.
   */
  undoIfRefused(group: Group, effects: Effects, undo: () => void): Effects {
    const after = effects.afterAppend
    return {
      ...effects,
      afterAppend: (code, nowMs, baseOffset) => {
        if (code !== ErrorCode.NONE && baseOffset < 0) {
          undo()
          this.services.logger.info(
            { partition: this.partition, group: group.groupId, errorCode: code },
            'consumer group write refused; its change undone',
          )
        }
        const result = after ? after(code, nowMs, baseOffset) : NO_EFFECTS
        queueMicrotask(() => this.nextConsumerWrite(group))
        return result
      },
    }
  }

  /**
   * A share or streams group's step (their groups are not run through `execute`): runs once
   * no other write of `group` is in flight, writes the records it returns, and undoes the
   * step when they were refused before reaching the log, as undoIfRefused. Resolves with the
   * write's error code (NONE when there was nothing to write), NOT_COORDINATOR when the shard
   * is dropped first.
   */
  writeStep(
    group: object,
    step: () => { records: CoordinatorRecord[]; undo: () => void } | null,
  ): Promise<number> {
    return new Promise((resolve) =>
      this.consumerWrite(group, () => {
        const change = this.unloaded ? null : step()
        if (change === null || change.records.length === 0) {
          resolve(this.unloaded ? ErrorCode.NOT_COORDINATOR : ErrorCode.NONE)
          return false
        }
        void this.services.runtime
          .scheduleWriteOperation(this.context, {
            records: change.records,
            timeoutMs: this.services.config.offsetsCommitTimeoutMs,
            complete: (errorCode, baseOffset) => ({ errorCode, baseOffset }),
            notCoordinator: () => null,
          })
          .then((written) => {
            // A dropped shard's groups are discarded with it: nothing to undo or run next.
            if (written === null) return resolve(ErrorCode.NOT_COORDINATOR)
            if (written.errorCode !== ErrorCode.NONE && written.baseOffset < 0) {
              change.undo()
              this.services.logger.info(
                { partition: this.partition, errorCode: written.errorCode },
                'share or streams group write refused; its change undone',
              )
            }
            resolve(written.errorCode)
            queueMicrotask(() => this.nextConsumerWrite(group))
          })
        return true
      }),
    )
  }

  // ---- timers --------------------------------------------------------------------------------

  schedule(group: Group): void {
    if (!this.context.isActive) return
    let deadline = group.consumer !== null ? nextConsumerDeadline(group) : nextDeadline(group)
    const retryAtMs = this.consumerTimerRetryAtMs.get(group)
    if (deadline !== null && retryAtMs !== undefined) deadline = Math.max(deadline, retryAtMs)
    if (deadline === null) this.context.timer.cancel(group.groupId)
    else this.context.timer.schedule(group.groupId, deadline, () => this.onTimer(group.groupId))
  }

  private onTimer(groupId: string): void {
    const group = this.groups.get(groupId)
    if (this.unloaded || !group) return
    if (group.consumer === null) {
      this.execute(group, tick(group, this.clock.nowMs()))
      return
    }
    // Session and revocation timeouts write records: one write at a time, as heartbeats.
    this.consumerWrite(group, () => {
      if (this.unloaded || this.groups.get(groupId) !== group) return false
      const undo = snapshotConsumerGroup(group)
      const effects = consumerGroupTick(group, this.clock.nowMs())
      if (effects.records.length === 0) {
        this.schedule(group)
        return false
      }
      const retried = this.undoIfRefused(group, effects, undo)
      const after = retried.afterAppend
      this.execute(group, {
        ...retried,
        afterAppend: (code, nowMs, baseOffset) => {
          if (code !== ErrorCode.NONE && baseOffset < 0)
            this.consumerTimerRetryAtMs.set(group, nowMs + CONSUMER_TIMER_RETRY_BACKOFF_MS)
          return after ? after(code, nowMs, baseOffset) : NO_EFFECTS
        },
      })
      return true
    })
  }

  /**
   * Every offsets.retention.check.interval.ms: expired offsets (and groups left Empty without
   * offsets) are removed and their tombstones appended (see expireOffsets).
   */
  private scheduleExpiry(): void {
    const atMs = this.clock.nowMs() + this.services.config.offsetsRetentionCheckIntervalMs
    this.context.timer.schedule(EXPIRY_TIMER, atMs, () => {
      const now = this.clock.nowMs()
      let offsets = 0
      let groups = 0
      for (const group of [...this.groups.values()]) {
        const records = expireOffsets(group, now, this.services.config)
        offsets += records.filter((r) => decodeKey(r.key)?.kind === 'offset').length
        if (group.state === 'Dead') groups++
        if (records.length > 0 || group.state === 'Dead') this.execute(group, { records, replies: [] })
      }
      if (offsets > 0 || groups > 0)
        this.services.logger.info(
          { partition: this.partition, offsets, groups },
          'removed expired offsets and empty groups',
        )
      this.scheduleExpiry()
    })
  }
}

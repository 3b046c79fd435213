/**
 * A broker's view of the cluster metadata kept in the metadata store, and the way it
 * changes it. The view mirrors every key of the store (one range read, then a watch from
 * the next revision) and derives an immutable ClusterImage from it after each change: from
 * the previous image and the keys that changed, sharing the rest (image-delta.ts).
 *
 * Writes are optimistic: `update(change)` applies a pure function to the current image,
 * turns the difference into store operations guarded by the versions of the keys it read
 * (compare-and-set), and retries on a conflict with fresh state. It resolves once this
 * view has applied the write, so callers see their own change.
 *
 * The key layout and the image built from it are metadata-keys.ts.
 *
 * A write too large for one store transaction (etcd: 128 ops by default) is cut into parts
 * each consistent on its own (txn-batches.ts): one partition's state, a topic's record with
 * the partitions whose replicas it changes, a topic's deletion. A new topic's (or added
 * partitions') keys are written first, where no reader looks (the image reads only the
 * partitions a topic's record names), under a claim on staging/<name> that every staging
 * transaction and the final one compare, so two writers staging one topic cannot mix their
 * partitions; the topic's record, written last with the claim's release, publishes them at
 * once. A part way failure leaves earlier parts applied: the change is computed again
 * from the image that includes them, as after any conflict.
 */

import { assert } from '../common/assert.js'
import { ExponentialBackoff } from '../common/backoff.js'
import type { Clock, TimerHandle } from '../common/clock.js'
import { TidelogError } from '../common/errors.js'
import type { Logger } from '../common/logger.js'
import type { Random } from '../common/random.js'
import { toPartitionEpoch } from '../common/types.js'
import {
  type BrokerId,
  type BrokerRegistration,
  type ClusterImage,
  type LogEnd,
  NO_LEADER,
  type PartitionState,
  type ServedRange,
  type ServedRecord,
  type TopicImage,
} from './cluster-image.js'
import { onBrokerRegistered } from './elections.js'
import { newUuid } from './ids.js'
import { assertSameAsFullBuild, ImageBuilder, type ImageDelta } from './image-delta.js'
import { servedRecordOps } from './leadership-record.js'
import {
  diffParts,
  flatten,
  type ImageDiff,
  KEYS,
  parseValue,
  publishedTopic,
  servedRangeValue,
  type TopicValue,
} from './metadata-keys.js'
import { assignReplicas } from './placement.js'
import type {
  KeyValue,
  Lease,
  MetadataStore,
  StoreLimits,
  StoreOp,
  VersionCompare,
  Watch,
  WatchEvent,
} from './store/metadata-store.js'
import { applyInBatches, packTxns, type TxnPart } from './store/txn-batches.js'
import { txnOpCount, txnRequestBytes } from './store/txn-checks.js'

export type { ImageDelta } from './image-delta.js'
export { type ImageDiff, KEYS } from './metadata-keys.js'

export interface NewTopic {
  readonly name: string
  readonly partitions: number
  readonly replicationFactor: number
  readonly configs: Readonly<Record<string, string>>
}

export interface RegisterOptions {
  /** The process found its logs without a clean-shutdown marker: it leaves the ELRs (KIP-966). */
  readonly uncleanShutdown?: boolean
  /** Effective min.insync.replicas of a topic (its ELR); absent: 1. */
  readonly minInsyncReplicas?: (image: ClusterImage, topic: string) => number
  /** After an unclean shutdown: what the registering broker's log of a partition still holds. */
  readonly logEnd?: (topic: string, partition: number) => LogEnd | undefined
}

/** Called with each new image, the one before it, and what changed between them. */
export type ImageListener = (image: ClusterImage, previous: ClusterImage, delta: ImageDelta) => void

/** An update that kept conflicting with concurrent writers: retriable later. */
export class MetadataUpdateConflict extends TidelogError {
  constructor(attempts: number) {
    super('METADATA_UPDATE_CONFLICT', `metadata update still conflicting after ${attempts} attempts`, {
      retriable: true,
    })
    this.name = 'MetadataUpdateConflict'
  }
}

const MAX_UPDATE_ATTEMPTS = 20
/** Attempts of one update in all, progress or not: a change committed in parts may conflict once per part. */
const MAX_UPDATE_ATTEMPTS_TOTAL = 200
/**
 * How long a writer waits for the store to move on when another writer's staging claim is
 * on a topic it stages: a claimant still writing moves it on (and its topic then exists);
 * one that did not in this time is taken over (it died or gave up).
 */
const STAGING_CLAIM_WAIT_MS = 5000
/** Independent transactions of one update sent to the store at once. */
const TXNS_IN_FLIGHT_MAX = 32
/** A watch check this late (a fraction of watchStallMs) looks again after that much, not at once. */
const WATCH_CHECK_LATE_FRACTION = 0.1
/** Between attempts to read the store again after the watch ended. */
const RESYNC_BACKOFF = { initialMs: 100, maxMs: 2000 } as const

/** What the view counts of its watch (a broker's /metrics). */
export interface WatchCounters {
  /** Watches started again from a fresh read: ended by the store, or stalled. */
  readonly restarts: number
  /** Of those, watches that delivered nothing while this view waited for its own write. */
  readonly stalls: number
  /** Of those, watches the store's probe found stalled (WATCH_STALLED), whatever this view wrote. */
  readonly probeStalls: number
}

export class ClusterMetadata {
  private readonly kvs = new Map<string, KeyValue>()
  private readonly builder = new ImageBuilder(this.kvs)
  private revision = 0
  private current: ClusterImage
  private readonly listeners: ImageListener[] = []
  private revisionWaiters: { revision: number; sinceMs: number; resolve: () => void }[] = []
  /** The revision `kvs` is at; `revision` is the image's, behind it while publishing is held. */
  private appliedRevision = 0
  private publishHolds = 0
  private heldChanged = false
  private watch: Watch | null = null
  private closed = false
  /** When the watch last delivered a revision (or was started), on the clock's monotonic time. */
  private lastDeliveryMs = 0
  private watchdog: TimerHandle | null = null
  private watchdogDueMs = 0
  /** The pending check is a late one's second look: it does not look again for lateness. */
  private watchdogDeferred = false
  private readonly resyncBackoff = new ExponentialBackoff(RESYNC_BACKOFF)
  private watchRestarts = 0
  private watchStalls = 0
  private watchProbeStalls = 0
  /** Set after this process first registered its broker. */
  private registeredOnce = false
  /**
   * Names this view's staging claims (staging/<name>), to tell them from another writer's;
   * drawn on first use, so a view that never stages draws nothing (simulation seeds).
   */
  private writerIdValue: string | null = null

  private constructor(
    private readonly store: MetadataStore,
    private readonly random: Random,
    private readonly logger: Logger,
    private readonly clock: Clock | null,
    private readonly checkImages: boolean,
    private readonly watchStallMs: number | null,
  ) {
    this.current = { clusterId: '', controllerId: NO_LEADER, brokers: new Map(), topics: new Map() }
  }

  private get writerId(): string {
    this.writerIdValue ??= newUuid(this.random)
    return this.writerIdValue
  }

  /**
   * Reads the store, starts following it, and makes sure a cluster id exists. With a clock,
   * a writer that meets another's staging claim waits while that one makes progress
   * (STAGING_CLAIM_WAIT_MS) instead of taking it over at once. With `checkImages` every
   * image built by deltas is compared with a build from scratch (tests, the simulator): a
   * difference throws. With a clock and `watchStallMs`, a wait for a revision this view
   * wrote that sees the watch deliver nothing for `watchStallMs` restarts the watch
   * (checkWatch).
   */
  static async open(
    store: MetadataStore,
    options: {
      clusterId: string | null
      random: Random
      logger: Logger
      clock?: Clock
      checkImages?: boolean
      watchStallMs?: number
    },
  ) {
    assert(
      options.watchStallMs === undefined || options.clock !== undefined,
      'a watch stall check needs a clock',
    )
    const metadata = new ClusterMetadata(
      store,
      options.random,
      options.logger,
      options.clock ?? null,
      options.checkImages === true,
      options.watchStallMs ?? null,
    )
    await metadata.ensureClusterId(options.clusterId)
    await metadata.reload()
    metadata.follow()
    return metadata
  }

  /** Watches every key from the next revision; a watch that ends (compaction) restarts from a fresh read. */
  private follow(): void {
    this.lastDeliveryMs = this.clock?.monotonicMs() ?? 0
    this.watch = this.store.watch(
      '',
      this.appliedRevision + 1,
      (events, revision) => this.onEvents(events, revision),
      (error) => {
        if (this.closed || error.code === 'STORE_CLOSED') return
        this.logger.warn({ err: error }, 'metadata watch ended; reloading')
        this.watch = null
        this.watchRestarts++
        if (error.code === 'WATCH_STALLED') this.watchProbeStalls++
        this.resync(1)
      },
    )
  }

  /**
   * Reads the whole store again and follows it from there, retrying with backoff for as
   * long as it fails: a view that gave up would serve this image for good.
   */
  private resync(attempt: number): void {
    this.reload().then(
      () => {
        if (!this.closed) this.follow()
      },
      (error: unknown) => {
        if (this.closed) return
        if (this.clock === null) {
          this.logger.error({ err: error }, 'metadata reload failed')
          return
        }
        const delayMs = this.resyncBackoff.delayMs(attempt)
        this.logger.warn({ err: error, attempt, delayMs }, 'metadata reload failed; retrying')
        this.clock.setTimeout(() => {
          if (!this.closed) this.resync(attempt + 1)
        }, delayMs)
      },
    )
  }

  /**
   * A wait for a revision this view wrote knows the store is past it: a watch that delivered
   * nothing for `watchStallMs` meanwhile has been left behind, as etcd 3.4 (before 3.4.31)
   * leaves a watcher whose stream fell behind while its process was paused or starved: it
   * never catches up, the image stays stale, and the write's caller (a registration after a
   * lost session) waits for ever. Restart it from a fresh read. Checks only while someone
   * waits, so an idle view arms no timer. A check that runs late (this process was held up:
   * paused, a long collection) looks once more shortly after instead, once the watch's data
   * that arrived meanwhile has had its turn: a reload of a large store is no small cost.
   */
  private checkWatch(): void {
    this.watchdog = null
    const clock = this.clock
    const stallMs = this.watchStallMs
    if (clock === null || stallMs === null || this.closed || this.revisionWaiters.length === 0) return
    const nowMs = clock.monotonicMs()
    const waitedSinceMs = Math.min(...this.revisionWaiters.map((w) => w.sinceMs))
    const silentMs = nowMs - Math.max(this.lastDeliveryMs, waitedSinceMs)
    if (silentMs < stallMs || this.watch === null) {
      this.armWatchdog(Math.max(1, stallMs - silentMs))
      return
    }
    if (!this.watchdogDeferred && nowMs - this.watchdogDueMs > stallMs * WATCH_CHECK_LATE_FRACTION) {
      this.armWatchdog(Math.ceil(stallMs * WATCH_CHECK_LATE_FRACTION), true)
      return
    }
    const waitedRevision = Math.max(...this.revisionWaiters.map((w) => w.revision))
    this.logger.warn(
      { silentMs: Math.round(silentMs), appliedRevision: this.appliedRevision, waitedRevision },
      'metadata watch stalled: nothing delivered while the store is past this image; restarting it from a fresh read',
    )
    this.watchStalls++
    this.watchRestarts++
    this.watch.cancel()
    this.watch = null
    this.resync(1)
    this.armWatchdog(stallMs)
  }

  private armWatchdog(delayMs: number, deferred = false): void {
    const clock = this.clock
    assert(clock !== null && this.watchdog === null, 'one watch check at a time, on a clock')
    this.watchdogDeferred = deferred
    this.watchdogDueMs = clock.monotonicMs() + delayMs
    this.watchdog = clock.setTimeout(() => this.checkWatch(), delayMs)
  }

  /** Restarts of the watch so far (a broker's /metrics). */
  watchCounters(): WatchCounters {
    return { restarts: this.watchRestarts, stalls: this.watchStalls, probeStalls: this.watchProbeStalls }
  }

  image(): ClusterImage {
    return this.current
  }

  /** What one transaction of the store holds (a change larger than that is split). */
  get storeLimits(): StoreLimits {
    return this.store.limits
  }

  /** Calls `listener` after every new image; the returned function stops it. */
  onChange(listener: ImageListener): () => void {
    this.listeners.push(listener)
    return () => {
      const index = this.listeners.indexOf(listener)
      if (index >= 0) this.listeners.splice(index, 1)
    }
  }

  close(): void {
    this.closed = true
    this.watchdog?.cancel()
    this.watchdog = null
    this.watch?.cancel()
    this.watch = null
  }

  private async ensureClusterId(wanted: string | null): Promise<void> {
    const existing = await this.store.get(KEYS.clusterId)
    if (existing) {
      const stored = (JSON.parse(existing.value) as { clusterId: string }).clusterId
      if (wanted !== null && wanted !== stored) {
        throw new Error(`cluster.id ${wanted} does not match ${stored} in the metadata store`)
      }
      return
    }
    const value = JSON.stringify({ clusterId: wanted ?? newUuid(this.random) })
    await this.store.txn([{ key: KEYS.clusterId, version: 0 }], [{ type: 'put', key: KEYS.clusterId, value }])
  }

  /** Replaces the mirror with a fresh read (after a conflict, the watch may lag the store). */
  private async reload(): Promise<void> {
    const { kvs, revision } = await this.store.range('')
    if (revision < this.appliedRevision) return
    this.kvs.clear()
    for (const kv of kvs) this.kvs.set(kv.key, kv)
    this.builder.reset()
    this.appliedRevision = revision
    this.publish(revision)
  }

  private onEvents(events: readonly WatchEvent[], revision: number): void {
    if (revision <= this.appliedRevision) return // already seen through a reload
    if (this.clock !== null) this.lastDeliveryMs = this.clock.monotonicMs()
    for (const { type, kv } of events) {
      if (type === 'put') this.kvs.set(kv.key, kv)
      else this.kvs.delete(kv.key)
      this.builder.onKeyChanged(kv.key)
    }
    this.appliedRevision = revision
    // A revision of staged partitions and claims only (a big topic being created) leaves
    // the image as it was: every broker rebuilt and applied it once per staging transaction.
    const changed = events.some(({ kv }) => this.isRead(kv.key))
    if (this.publishHolds > 0) this.heldChanged ||= changed
    else this.publish(revision, changed)
  }

  /**
   * While this view writes a change in several transactions, its own image follows the
   * store once they are all written instead of once per transaction: rebuilding and
   * applying the whole image per transaction was most of the controller's time in the
   * failover of thousands of partitions (the other brokers still see every revision).
   */
  private async holdingPublish<T>(work: () => Promise<T>): Promise<T> {
    this.publishHolds++
    try {
      return await work()
    } finally {
      this.publishHolds--
      if (this.publishHolds === 0 && this.appliedRevision > this.revision) {
        const changed = this.heldChanged
        this.heldChanged = false
        this.publish(this.appliedRevision, changed)
      }
    }
  }

  /**
   * Whether the image reads `key`, as the store is now: not a staging claim, nor a
   * partition its topic's record does not name (yet).
   */
  private isRead(key: string): boolean {
    if (key.startsWith(KEYS.stagingPrefix)) return false
    if (!key.startsWith(KEYS.partitionsPrefix)) return true
    const slash = key.lastIndexOf('/')
    const topic = this.kvs.get(KEYS.topic(key.slice(KEYS.partitionsPrefix.length, slash)))
    if (topic === undefined) return false
    return (
      Number(key.slice(slash + 1)) <
      (parseValue(this.builder.parsed, topic).value as TopicValue).replicas.length
    )
  }

  private publish(revision: number, changed = true): void {
    const previous = this.current
    this.revision = revision
    if (changed) {
      const { image, delta } = this.builder.build(previous)
      if (this.checkImages) assertSameAsFullBuild(image, this.kvs)
      this.current = image
      for (const listener of [...this.listeners]) listener(image, previous, delta)
    }
    const ready = this.revisionWaiters.filter((w) => w.revision <= revision)
    this.revisionWaiters = this.revisionWaiters.filter((w) => w.revision > revision)
    for (const waiter of ready) waiter.resolve()
    if (this.revisionWaiters.length === 0) {
      this.watchdog?.cancel()
      this.watchdog = null
    }
  }

  private waitForRevision(revision: number): Promise<void> {
    if (this.revision >= revision) return Promise.resolve()
    const sinceMs = this.clock?.monotonicMs() ?? 0
    const waiting = new Promise<void>((resolve) => this.revisionWaiters.push({ revision, sinceMs, resolve }))
    if (this.watchdog === null && this.clock !== null && this.watchStallMs !== null)
      this.armWatchdog(this.watchStallMs)
    return waiting
  }

  /**
   * Applies `change` (a pure function; it may run more than once) by compare-and-set and
   * resolves with the image that includes it. The registrations of `guardBrokers` are part
   * of the compare: the change applies only if each is still the one (same broker epoch)
   * `change` saw, as the controller checks broker epochs in AlterPartition.
   */
  async update(
    change: (image: ClusterImage) => ClusterImage,
    guardBrokers: readonly BrokerId[] = [],
  ): Promise<ClusterImage> {
    let fruitless = 0
    const claimsSeenAtMs = new Map<string, number>()
    for (let attempt = 1; attempt <= MAX_UPDATE_ATTEMPTS_TOTAL; attempt++) {
      const base = this.current
      const next = change(base)
      if (next === base) return base
      const diff = diffParts(base, next, this.kvs)
      if (diff.parts.length === 0 && diff.staged.size === 0) return base
      const shared: VersionCompare[] = []
      for (const id of new Set(guardBrokers)) {
        const kv = this.kvs.get(KEYS.broker(id))
        shared.push({ key: KEYS.broker(id), version: kv?.version ?? 0, modRevision: kv?.modRevision ?? 0 })
      }
      const claimWaitMs = this.claimWaitMs(diff, claimsSeenAtMs)
      if (claimWaitMs > 0) {
        // Another writer stages one of these topics: let it finish, or take over a claim
        // left unchanged for STAGING_CLAIM_WAIT_MS (its writer died or gave up).
        await this.storeMovesOn(claimWaitMs)
        attempt--
        continue
      }
      const startedMs = this.clock?.monotonicMs() ?? 0
      const outcome = await this.commit(diff, shared)
      if (outcome.committed > 1)
        this.logger.debug(
          { transactions: outcome.committed, ms: (this.clock?.monotonicMs() ?? 0) - startedMs, attempt },
          'metadata update written in several transactions',
        )
      if (outcome.revision !== null) {
        await this.waitForRevision(outcome.revision)
        return this.current
      }
      fruitless = outcome.committed > 0 ? 0 : fruitless + 1
      if (fruitless >= MAX_UPDATE_ATTEMPTS) break
      this.logger.debug({ attempt }, 'metadata update conflicted; retrying with fresh state')
      await this.reload()
    }
    throw new MetadataUpdateConflict(MAX_UPDATE_ATTEMPTS)
  }

  /**
   * Writes `diff` (guarded by `shared` in every transaction) and then `last`: in one
   * transaction when it fits the store's limits, else staged partitions first and the rest
   * in batches, `last` in the final one. Resolves with the revision of the final
   * transaction, or null once a compare failed, with how many transactions had committed.
   */
  private async commit(
    diff: ImageDiff,
    shared: readonly VersionCompare[],
    last: readonly StoreOp[] = [],
  ): Promise<{ revision: number | null; committed: number }> {
    const whole = flatten(diff)
    const compares = [...whole.compares, ...shared]
    const ops = [...whole.ops, ...last]
    const limits = this.store.limits
    if (
      txnOpCount(compares, ops) <= limits.txnOpsMax &&
      txnRequestBytes(compares, ops) <= limits.requestBytesMax
    ) {
      const result = await this.store.txn(compares, ops)
      return { revision: result.succeeded ? result.revision : null, committed: result.succeeded ? 1 : 0 }
    }
    return this.holdingPublish(async () => {
      let committed = 0
      // The transactions of one step are independent (each part stands alone), so they go to
      // the store together, up to TXNS_IN_FLIGHT_MAX at a time: their round trips overlap
      // (etcd may also batch them into fewer raft rounds and fsyncs).
      const run = async (txns: readonly TxnPart[]): Promise<number | null> => {
        let revision = 0
        let failed = false
        for (let from = 0; from < txns.length && !failed; from += TXNS_IN_FLIGHT_MAX) {
          const results = await Promise.all(
            txns.slice(from, from + TXNS_IN_FLIGHT_MAX).map((txn) => this.store.txn(txn.compares, txn.ops)),
          )
          for (const result of results) {
            if (!result.succeeded) failed = true
            else {
              committed++
              revision = Math.max(revision, result.revision)
            }
          }
        }
        return failed ? null : revision
      }
      // Checked before anything is written: a part too large alone fails the whole change.
      const visible = [...diff.parts, ...(last.length > 0 ? [{ compares: [], ops: last }] : [])]
      packTxns(limits, visible, shared)
      const claims = [...diff.staged.keys()].map((name) =>
        this.stagingClaim(name, diff.topicIds.get(name) ?? ''),
      )
      const claimTxns = packTxns(
        limits,
        claims.map((claim) => claim.part),
        shared,
      )
      const claimed = new Map<string, VersionCompare>()
      let claimIndex = 0
      for (const txn of claimTxns) {
        const revision = await run([txn])
        if (revision === null) return { revision: null, committed }
        for (const op of txn.ops) {
          const claim = claims[claimIndex++]
          assert(op.type === 'put' && op.key === KEYS.staging(claim.name), 'staging claims out of order')
          claimed.set(claim.name, { key: op.key, version: claim.version + 1, modRevision: revision })
        }
      }
      const stagedTxns = [...diff.staged].flatMap(([name, parts]) => {
        const claim = claimed.get(name)
        assert(claim !== undefined, () => `topic ${name} staged without a claim`)
        return packTxns(limits, parts, [...shared, claim])
      })
      if ((await run(stagedTxns)) === null) return { revision: null, committed }
      // Each staged topic's record is published with its claim compared and released.
      const published = visible.map((part) => {
        const name = publishedTopic(part)
        const claim = name === null ? undefined : claimed.get(name)
        if (claim === undefined) return part
        return {
          compares: [...part.compares, claim],
          ops: [...part.ops, { type: 'delete', key: claim.key } as const],
        }
      })
      const txns = packTxns(limits, published, shared)
      // `last` (a registration) commits after everything else.
      const final = last.length > 0 ? txns.pop() : undefined
      let revision = await run(txns)
      if (revision !== null && final !== undefined) revision = await run([final])
      return { revision, committed }
    })
  }

  /**
   * How long to wait before staging `diff`: 0 unless a staged topic carries another
   * writer's claim seen (at that revision) less than STAGING_CLAIM_WAIT_MS ago. Without a
   * clock claims are taken over at once.
   */
  private claimWaitMs(diff: ImageDiff, seenAtMs: Map<string, number>): number {
    if (this.clock === null) return 0
    const nowMs = this.clock.monotonicMs()
    let waitMs = 0
    for (const name of diff.staged.keys()) {
      const kv = this.kvs.get(KEYS.staging(name))
      if (kv === undefined || (JSON.parse(kv.value) as { writer?: string }).writer === this.writerIdValue)
        continue
      const seen = `${kv.key}@${kv.modRevision}`
      const firstMs = seenAtMs.get(seen) ?? nowMs
      seenAtMs.set(seen, firstMs)
      waitMs = Math.max(waitMs, firstMs + STAGING_CLAIM_WAIT_MS - nowMs)
    }
    return waitMs
  }

  /** True once this view applies a newer revision of the store, false after `timeoutMs` without. */
  private storeMovesOn(timeoutMs: number): Promise<boolean> {
    const clock = this.clock
    assert(clock !== null, 'waiting on the store needs a clock')
    return new Promise((resolve) => {
      const timer = clock.setTimeout(() => resolve(false), timeoutMs)
      void this.waitForRevision(this.revision + 1).then(() => {
        timer.cancel()
        resolve(true)
      })
    })
  }

  /** A claim on staging/<name>, taking over whatever claim is there (one a crashed writer left). */
  private stagingClaim(name: string, topicId: string): { name: string; version: number; part: TxnPart } {
    const key = KEYS.staging(name)
    const kv = this.kvs.get(key)
    const version = kv?.version ?? 0
    const compare: VersionCompare = kv ? { key, version, modRevision: kv.modRevision } : { key, version: 0 }
    return {
      name,
      version,
      part: {
        compares: [compare],
        ops: [{ type: 'put', key, value: JSON.stringify({ topicId, writer: this.writerId }) }],
      },
    }
  }

  /**
   * Registers a broker bound to `lease` and resolves with its broker epoch (the revision
   * that wrote the registration), or null when it kept conflicting with concurrent writes.
   * A registration of the same node id by another incarnation
   * is replaced at once, as KRaft's registration does, instead of waiting for its lease to
   * expire: the new broker epoch fences the previous process (its ISR changes, its ISR
   * membership and its fetches carry the old epoch), which sees the replacement and stops.
   */
  async register(
    registration: BrokerRegistration,
    lease: Lease,
    options: RegisterOptions = {},
  ): Promise<number | null> {
    assert(registration.incarnationId !== undefined, 'a registration names its incarnation')
    const key = KEYS.broker(registration.nodeId)
    const { brokerEpoch: _derived, ...stored } = registration
    const put = { type: 'put', key, value: JSON.stringify(stored), lease: lease.id } as const
    let fruitless = 0
    for (
      let attempt = 1;
      attempt <= MAX_UPDATE_ATTEMPTS_TOTAL && fruitless < MAX_UPDATE_ATTEMPTS;
      attempt++
    ) {
      const base = this.current
      const existing = this.kvs.get(key)
      // A process's first registration is a new incarnation (Kafka: a new broker epoch): it
      // gives up what its predecessor held in the same transaction, so no controller sees it
      // registered while it still leads, counts in an ISR or (unclean) stands in an ELR.
      // Registering again after a lost session is the same process with the same log.
      const registered = { ...base, brokers: new Map(base.brokers).set(registration.nodeId, registration) }
      const next = this.registeredOnce
        ? registered
        : leaveLeadershipsAndIsrs(registered, registration.nodeId, options)
      // The registration comes last, with the partitions it leaves written before it.
      const guard = { key, version: existing?.version ?? 0, modRevision: existing?.modRevision ?? 0 }
      const result = await this.commit(diffParts(base, next, this.kvs), [guard], [put])
      if (result.revision !== null) {
        await this.waitForRevision(result.revision)
        const previous = existing
          ? (JSON.parse(existing.value) as BrokerRegistration).incarnationId
          : undefined
        if (existing && previous !== registration.incarnationId)
          this.logger.info(
            {
              nodeId: registration.nodeId,
              previousIncarnationId: previous,
              incarnationId: registration.incarnationId,
            },
            'replaced the registration of a previous incarnation of this broker',
          )
        this.registeredOnce = true
        return result.revision
      }
      fruitless = result.committed > 0 ? 0 : fruitless + 1
      this.logger.debug({ attempt }, 'registration conflicted; retrying with fresh state')
      await this.reload()
    }
    return null
  }

  /**
   * Records what `nodeId` serves as leader (see ClusterImage.servedLeaderEpochs), whole: the
   * ranges that differ from the store's. A broker's LeadershipRecord writes by itself.
   */
  async recordServed(nodeId: BrokerId, record: ServedRecord): Promise<void> {
    await this.writeServed(servedRecordOps(nodeId, record, await this.readServed(nodeId)).ops)
  }

  /** The keys of `nodeId`'s served record in the store, with their ranges (LeadershipRecord). */
  async readServed(nodeId: BrokerId): Promise<Map<string, ServedRange | null>> {
    const whole = KEYS.servedWhole(nodeId)
    const keys = new Map<string, ServedRange | null>()
    // The prefix without its slash also holds the whole-record key of before the split.
    for (const kv of (await this.store.range(whole)).kvs)
      if (kv.key === whole) keys.set(kv.key, null)
      else if (kv.key.startsWith(KEYS.servedOf(nodeId))) keys.set(kv.key, servedRangeValue(new Map(), kv))
    return keys
  }

  /**
   * Puts and deletes of one broker's served keys. Only that broker writes them, so no
   * compare-and-set; each key stands alone, so they may take several transactions.
   */
  async writeServed(ops: readonly StoreOp[]): Promise<void> {
    await applyInBatches(this.store, ops)
  }

  /** A new topic placed over the live brokers (Kafka's assignment rules). */
  createTopicImage(spec: NewTopic): TopicImage {
    const brokers = [...this.current.brokers.values()]
    const assignment =
      spec.partitions === 0
        ? []
        : assignReplicas(brokers, spec.partitions, spec.replicationFactor, () => this.random.next())
    return {
      name: spec.name,
      topicId: newUuid(this.random),
      partitions: assignment.map((replicas, partition) => initialState(partition, replicas)),
      configs: { ...spec.configs },
    }
  }

  /** A partition added to an existing topic, placed like a new one. */
  newPartition(partition: number, replicationFactor: number): PartitionState {
    const brokers = [...this.current.brokers.values()]
    const [replicas] = assignReplicas(brokers, 1, replicationFactor, () => this.random.next(), partition)
    return initialState(partition, replicas)
  }
}

/** A new partition on the given replicas, led by the first, every replica in the ISR. */
export function initialState(partition: number, replicas: readonly BrokerId[]): PartitionState {
  return {
    partition,
    replicas: [...replicas],
    isr: [...replicas],
    leader: replicas[0],
    leaderEpoch: 0,
    partitionEpoch: toPartitionEpoch(0),
  }
}

/**
 * A broker process registering for the first time gives up what its previous process held (see
 * elections.onBrokerRegistered): found by the deterministic simulation (seed 36), where a
 * broker restarted after a power loss re-registered before any controller saw it go and
 * led again in the same leader epoch with a shorter log; followers truncated acknowledged
 * records to match it.
 */
function leaveLeadershipsAndIsrs(
  image: ClusterImage,
  nodeId: BrokerId,
  options: RegisterOptions,
): ClusterImage {
  const live = new Set(image.brokers.keys())
  let changed = false
  const topics = new Map(image.topics)
  for (const topic of image.topics.values()) {
    const minIsr = options.minInsyncReplicas?.(image, topic.name)
    const partitions = topic.partitions.map((state) => {
      const input = { state, live, uncleanLeaderElection: false, minIsr }
      const unclean = options.uncleanShutdown === true
      const logEnd = unclean ? options.logEnd?.(topic.name, state.partition) : undefined
      const result = onBrokerRegistered(input, nodeId, unclean, logEnd)
      if (result) changed = true
      return result?.state ?? state
    })
    topics.set(topic.name, { ...topic, partitions })
  }
  return changed ? { ...image, topics } : image
}

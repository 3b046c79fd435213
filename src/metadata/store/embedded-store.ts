/**
 * The embedded metadata store: the whole keyspace in memory, for one process running any
 * number of brokers (`tidelog start`). Same model as etcd (see metadata-store.ts):
 * - revisions: +1 per transaction that changed something; a successful transaction whose
 *   ops changed nothing (only deletes of absent keys, or no ops) keeps the revision, as etcd;
 * - watches replay a bounded history of past revisions, then follow live changes; callbacks
 *   run in a microtask, never inside the writer's call stack;
 * - leases live as long as this process: nothing expires unless a test suspends keep-alive
 *   (`suspendKeepAlive`), expires it (`expireLease`) or the holder revokes it;
 * - elections use the shared recipe in election.ts.
 *
 * Writes are serialized. With `persistPath`, each transaction's changes to keys not bound to
 * a lease reach the journal (fsync) before they are applied and the transaction resolves.
 * Time comes only from the injected Clock, so a simulation can drive lease expiry.
 */
import { assert } from '../../common/assert.js'
import type { Clock, TimerHandle } from '../../common/clock.js'
import type { FileSystem } from '../../common/file-system.js'
import { campaign as campaignOn, leader as leaderOf } from './election.js'
import {
  Journal,
  type JournalRecord,
  type JournalSnapshot,
  type PersistedKeyValue,
} from './embedded-journal.js'
import {
  type KeyValue,
  type Leadership,
  type Lease,
  type MetadataStore,
  MetadataStoreError,
  type RangeResult,
  STORE_LIMITS_DEFAULT,
  type StoreLimits,
  type StoreOp,
  type TxnResult,
  type VersionCompare,
  type Watch,
  type WatchEvent,
} from './metadata-store.js'
import { assertValidTxn, checkedLimits, checkTxnFits } from './txn-checks.js'

export interface EmbeddedStoreOptions {
  readonly clock: Clock
  /** File for the keys not bound to a lease; without it nothing outlives the process. */
  readonly persistPath?: string
  /** Disk access for persistence (node:fs, or the simulator's disk); required with persistPath. */
  readonly fs?: FileSystem
  /** Revisions kept for watches that start in the past; older ones are compacted away. */
  readonly historyRevisionsMax?: number
  /** The persistence file is rewritten as one snapshot once it grows past this. */
  readonly journalBytesMax?: number
  /** Largest transaction accepted; etcd's defaults unless set, so tests meet etcd's limits. */
  readonly limits?: StoreLimits
}

const HISTORY_REVISIONS_MAX_DEFAULT = 10_000
const JOURNAL_BYTES_MAX_DEFAULT = 16 * 1024 * 1024
const LEASE_TTL_MIN_MS = 1000

/** One key's change within a revision, decided before anything is applied. */
type Change =
  | { readonly type: 'put'; readonly kv: KeyValue }
  | { readonly type: 'delete'; readonly key: string }

interface HistoryEntry {
  readonly revision: number
  readonly events: readonly WatchEvent[]
}

interface LeaseEntry {
  readonly lease: Lease
  readonly resolveLost: () => void
  expiryTimer: TimerHandle | null
}

export class EmbeddedStore implements MetadataStore {
  /** etcd's empty keyspace is at revision 1 too. */
  private revision = 1
  /** Events of revisions up to this one are no longer in the history. */
  private compactedRevision = 0
  private readonly kvs = new Map<string, KeyValue>()
  private readonly keysByLease = new Map<string, Set<string>>()
  private readonly leases = new Map<string, LeaseEntry>()
  private readonly history: HistoryEntry[] = []
  private readonly watches = new Set<EmbeddedWatch>()
  private readonly writes = new SerialQueue()
  private nextLeaseNumber = 1
  private closed = false
  /** Set when the journal failed: memory and disk may disagree, so the store stops. */
  private failure: unknown = null

  readonly limits: StoreLimits

  private constructor(
    private readonly clock: Clock,
    private readonly journal: Journal | null,
    private readonly historyRevisionsMax: number,
    limits: StoreLimits,
  ) {
    assert(historyRevisionsMax >= 1, 'historyRevisionsMax must be at least 1')
    this.limits = checkedLimits(limits)
  }

  static async open(options: EmbeddedStoreOptions): Promise<EmbeddedStore> {
    const historyRevisionsMax = options.historyRevisionsMax ?? HISTORY_REVISIONS_MAX_DEFAULT
    const limits = options.limits ?? STORE_LIMITS_DEFAULT
    if (options.persistPath === undefined)
      return new EmbeddedStore(options.clock, null, historyRevisionsMax, limits)
    if (options.fs === undefined) throw new Error('EmbeddedStore: persistPath needs a file system (fs)')
    const { journal, state } = await Journal.open(
      options.fs,
      options.persistPath,
      options.journalBytesMax ?? JOURNAL_BYTES_MAX_DEFAULT,
    )
    const store = new EmbeddedStore(options.clock, journal, historyRevisionsMax, limits)
    store.restore(state.revision, state.kvs)
    return store
  }

  /** The revision after the last transaction that changed something. */
  currentRevision(): number {
    return this.revision
  }

  async get(key: string): Promise<KeyValue | null> {
    this.assertUsable()
    return this.kvs.get(key) ?? null
  }

  async range(prefix: string): Promise<RangeResult> {
    this.assertUsable()
    const kvs = [...this.kvs.values()].filter((kv) => kv.key.startsWith(prefix))
    kvs.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    return { kvs, revision: this.revision }
  }

  async txn(compares: readonly VersionCompare[], ops: readonly StoreOp[]): Promise<TxnResult> {
    this.assertUsable()
    assertValidTxn(compares, ops)
    checkTxnFits(this.limits, compares, ops)
    return this.writes.run(() => this.applyTxn(compares, ops))
  }

  watch(
    prefix: string,
    fromRevision: number,
    onEvents: (events: readonly WatchEvent[], revision: number) => void,
    onError?: (error: MetadataStoreError) => void,
  ): Watch {
    this.assertUsable()
    assert(Number.isInteger(fromRevision) && fromRevision >= 1, () => `watch fromRevision ${fromRevision}`)
    if (fromRevision <= this.compactedRevision) {
      throw new MetadataStoreError(
        'REVISION_COMPACTED',
        `revision ${fromRevision} was compacted (history starts after ${this.compactedRevision})`,
      )
    }
    const watch = new EmbeddedWatch(prefix, onEvents, onError, () => this.watches.delete(watch))
    for (const entry of this.history) {
      if (entry.revision >= fromRevision) watch.offer(entry.revision, entry.events)
    }
    this.watches.add(watch)
    return watch
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    this.assertUsable()
    assert(
      Number.isInteger(ttlMs) && ttlMs >= LEASE_TTL_MIN_MS,
      () => `lease ttlMs ${ttlMs} < ${LEASE_TTL_MIN_MS}`,
    )
    const id = String(this.nextLeaseNumber++)
    let resolveLost!: () => void
    const lost = new Promise<void>((resolve) => {
      resolveLost = resolve
    })
    const lease: Lease = { id, ttlMs, lost, revoke: () => this.revokeLease(id) }
    this.leases.set(id, { lease, resolveLost, expiryTimer: null })
    return lease
  }

  async campaign(election: string, candidate: string, lease: Lease): Promise<Leadership> {
    this.assertUsable()
    return campaignOn(this, election, candidate, lease)
  }

  leader(election: string): Promise<string | null> {
    return leaderOf(this, election)
  }

  /** Ends the lease now: its keys are deleted in one revision. No-op for an ended lease. */
  revokeLease(leaseId: string): Promise<void> {
    return this.endLease(leaseId)
  }

  /** Test hook: the lease ends now, as if its holder had stopped keeping it alive a TTL ago. */
  expireLease(leaseId: string): Promise<void> {
    return this.endLease(leaseId)
  }

  /**
   * Test hook: the holder stops keeping the lease alive (a hung or partitioned process), so
   * it expires one TTL from now on the injected clock.
   */
  suspendKeepAlive(leaseId: string): void {
    this.assertUsable()
    const entry = this.leases.get(leaseId)
    if (entry === undefined) throw new MetadataStoreError('LEASE_NOT_FOUND', `lease ${leaseId} not found`)
    if (entry.expiryTimer !== null) return
    entry.expiryTimer = this.clock.setTimeout(() => {
      this.endLease(leaseId).catch(rethrowAsync)
    }, entry.lease.ttlMs)
  }

  /**
   * Test hook: the holder keeps the lease alive again before it expired (a paused process
   * resumed within its TTL). No-op for a lease that ended or was never suspended.
   */
  resumeKeepAlive(leaseId: string): void {
    const entry = this.leases.get(leaseId)
    if (entry === undefined || entry.expiryTimer === null) return
    entry.expiryTimer.cancel()
    entry.expiryTimer = null
  }

  /** Waits for queued writes, ends every lease and watch, and closes the journal. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const entry of this.leases.values()) {
      entry.expiryTimer?.cancel()
      entry.resolveLost()
    }
    this.leases.clear()
    for (const watch of [...this.watches]) watch.fail(new MetadataStoreError('STORE_CLOSED', 'store closed'))
    await this.writes.run(() => this.closeJournal())
  }

  private assertUsable(): void {
    if (this.failure !== null) {
      throw new MetadataStoreError(
        'STORE_UNAVAILABLE',
        'metadata store stopped after a persistence failure',
        this.failure,
      )
    }
    if (this.closed) throw new MetadataStoreError('STORE_CLOSED', 'metadata store closed')
  }

  private restore(revision: number, kvs: ReadonlyMap<string, PersistedKeyValue>): void {
    assert(this.kvs.size === 0 && this.history.length === 0, 'restore into a used store')
    for (const kv of kvs.values()) this.kvs.set(kv.key, { ...kv, lease: null })
    this.revision = Math.max(this.revision, revision)
    // The events that led here are not kept: a watch must start after the restored revision.
    this.compactedRevision = this.revision
  }

  private async applyTxn(compares: readonly VersionCompare[], ops: readonly StoreOp[]): Promise<TxnResult> {
    if (this.failure !== null) this.assertUsable()
    if (!compares.every((compare) => this.holds(compare))) {
      return { succeeded: false, revision: this.revision }
    }
    const changes = this.plan(ops)
    if (changes.length > 0) {
      await this.persist(changes)
      this.commit(changes)
      await this.maybeCompactJournal()
    }
    return { succeeded: true, revision: this.revision }
  }

  private holds(compare: VersionCompare): boolean {
    const kv = this.kvs.get(compare.key)
    if ((kv?.version ?? 0) !== compare.version) return false
    return compare.modRevision === undefined || (kv?.modRevision ?? 0) === compare.modRevision
  }

  /** The changes `ops` make at the next revision; deletes of absent keys change nothing. */
  private plan(ops: readonly StoreOp[]): Change[] {
    const revision = this.revision + 1
    const changes: Change[] = []
    const deleted = new Set<string>()
    const remove = (key: string) => {
      if (!this.kvs.has(key) || deleted.has(key)) return
      deleted.add(key)
      changes.push({ type: 'delete', key })
    }
    for (const op of ops) {
      if (op.type === 'put') changes.push({ type: 'put', kv: this.nextKeyValue(op, revision) })
      else if (op.type === 'delete') remove(op.key)
      else for (const key of this.keysWithPrefix(op.prefix)) remove(key)
    }
    return changes
  }

  private nextKeyValue(op: StoreOp & { type: 'put' }, revision: number): KeyValue {
    if (op.lease !== undefined && !this.leases.has(op.lease)) {
      throw new MetadataStoreError('LEASE_NOT_FOUND', `lease ${op.lease} not found (expired or revoked)`)
    }
    const previous = this.kvs.get(op.key)
    return {
      key: op.key,
      value: op.value,
      version: (previous?.version ?? 0) + 1,
      createRevision: previous?.createRevision ?? revision,
      modRevision: revision,
      lease: op.lease ?? null,
    }
  }

  private keysWithPrefix(prefix: string): string[] {
    return [...this.kvs.keys()].filter((key) => key.startsWith(prefix)).sort()
  }

  /** Journals the changes to keys not bound to a lease; a journal failure stops the store. */
  private async persist(changes: readonly Change[]): Promise<void> {
    if (this.journal === null) return
    const record = this.journalRecord(changes)
    if (record.puts.length === 0 && record.deletes.length === 0) return
    try {
      await this.journal.append(record)
    } catch (err) {
      this.failure = err
      throw new MetadataStoreError('STORE_UNAVAILABLE', 'persisting the metadata store failed', err)
    }
  }

  /**
   * After a commit, so the snapshot includes it. A failure here stops the store for later
   * calls, but this transaction is already durable in the old file and stays successful.
   */
  private async maybeCompactJournal(): Promise<void> {
    if (this.journal === null) return
    try {
      await this.journal.maybeCompact(() => this.snapshot())
    } catch (err) {
      this.failure = err
    }
  }

  private journalRecord(changes: readonly Change[]): JournalRecord {
    const puts: PersistedKeyValue[] = []
    const deletes: string[] = []
    for (const change of changes) {
      const key = change.type === 'put' ? change.kv.key : change.key
      if (change.type === 'put' && change.kv.lease === null) puts.push(persisted(change.kv))
      // Deleted, or now bound to a lease: either way gone after a restart.
      else if (this.kvs.get(key)?.lease === null) deletes.push(key)
    }
    return { revision: this.revision + 1, puts, deletes }
  }

  /** Every key not bound to a lease, as of the current revision. */
  private snapshot(): JournalSnapshot {
    const kvs: PersistedKeyValue[] = []
    for (const kv of this.kvs.values()) if (kv.lease === null) kvs.push(persisted(kv))
    return { revision: this.revision, kvs }
  }

  /** Applies planned changes as one new revision and hands its events to the watches. */
  private commit(changes: readonly Change[]): void {
    assert(changes.length > 0, 'empty commit')
    const revision = this.revision + 1
    const events = changes.map((change) =>
      change.type === 'put' ? this.applyPut(change.kv, revision) : this.applyDelete(change.key, revision),
    )
    this.revision = revision
    this.history.push({ revision, events })
    this.trimHistory()
    for (const watch of this.watches) watch.offer(revision, events)
  }

  private applyPut(kv: KeyValue, revision: number): WatchEvent {
    const previous = this.kvs.get(kv.key)
    assert(kv.modRevision === revision, () => `put of ${kv.key} planned for another revision`)
    assert(kv.version === (previous?.version ?? 0) + 1, () => `version of ${kv.key} skips`)
    if (previous?.lease) this.unbind(previous.lease, kv.key)
    this.kvs.set(kv.key, kv)
    if (kv.lease !== null) this.bind(kv.lease, kv.key)
    return { type: 'put', kv }
  }

  private applyDelete(key: string, revision: number): WatchEvent {
    const previous = this.kvs.get(key)
    assert(previous !== undefined, () => `delete of absent ${key}`)
    if (previous.lease !== null) this.unbind(previous.lease, key)
    this.kvs.delete(key)
    return {
      type: 'delete',
      kv: { key, value: '', version: 0, createRevision: 0, modRevision: revision, lease: null },
    }
  }

  private bind(leaseId: string, key: string): void {
    let keys = this.keysByLease.get(leaseId)
    if (keys === undefined) {
      keys = new Set()
      this.keysByLease.set(leaseId, keys)
    }
    keys.add(key)
  }

  private unbind(leaseId: string, key: string): void {
    const keys = this.keysByLease.get(leaseId)
    assert(keys !== undefined, () => `lease ${leaseId} has no keys`)
    assert(keys.has(key), () => `${key} not bound to lease ${leaseId}`)
    keys.delete(key)
    if (keys.size === 0) this.keysByLease.delete(leaseId)
  }

  private trimHistory(): void {
    while (this.history.length > this.historyRevisionsMax) {
      const dropped = this.history.shift()
      assert(dropped !== undefined && dropped.revision > this.compactedRevision, 'history out of order')
      this.compactedRevision = dropped.revision
    }
  }

  /**
   * The holder learns of the loss first (`lost` resolves now, and no new key can bind to
   * the lease); its keys are deleted by a queued write, so a write already in flight with
   * this lease is deleted too.
   */
  private endLease(leaseId: string): Promise<void> {
    const entry = this.leases.get(leaseId)
    if (entry === undefined) return Promise.resolve()
    this.leases.delete(leaseId)
    entry.expiryTimer?.cancel()
    entry.resolveLost()
    return this.writes.run(async () => this.deleteLeaseKeys(leaseId))
  }

  private deleteLeaseKeys(leaseId: string): void {
    if (this.closed || this.failure !== null) return
    const keys = this.keysByLease.get(leaseId)
    if (keys === undefined) return
    // Lease-bound keys are never journaled, so this revision needs no fsync.
    this.commit([...keys].sort().map((key): Change => ({ type: 'delete', key })))
    assert(!this.keysByLease.has(leaseId), () => `lease ${leaseId} still has keys`)
  }

  /** Records the final revision, so a reopened store never goes back in revisions. */
  private async closeJournal(): Promise<void> {
    if (this.journal === null) return
    if (this.failure === null && this.revision > this.journal.persistedRevision()) {
      await this.journal.append({ revision: this.revision, puts: [], deletes: [] })
    }
    await this.journal.close()
  }
}

function persisted(kv: KeyValue): PersistedKeyValue {
  assert(kv.lease === null, () => `lease-bound ${kv.key} persisted`)
  return {
    key: kv.key,
    value: kv.value,
    version: kv.version,
    createRevision: kv.createRevision,
    modRevision: kv.modRevision,
  }
}

/** A bug in a callback-driven path must still crash the process (top level), not vanish. */
function rethrowAsync(err: unknown): void {
  queueMicrotask(() => {
    throw err
  })
}

/**
 * One watcher: revisions queue here and are delivered in order from a microtask, so a
 * callback never runs inside the transaction that caused it and never sees a revision twice.
 */
class EmbeddedWatch implements Watch {
  private pending: HistoryEntry[] = []
  private scheduled = false
  private ended = false
  private lastRevision = 0

  constructor(
    private readonly prefix: string,
    private readonly onEvents: (events: readonly WatchEvent[], revision: number) => void,
    private readonly onError: ((error: MetadataStoreError) => void) | undefined,
    private readonly onEnd: () => void,
  ) {}

  offer(revision: number, events: readonly WatchEvent[]): void {
    if (this.ended) return
    const mine = events.filter((event) => event.kv.key.startsWith(this.prefix))
    if (mine.length === 0) return
    this.pending.push({ revision, events: mine })
    if (this.scheduled) return
    this.scheduled = true
    queueMicrotask(() => this.deliver())
  }

  cancel(): void {
    if (this.ended) return
    this.ended = true
    this.pending = []
    this.onEnd()
  }

  fail(error: MetadataStoreError): void {
    if (this.ended) return
    this.cancel()
    if (this.onError !== undefined) queueMicrotask(() => this.onError?.(error))
  }

  private deliver(): void {
    this.scheduled = false
    while (!this.ended && this.pending.length > 0) {
      const entry = this.pending.shift()
      assert(entry !== undefined && entry.revision > this.lastRevision, 'watch revisions out of order')
      this.lastRevision = entry.revision
      this.onEvents(entry.events, entry.revision)
    }
  }
}

/** Runs tasks one at a time in submission order; each caller gets its own task's outcome. */
class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve()

  run<T>(task: () => Promise<T> | T): Promise<T> {
    const result = this.tail.then(task)
    // The queue only orders; the outcome, failure included, belongs to `result`'s caller.
    this.tail = result.then(
      () => undefined,
      () => undefined,
    )
    return result
  }
}

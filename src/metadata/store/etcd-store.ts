/**
 * The metadata store on etcd (npm `etcd3`), for clusters of broker processes. Every key lives
 * under a namespace prefix ('/tidelog' by default), so several clusters or test runs can share
 * one etcd. The model in metadata-store.ts is etcd's own; this file only translates:
 * - revisions are etcd's header revisions; versions compare with `Version ==`;
 * - watches are etcd watches from a start revision, one `onEvents` call per revision, and
 *   resume after a reconnect from the revision after the last one delivered; each watch has
 *   a gRPC stream of its own, so one that etcd left behind can be replaced by a new stream
 *   (etcd 3.4 before 3.4.31 can leave a watcher of a stream that fell behind unsynced for
 *   good: etcd issue 17529, docs/notes/scale.md);
 * - leases are etcd leases (TTL rounded up to whole seconds) with keep-alives of our own
 *   (EtcdSessionLease); `lost` resolves when etcd says the lease is gone, and also once a TTL
 *   has passed since the last keep-alive etcd confirmed (or since every etcd endpoint last
 *   refused connections: a stopped etcd expires nothing), so a holder cut off from etcd
 *   stops acting on its session no later than etcd expires it (no split brain);
 * - elections use the shared recipe in election.ts.
 * Connection failures reject with MetadataStoreError('STORE_UNAVAILABLE').
 */

import { ConsecutiveBreaker, circuitBreaker, ExponentialBackoff, handleWhen } from 'cockatiel'
import {
  type ComparatorBuilder,
  type DeleteBuilder,
  Etcd3,
  type Lease as EtcdLease,
  EtcdLeaseInvalidError,
  GRPCDeadlineExceededError,
  GRPCInvalidArgumentError,
  type IEvent,
  type IKeyValue,
  type IWatchResponse,
  isRecoverableError,
  type Namespace,
  type PutBuilder,
  type Watcher,
} from 'etcd3'
import { assert } from '../../common/assert.js'
import { type Clock, systemClock, type TimerHandle } from '../../common/clock.js'
import { type Logger, silentLogger } from '../../common/logger.js'
import type { Network } from '../../common/network.js'
import { campaign as campaignOn, leader as leaderOf } from './election.js'
import { openEtcdReplay } from './etcd-watch-replay.js'
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
import { type ProbedWatch, sharedRevisionRead, WatchProbe } from './watch-probe.js'

export interface EtcdStoreOptions {
  /** Client URLs, e.g. `http://127.0.0.1:2379`. */
  readonly endpoints: readonly string[]
  /** Namespace of every key; '/tidelog' by default. */
  readonly prefix?: string
  readonly logger?: Logger
  readonly clock?: Clock
  /** Deadline of each request, so calls to an unreachable etcd fail instead of hanging. */
  readonly callTimeoutMs?: number
  /** etcd's `--max-txn-ops` and `--max-request-bytes` as the server runs with; its defaults unless set. */
  readonly limits?: StoreLimits
  /**
   * Asks whether etcd refuses connections when keep-alives fail, so a session goes on while
   * etcd is down (EtcdSessionLease). Without it a session ends one TTL after its last
   * confirmed keep-alive, whatever the reason.
   */
  readonly network?: Network
  /**
   * How often a watch that delivered nothing meanwhile is checked against the store
   * (watch-probe.ts); null: never. A stall is found within about three of these.
   */
  readonly watchProbeIntervalMs?: number | null
}

const PREFIX_DEFAULT = '/tidelog'
/** Any non-empty key does (etcd rejects an empty one, which an empty prefix would give). */
const ALWAYS_TRUE_COMPARE_KEY = '\u0000'
const CALL_TIMEOUT_MS_DEFAULT = 5000
const LEASE_TTL_MIN_MS = 1000
/** How soon a host whose calls kept failing gets a call again. */
const HOST_HALF_OPEN_AFTER_MS = 500
/** The longest wait before a broken watch reconnects. */
const WATCH_BACKOFF_MAX_MS = 1000
/** How long past its gRPC deadline a keep-alive may take before it counts as unanswered. */
const KEEPALIVE_GRACE_MS = 500
/**
 * A keep-alive confirmed with less than this fraction of the TTL left (sent late because the
 * event loop was held up, or answered slowly) is logged: the next such delay loses the session.
 */
const KEEPALIVE_LATE_LEFT_FRACTION = 0.5
/** How long close() waits for its leases' revokes before it drops the connection anyway. */
const CLOSE_REVOKE_WAIT_MS = 2000
/** A third of broker.session.timeout.ms's default: a stall is found within about a session. */
const WATCH_PROBE_INTERVAL_MS_DEFAULT = 3000

export class EtcdStore implements MetadataStore {
  private closed = false
  private readonly leases = new Map<string, EtcdSessionLease>()
  private readonly watches = new Set<EtcdWatch>()

  readonly limits: StoreLimits
  /** The store's revision for the watch probes, one read for all of them (a point read). */
  private readonly probeRevision: () => Promise<number>

  private constructor(
    private readonly client: Etcd3,
    private readonly prefix: string,
    private readonly ns: Namespace,
    private readonly clock: Clock,
    private readonly logger: Logger,
    limits: StoreLimits,
    private readonly endpoints: readonly string[],
    private readonly network: Network | null,
    private readonly watchProbeIntervalMs: number | null,
  ) {
    this.limits = checkedLimits(limits)
    const read = () =>
      this.call('watch probe', () => this.ns.get(ALWAYS_TRUE_COMPARE_KEY).exec()).then((response) =>
        toRevision(response.header.revision),
      )
    this.probeRevision = sharedRevisionRead(read, clock, (watchProbeIntervalMs ?? 0) / 2)
  }

  /** Connects and makes one read, so an unreachable etcd fails here with STORE_UNAVAILABLE. */
  static async connect(options: EtcdStoreOptions): Promise<EtcdStore> {
    assert(options.endpoints.length > 0, 'etcd endpoints must not be empty')
    const clock = options.clock ?? systemClock
    const callTimeoutMs = options.callTimeoutMs ?? CALL_TIMEOUT_MS_DEFAULT
    const client = new Etcd3({
      hosts: [...options.endpoints],
      dialTimeout: callTimeoutMs,
      // Streams (watch, keep-alive) live on; single requests get a deadline.
      defaultCallOptions: (context) =>
        context.isStream ? {} : { deadline: new Date(clock.nowMs() + callTimeoutMs) },
      // etcd3's defaults keep a host that failed 3 calls closed for 5 s, and back a broken
      // watch off up to 30 s: after an outage the brokers would wait that long for etcd,
      // which is back, to confirm their sessions and send them the metadata changed meanwhile.
      faultHandling: {
        host: () =>
          circuitBreaker(handleWhen(isRecoverableError), {
            halfOpenAfter: HOST_HALF_OPEN_AFTER_MS,
            breaker: new ConsecutiveBreaker(3),
          }),
        // etcd3 types this as a backoff and calls next() on it to start: its first step does.
        watchBackoff: new ExponentialBackoff({ initialDelay: 100, maxDelay: WATCH_BACKOFF_MAX_MS }).next(),
      },
    })
    const prefix = options.prefix ?? PREFIX_DEFAULT
    const store = new EtcdStore(
      client,
      prefix,
      client.namespace(prefix),
      clock,
      options.logger ?? silentLogger,
      options.limits ?? STORE_LIMITS_DEFAULT,
      options.endpoints,
      options.network ?? null,
      options.watchProbeIntervalMs === undefined
        ? WATCH_PROBE_INTERVAL_MS_DEFAULT
        : options.watchProbeIntervalMs,
    )
    try {
      await store.range('')
    } catch (err) {
      client.close()
      throw err
    }
    return store
  }

  async get(key: string): Promise<KeyValue | null> {
    const response = await this.call('get', () => this.ns.get(key).exec())
    const raw = response.kvs[0]
    // A single-key read comes back with the namespace prefix still on the key.
    return raw === undefined ? null : toKeyValue(raw, key)
  }

  async range(prefix: string): Promise<RangeResult> {
    const response = await this.call('range', () =>
      this.ns.getAll().prefix(prefix).sort('Key', 'Ascend').exec(),
    )
    return { kvs: response.kvs.map((raw) => toKeyValue(raw)), revision: toRevision(response.header.revision) }
  }

  async txn(compares: readonly VersionCompare[], ops: readonly StoreOp[]): Promise<TxnResult> {
    assertValidTxn(compares, ops)
    checkTxnFits(this.limits, compares, ops)
    const response = await this.call('txn', () => {
      const builder = this.comparator(compares).then(...ops.map((op) => this.operation(op)))
      return builder.commit()
    })
    return { succeeded: response.succeeded, revision: toRevision(response.header.revision) }
  }

  watch(
    prefix: string,
    fromRevision: number,
    onEvents: (events: readonly WatchEvent[], revision: number) => void,
    onError?: (error: MetadataStoreError) => void,
  ): Watch {
    this.assertOpen()
    assert(Number.isInteger(fromRevision) && fromRevision >= 1, () => `watch fromRevision ${fromRevision}`)
    const watch = new EtcdWatch(fromRevision, onEvents, onError, {
      logger: this.logger,
      onEnd: () => this.watches.delete(watch),
      explain: (err, revision) => this.explainWatchFailure(err, prefix, revision),
    })
    // A namespace of its own has a watch stream of its own (etcd3 multiplexes a namespace's
    // watches on one): a watch restarted after etcd stopped feeding it gets a fresh stream.
    const own = this.client.namespace(this.prefix)
    watch.start(own.watch().prefix(prefix).startRevision(String(fromRevision)).watcher())
    this.watches.add(watch)
    if (this.watchProbeIntervalMs !== null)
      watch.probeWith(this.watchProbe(watch, prefix, this.watchProbeIntervalMs))
    return watch
  }

  /** Checks the watch against the store while it is silent (watch-probe.ts); a stall ends it. */
  private watchProbe(watch: EtcdWatch, prefix: string, intervalMs: number): WatchProbe {
    return new WatchProbe(watch, {
      clock: this.clock,
      intervalMs,
      storeRevision: this.probeRevision,
      openReplay: (fromRevision, onRevision, onCompacted) =>
        openEtcdReplay(
          this.client.namespace(this.prefix),
          prefix,
          fromRevision,
          onRevision,
          onCompacted,
          this.logger,
        ),
      onStall: (finding) => {
        this.logger.warn({ prefix, ...finding }, 'etcd watch stalled (found by its probe); ending it')
        const why = `etcd watch of '${prefix}' stalled: ${finding.reason} (next ${finding.nextRevision}, store ${finding.storeRevision})`
        watch.fail(new MetadataStoreError('WATCH_STALLED', why))
      },
      onLookFailed: (err) => this.logger.debug({ err, prefix }, 'etcd watch probe failed; next look later'),
    })
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    this.assertOpen()
    assert(
      Number.isInteger(ttlMs) && ttlMs >= LEASE_TTL_MIN_MS,
      () => `lease ttlMs ${ttlMs} < ${LEASE_TTL_MIN_MS}`,
    )
    const ttlSeconds = Math.max(1, Math.ceil(ttlMs / 1000))
    // etcd starts the TTL when it receives the grant, so counting from before the request is safe.
    const requestedAtMs = this.clock.monotonicMs()
    const inner = this.ns.lease(ttlSeconds, { autoKeepAlive: false })
    const id = await this.call('lease grant', () => inner.grant())
    const lease = new EtcdSessionLease(id, ttlSeconds * 1000, inner, {
      clock: this.clock,
      logger: this.logger,
      aliveFromMs: requestedAtMs,
      onEnd: (ended) => this.leases.delete(ended.id),
      toStoreError: (err, what) => this.toStoreError(err, what),
      everyEndpointRefuses: (withinMs) =>
        this.network === null
          ? Promise.resolve(false)
          : everyEndpointRefuses(this.network, this.clock, this.endpoints, withinMs),
    })
    this.leases.set(id, lease)
    return lease
  }

  async campaign(election: string, candidate: string, lease: Lease): Promise<Leadership> {
    this.assertOpen()
    return campaignOn(this, election, candidate, lease)
  }

  leader(election: string): Promise<string | null> {
    return leaderOf(this, election)
  }

  /**
   * Test hook: stops keep-alives without revoking (etcd3's `release()`), as a hung holder
   * would; etcd expires the lease after its TTL and `lost` resolves about then.
   */
  suspendKeepAlive(leaseId: string): void {
    const lease = this.leases.get(leaseId)
    if (lease === undefined) throw new MetadataStoreError('LEASE_NOT_FOUND', `lease ${leaseId} not found`)
    lease.suspendKeepAlive()
  }

  /** Revokes this store's leases (so sessions end now, not a TTL later) and disconnects. */
  async close(): Promise<void> {
    if (this.closed) return
    const revokes = [...this.leases.values()].map((lease) => lease.revoke())
    await this.waitAtMost(CLOSE_REVOKE_WAIT_MS, Promise.allSettled(revokes))
    this.closed = true
    for (const watch of [...this.watches]) watch.fail(new MetadataStoreError('STORE_CLOSED', 'store closed'))
    this.client.close()
  }

  /**
   * etcd cancels a watch whose start revision was compacted with an empty reason, so ask a
   * read at that revision what is wrong.
   */
  private async explainWatchFailure(
    err: Error,
    prefix: string,
    revision: number,
  ): Promise<MetadataStoreError> {
    try {
      await this.ns.getAll().prefix(prefix).revision(revision).limit(1).exec()
    } catch (probeError) {
      if (probeError instanceof Error && /compacted/.test(probeError.message)) {
        return new MetadataStoreError(
          'REVISION_COMPACTED',
          `etcd watch: revision ${revision} was compacted`,
          err,
        )
      }
    }
    return new MetadataStoreError('STORE_UNAVAILABLE', `etcd watch ended: ${err.message}`, err)
  }

  private async waitAtMost(ms: number, work: Promise<unknown>): Promise<void> {
    const timers: TimerHandle[] = []
    const timeout = new Promise<void>((resolve) => {
      timers.push(this.clock.setTimeout(resolve, ms))
    })
    await Promise.race([work, timeout])
    for (const timer of timers) timer.cancel()
  }

  /** etcd3 has no transaction without a compare; a version is never below 0, so this one always holds. */
  private comparator(compares: readonly VersionCompare[]): ComparatorBuilder {
    const [first, ...rest] = compares
    if (first === undefined) return this.ns.if(ALWAYS_TRUE_COMPARE_KEY, 'Version', '>', -1)
    const builder = this.ns.if(first.key, 'Version', '==', first.version)
    if (first.modRevision !== undefined) builder.and(first.key, 'Mod', '==', first.modRevision)
    for (const compare of rest) {
      builder.and(compare.key, 'Version', '==', compare.version)
      if (compare.modRevision !== undefined) builder.and(compare.key, 'Mod', '==', compare.modRevision)
    }
    return builder
  }

  private operation(op: StoreOp): PutBuilder | DeleteBuilder {
    switch (op.type) {
      case 'put': {
        const put = this.ns.put(op.key).value(op.value)
        return op.lease === undefined ? put : put.lease(op.lease)
      }
      case 'delete':
        return this.ns.delete().key(op.key)
      case 'deletePrefix':
        return this.ns.delete().prefix(op.prefix)
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new MetadataStoreError('STORE_CLOSED', 'metadata store closed')
  }

  private async call<T>(what: string, request: () => Promise<T>): Promise<T> {
    this.assertOpen()
    try {
      return await request()
    } catch (err) {
      throw this.toStoreError(err, what)
    }
  }

  private toStoreError(err: unknown, what: string): Error {
    if (err instanceof MetadataStoreError) return err
    if (this.closed) return new MetadataStoreError('STORE_CLOSED', `etcd ${what}: store closed`, err)
    if (err instanceof EtcdLeaseInvalidError) {
      return new MetadataStoreError(
        'LEASE_NOT_FOUND',
        `etcd ${what}: lease not found (expired or revoked)`,
        err,
      )
    }
    // etcd runs with lower limits than the store was told (tidelog.metadata.store.max.*).
    if (
      err instanceof GRPCInvalidArgumentError &&
      /too many operations|request is too large/.test(err.message)
    ) {
      return new MetadataStoreError(
        'TXN_TOO_LARGE',
        `etcd ${what} refused: ${err.message} (etcd's limits are below tidelog.metadata.store.max.txn.ops or max.request.bytes)`,
        err,
      )
    }
    // etcd refusing a malformed request is a bug here, not an outage.
    if (err instanceof GRPCInvalidArgumentError) return err
    const message = err instanceof Error ? err.message : String(err)
    return new MetadataStoreError('STORE_UNAVAILABLE', `etcd ${what} failed: ${message}`, err)
  }
}

function toRevision(value: string | number): number {
  const revision = Number(value)
  assert(Number.isSafeInteger(revision) && revision >= 0, () => `etcd revision ${value}`)
  return revision
}

function toKeyValue(raw: IKeyValue, key: string = raw.key.toString()): KeyValue {
  const version = toRevision(raw.version)
  assert(version >= 1, () => `etcd key ${key} with version ${raw.version}`)
  return {
    key,
    value: raw.value.toString(),
    version,
    createRevision: toRevision(raw.create_revision),
    modRevision: toRevision(raw.mod_revision),
    lease: raw.lease === '0' || raw.lease === undefined ? null : String(raw.lease),
  }
}

function toWatchEvent(event: IEvent): WatchEvent {
  const key = event.kv.key.toString()
  if (event.type === 'Put') return { type: 'put', kv: toKeyValue(event.kv, key) }
  const modRevision = toRevision(event.kv.mod_revision)
  return { type: 'delete', kv: { key, value: '', version: 0, createRevision: 0, modRevision, lease: null } }
}

/**
 * One etcd watcher. etcd3 re-subscribes by itself after a disconnect, but from the store
 * revision it last heard of, which during a replay is past events not yet delivered; so on
 * every (re)subscription the request starts at the revision after the last one delivered,
 * and anything at or below it that arrives again is skipped.
 */
interface EtcdWatchContext {
  readonly logger: Logger
  readonly onEnd: () => void
  /** Why etcd ended the watch, given the revision it was to resume from. */
  readonly explain: (err: Error, revision: number) => Promise<MetadataStoreError>
}

class EtcdWatch implements Watch, ProbedWatch {
  /** Read by the probe (ProbedWatch). */
  nextRevision: number
  deliveries = 0
  private probe: WatchProbe | null = null
  private ended = false
  /**
   * etcd cancelled the watch (its revision compacted): etcd3 has dropped the watcher, and a
   * cancel request of ours would draw an answer for a watch id it no longer knows, which it
   * throws on, crashing the process.
   */
  private cancelledByEtcd = false
  private watcher: Watcher | null = null

  constructor(
    fromRevision: number,
    private readonly onEvents: (events: readonly WatchEvent[], revision: number) => void,
    private readonly onError: ((error: MetadataStoreError) => void) | undefined,
    private readonly context: EtcdWatchContext,
  ) {
    this.nextRevision = fromRevision
  }

  probeWith(probe: WatchProbe): void {
    assert(this.probe === null, 'one probe a watch')
    this.probe = probe
    if (this.ended) probe.stop()
  }

  start(watcher: Watcher): void {
    this.watcher = watcher
    // etcd3 types this as the outer request, but hands over the create request it will send.
    watcher.on('connecting', (request) => {
      ;(request as { start_revision?: string | number }).start_revision = String(this.nextRevision)
    })
    watcher.on('data', (response) => this.onResponse(response))
    watcher.on('disconnected', (err) =>
      this.context.logger.debug({ err }, 'etcd watch disconnected; resuming'),
    )
    watcher.on('error', (err) => this.onWatcherError(err))
  }

  cancel(): void {
    if (this.ended) return
    this.ended = true
    this.probe?.stop()
    this.context.onEnd()
    if (this.cancelledByEtcd) return
    this.watcher?.cancel().catch((err: unknown) => {
      // The stream is going away anyway (closed client, lost connection).
      this.context.logger.debug({ err }, 'etcd watch cancel failed')
    })
  }

  private onWatcherError(err: Error): void {
    if (this.ended) return
    // etcd3 emits 'error' only for a cancellation by etcd.
    this.cancelledByEtcd = true
    this.context
      .explain(err, this.nextRevision)
      .then((error) => this.fail(error))
      .catch((bug: unknown) => {
        // explain() resolves on every outcome; reaching here is a bug, so crash.
        queueMicrotask(() => {
          throw bug
        })
      })
  }

  fail(error: MetadataStoreError): void {
    if (this.ended) return
    this.cancel()
    this.onError?.(error)
  }

  private onResponse(response: IWatchResponse): void {
    for (const [revision, events] of groupByRevision(response.events)) {
      if (this.ended) return
      if (revision < this.nextRevision) continue
      this.nextRevision = revision + 1
      this.deliveries++
      this.onEvents(events, revision)
    }
  }
}

/** etcd sends a revision's events together and in order; one response may hold several revisions. */
function groupByRevision(events: readonly IEvent[]): [number, WatchEvent[]][] {
  const groups: [number, WatchEvent[]][] = []
  for (const raw of events) {
    const event = toWatchEvent(raw)
    const last = groups[groups.length - 1]
    if (last !== undefined && last[0] === event.kv.modRevision) {
      last[1].push(event)
      continue
    }
    assert(last === undefined || last[0] < event.kv.modRevision, 'etcd watch revisions out of order')
    groups.push([event.kv.modRevision, [event]])
  }
  return groups
}

interface SessionLeaseContext {
  readonly clock: Clock
  readonly logger: Logger
  /** When the lease was requested: etcd cannot expire it before this + TTL. */
  readonly aliveFromMs: number
  readonly onEnd: (lease: EtcdSessionLease) => void
  readonly toStoreError: (err: unknown, what: string) => Error
  /** True when no etcd endpoint accepts a TCP connection (each refuses within `withinMs`). */
  readonly everyEndpointRefuses: (withinMs: number) => Promise<boolean>
}

/**
 * A lease kept alive here, one keep-alive at a time every TTL/3, with a deadline of our
 * own. Two things prove the lease lives until at least a moment T + TTL:
 * - a keep-alive sent at T that etcd confirmed;
 * - every etcd endpoint refusing a connection at T: no member was running then, a stopped
 *   etcd expires nothing, and a member that starts after T renews every lease for a full
 *   TTL as it takes the lead. So while etcd is down the session goes on, as a Kafka broker
 *   goes on serving while its controller quorum is unreachable: nothing can change the
 *   metadata it serves from meanwhile. (The endpoints must name every member.)
 * Once the latest such moment + TTL passes, `lost` resolves: a holder cut off from etcd, a
 * frozen etcd, or a pause of this process, ends the session no later than etcd may expire
 * it (no split brain). etcd3's own keep-alive loop is not used: it gives a lease up after
 * two TTLs without a confirmation whatever the reason, and cannot take it up again.
 */
class EtcdSessionLease implements Lease {
  readonly lost: Promise<void>
  private resolveLost!: () => void
  private ended = false
  /** A suspended holder plays dead: it must not revoke, so etcd's own expiry is what ends it. */
  private suspended = false
  private aliveUntilMs: number
  private deadline: TimerHandle | null = null
  private nextKeepalive: TimerHandle | null = null
  /** Going on because etcd refuses connections (logged once per outage). */
  private onRefusals = false
  private revoking: Promise<void> | null = null

  constructor(
    readonly id: string,
    readonly ttlMs: number,
    private readonly inner: EtcdLease,
    private readonly context: SessionLeaseContext,
  ) {
    this.lost = new Promise<void>((resolve) => {
      this.resolveLost = resolve
    })
    this.aliveUntilMs = context.aliveFromMs + ttlMs
    // keepaliveOnce() and puts under the lease emit 'lost' when etcd says the lease is gone.
    inner.on('lost', (err) => this.end(`etcd reports it lost: ${err.message}`))
    this.armDeadline()
    this.scheduleKeepalive(0)
  }

  async revoke(): Promise<void> {
    this.end('revoked')
    await this.revokeInner()
  }

  suspendKeepAlive(): void {
    this.suspended = true
    this.nextKeepalive?.cancel()
    this.nextKeepalive = null
  }

  private scheduleKeepalive(delayMs: number): void {
    if (this.ended || this.suspended) return
    const dueAtMs = this.context.clock.monotonicMs() + delayMs
    this.nextKeepalive = this.context.clock.setTimeout(() => {
      this.nextKeepalive = null
      this.sendKeepalive(dueAtMs).then(
        () => this.scheduleKeepalive(this.ttlMs / 3),
        // sendKeepalive() handles its failures; this is a bug.
        (bug: unknown) =>
          queueMicrotask(() => {
            throw bug
          }),
      )
    }, delayMs)
  }

  private async sendKeepalive(dueAtMs: number): Promise<void> {
    const clock = this.context.clock
    const sentAtMs = clock.monotonicMs()
    const answerWithinMs = this.ttlMs / 3
    try {
      await this.answeredWithin(
        this.inner.keepaliveOnce({ deadline: new Date(clock.nowMs() + answerWithinMs) }),
        answerWithinMs + KEEPALIVE_GRACE_MS,
      )
    } catch (err) {
      if (this.ended || err instanceof EtcdLeaseInvalidError) return // 'lost' ended it
      this.context.logger.debug({ err, lease: this.id }, 'etcd keep-alive failed')
      await this.probeRefusal()
      return
    }
    if (this.ended) return
    this.warnIfLate(dueAtMs, sentAtMs)
    this.extendTo(sentAtMs + this.ttlMs)
    if (this.onRefusals) {
      this.onRefusals = false
      this.context.logger.warn({ lease: this.id }, 'etcd answers again: store session confirmed')
    }
  }

  /** A confirmation that came with little of the TTL left: why a session is lost shows here first. */
  private warnIfLate(dueAtMs: number, sentAtMs: number): void {
    const nowMs = this.context.clock.monotonicMs()
    const leftMs = this.aliveUntilMs - nowMs
    if (leftMs >= this.ttlMs * KEEPALIVE_LATE_LEFT_FRACTION) return
    this.context.logger.warn(
      {
        lease: this.id,
        sentLateMs: Math.round(sentAtMs - dueAtMs),
        roundTripMs: Math.round(nowMs - sentAtMs),
        leaseLeftMs: Math.round(leftMs),
        ttlMs: this.ttlMs,
      },
      'etcd keep-alive late: the store session nearly expired',
    )
  }

  /**
   * etcd3's circuit breaker answers for the connection most of the time an outage lasts, and
   * a call under way when etcd went away fails with a dropped connection: neither says
   * whether etcd is there, so a TCP connect of our own asks.
   */
  private async probeRefusal(): Promise<void> {
    const probedAtMs = this.context.clock.monotonicMs()
    if (!(await this.context.everyEndpointRefuses(this.ttlMs / 3)) || this.ended) return
    if (!this.onRefusals && probedAtMs + this.ttlMs > this.aliveUntilMs) {
      this.onRefusals = true
      this.context.logger.warn(
        { lease: this.id },
        'etcd refuses connections: the store session goes on, serving on the last metadata until etcd returns',
      )
    }
    this.extendTo(probedAtMs + this.ttlMs)
  }

  private extendTo(aliveUntilMs: number): void {
    if (aliveUntilMs <= this.aliveUntilMs) return
    this.aliveUntilMs = aliveUntilMs
    if (this.deadline === null) this.armDeadline()
  }

  private armDeadline(): void {
    this.deadline = null
    if (this.ended) return
    const remainingMs = this.aliveUntilMs - this.context.clock.monotonicMs()
    if (remainingMs <= 0) {
      this.end('no keep-alive confirmed within its TTL')
      return
    }
    this.deadline = this.context.clock.setTimeout(() => this.armDeadline(), remainingMs)
  }

  /** Resolves `lost` first, then lets etcd free the keys (best effort: they expire anyway). */
  private end(reason: string): void {
    if (this.ended) return
    this.ended = true
    this.deadline?.cancel()
    this.nextKeepalive?.cancel()
    if (reason === 'revoked') this.context.logger.debug({ lease: this.id, reason }, 'etcd lease ended')
    else
      this.context.logger.warn(
        {
          lease: this.id,
          reason,
          overdueMs: Math.round(this.context.clock.monotonicMs() - this.aliveUntilMs),
        },
        'etcd lease lost',
      )
    this.resolveLost()
    this.context.onEnd(this)
    if (reason !== 'revoked' && !this.suspended) {
      this.revokeInner().catch((err: unknown) => {
        this.context.logger.debug({ err, lease: this.id }, 'revoking a lost lease failed; etcd expires it')
      })
    }
  }

  /** etcd3 passes the deadline to gRPC; this bounds the wait should a stream ignore it. */
  private answeredWithin<T>(request: Promise<T>, waitMs: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = this.context.clock.setTimeout(
        () => reject(new GRPCDeadlineExceededError('keep-alive unanswered')),
        waitMs,
      )
      request.then(
        (value) => {
          timer.cancel()
          resolve(value)
        },
        (err: unknown) => {
          timer.cancel()
          reject(err)
        },
      )
    })
  }

  private revokeInner(): Promise<void> {
    this.revoking ??= this.inner.revoke().catch((err: unknown) => {
      throw this.context.toStoreError(err, 'lease revoke')
    })
    return this.revoking
  }
}

/**
 * Whether every endpoint refuses a TCP connection: no etcd member is running there, so none
 * can expire a lease. A connection accepted, or a connect that hangs (a cut), is not that.
 */
async function everyEndpointRefuses(
  network: Network,
  clock: Clock,
  endpoints: readonly string[],
  withinMs: number,
): Promise<boolean> {
  const refusals = await Promise.all(endpoints.map((endpoint) => refuses(network, clock, endpoint, withinMs)))
  return refusals.every(Boolean)
}

function refuses(network: Network, clock: Clock, endpoint: string, withinMs: number): Promise<boolean> {
  let url: URL
  try {
    url = new URL(endpoint.includes('://') ? endpoint : `http://${endpoint}`)
  } catch {
    return Promise.resolve(false) // not a URL: nothing proves etcd is down
  }
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 2379))
  return new Promise<boolean>((resolve) => {
    let settled = false
    const timer = clock.setTimeout(() => {
      settled = true
      resolve(false)
    }, withinMs)
    network.connect(url.hostname, port).then(
      (stream) => {
        stream.destroy()
        timer.cancel()
        if (!settled) resolve(false)
      },
      (err: NodeJS.ErrnoException) => {
        timer.cancel()
        if (!settled) resolve(err.code === 'ECONNREFUSED')
      },
    )
  })
}

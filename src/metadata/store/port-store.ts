/**
 * A metadata store reached over a message port: brokers in worker threads share the one
 * store their main thread holds (`startCluster({ workerThreads: true })`). The store stays
 * where it is, with its leases' keep-alive and its watches; each worker gets a
 * `PortStoreClient`, and the main thread a `StoreHost` per worker that runs the worker's
 * calls on the real store and sends back results, watch events and lost leases.
 *
 * A port delivers messages in the order they were posted, so a watch's events arrive in
 * revision order, as the store delivered them. Nothing here imports Node: the port is any
 * object that posts structured-cloneable messages (node:worker_threads' MessagePort is one).
 */
import { TidelogError } from '../../common/errors.js'
import {
  type KeyValue,
  type Leadership,
  type Lease,
  type MetadataStore,
  MetadataStoreError,
  type RangeResult,
  type StoreLimits,
  type StoreOp,
  type TxnResult,
  type VersionCompare,
  type Watch,
  type WatchEvent,
} from './metadata-store.js'

/** The two ends of a MessageChannel, as this module uses them. */
export interface StorePort {
  postMessage(message: unknown): void
  on(event: 'message', listener: (message: unknown) => void): unknown
  close(): void
}

/** What crosses the port: an error, by its fields (an Error's class does not survive cloning). */
interface ErrorFields {
  readonly code: string | null
  readonly message: string
}

type Call =
  | { readonly op: 'get'; readonly key: string }
  | { readonly op: 'range'; readonly prefix: string }
  | { readonly op: 'txn'; readonly compares: readonly VersionCompare[]; readonly ops: readonly StoreOp[] }
  | { readonly op: 'leader'; readonly election: string }
  | { readonly op: 'grantLease'; readonly ttlMs: number }
  | { readonly op: 'revoke'; readonly leaseId: string }
  | {
      readonly op: 'campaign'
      readonly election: string
      readonly candidate: string
      readonly leaseId: string
    }
  | { readonly op: 'resign'; readonly leadershipId: number }

type ToHost =
  | { readonly t: 'call'; readonly callId: number; readonly call: Call }
  | { readonly t: 'watch'; readonly watchId: number; readonly prefix: string; readonly fromRevision: number }
  | { readonly t: 'unwatch'; readonly watchId: number }

type ToClient =
  | { readonly t: 'result'; readonly callId: number; readonly value: unknown }
  | { readonly t: 'error'; readonly callId: number; readonly error: ErrorFields }
  | {
      readonly t: 'events'
      readonly watchId: number
      readonly events: readonly WatchEvent[]
      readonly revision: number
    }
  | { readonly t: 'watchError'; readonly watchId: number; readonly error: ErrorFields }
  | { readonly t: 'leaseLost'; readonly leaseId: string }
  | { readonly t: 'leadershipLost'; readonly leadershipId: number }

const STORE_CODES = new Set([
  'STORE_UNAVAILABLE',
  'STORE_CLOSED',
  'LEASE_NOT_FOUND',
  'REVISION_COMPACTED',
  'TXN_TOO_LARGE',
  'WATCH_STALLED',
])

function errorFields(error: unknown): ErrorFields {
  const code = error instanceof TidelogError ? error.code : null
  return { code, message: error instanceof Error ? error.message : String(error) }
}

/** A store error comes back as a MetadataStoreError (callers branch on its code); others as errors. */
function errorOf(fields: ErrorFields): Error {
  if (fields.code !== null && STORE_CODES.has(fields.code))
    return new MetadataStoreError(
      fields.code as ConstructorParameters<typeof MetadataStoreError>[0],
      fields.message,
    )
  return fields.code !== null ? new TidelogError(fields.code, fields.message) : new Error(fields.message)
}

/** Serves one worker's store calls on the real store, in the main thread. */
export class StoreHost {
  private readonly leases = new Map<string, Lease>()
  private readonly leaderships = new Map<number, Leadership>()
  private readonly watches = new Map<number, Watch>()
  private nextLeadershipId = 1
  private closed = false

  constructor(
    private readonly store: MetadataStore,
    private readonly port: StorePort,
  ) {
    port.on('message', (message) => this.receive(message as ToHost))
  }

  /** Ids of the leases this worker holds: a fault API stops keeping them alive when it dies. */
  get leaseIds(): string[] {
    return [...this.leases.keys()]
  }

  /** Ends every lease the worker still holds (a thread that died on its own). */
  async revokeLeases(): Promise<void> {
    await Promise.all([...this.leases.values()].map((lease) => lease.revoke()))
  }

  /** The worker is gone: its watches end; its leases stay, to expire or be revoked by the store. */
  close(): void {
    if (this.closed) return
    this.closed = true
    for (const watch of this.watches.values()) watch.cancel()
    this.watches.clear()
    this.port.close()
  }

  private send(message: ToClient): void {
    if (!this.closed) this.port.postMessage(message)
  }

  private receive(message: ToHost): void {
    if (this.closed) return
    if (message.t === 'call') {
      this.run(message.call).then(
        (value) => this.send({ t: 'result', callId: message.callId, value }),
        (error: unknown) => this.send({ t: 'error', callId: message.callId, error: errorFields(error) }),
      )
    } else if (message.t === 'watch') {
      this.watch(message.watchId, message.prefix, message.fromRevision)
    } else {
      this.watches.get(message.watchId)?.cancel()
      this.watches.delete(message.watchId)
    }
  }

  private watch(watchId: number, prefix: string, fromRevision: number): void {
    const onError = (error: unknown): void => {
      this.watches.delete(watchId)
      this.send({ t: 'watchError', watchId, error: errorFields(error) })
    }
    try {
      const watch = this.store.watch(
        prefix,
        fromRevision,
        (events, revision) => this.send({ t: 'events', watchId, events, revision }),
        onError,
      )
      this.watches.set(watchId, watch)
    } catch (error) {
      // REVISION_COMPACTED at once: the contract lets a watch report it through onError too.
      onError(error)
    }
  }

  private async run(call: Call): Promise<unknown> {
    switch (call.op) {
      case 'get':
        return this.store.get(call.key)
      case 'range':
        return this.store.range(call.prefix)
      case 'txn':
        return this.store.txn(call.compares, call.ops)
      case 'leader':
        return this.store.leader(call.election)
      case 'grantLease': {
        const lease = await this.store.grantLease(call.ttlMs)
        this.leases.set(lease.id, lease)
        lease.lost.then(() => {
          this.leases.delete(lease.id)
          this.send({ t: 'leaseLost', leaseId: lease.id })
        })
        return { id: lease.id, ttlMs: lease.ttlMs }
      }
      case 'revoke': {
        const lease = this.leases.get(call.leaseId)
        if (lease === undefined) return null
        await lease.revoke()
        return null
      }
      case 'campaign': {
        const lease = this.leases.get(call.leaseId)
        if (lease === undefined)
          throw new MetadataStoreError(
            'LEASE_NOT_FOUND',
            `lease ${call.leaseId} not found (expired or revoked)`,
          )
        const leadership = await this.store.campaign(call.election, call.candidate, lease)
        const leadershipId = this.nextLeadershipId++
        this.leaderships.set(leadershipId, leadership)
        leadership.lost.then(() => {
          this.leaderships.delete(leadershipId)
          this.send({ t: 'leadershipLost', leadershipId })
        })
        return leadershipId
      }
      case 'resign':
        await this.leaderships.get(call.leadershipId)?.resign()
        return null
    }
  }
}

interface Pending {
  readonly resolve: (value: unknown) => void
  readonly reject: (error: Error) => void
}

interface ClientWatch {
  readonly onEvents: (events: readonly WatchEvent[], revision: number) => void
  readonly onError: ((error: MetadataStoreError) => void) | undefined
}

/** The store as a broker in a worker thread sees it: every call is a message to its StoreHost. */
export class PortStoreClient implements MetadataStore {
  private readonly pending = new Map<number, Pending>()
  private readonly watches = new Map<number, ClientWatch>()
  private readonly leaseLost = new Map<string, () => void>()
  private readonly leadershipLost = new Map<number, () => void>()
  /** Losses announced before the call that granted them returned (both are messages; either may come first). */
  private readonly lostEarly = new Set<string>()
  private nextCallId = 1
  private nextWatchId = 1
  private closed = false

  constructor(
    private readonly port: StorePort,
    readonly limits: StoreLimits,
  ) {
    port.on('message', (message) => this.receive(message as ToClient))
  }

  get(key: string): Promise<KeyValue | null> {
    return this.call({ op: 'get', key }) as Promise<KeyValue | null>
  }

  range(prefix: string): Promise<RangeResult> {
    return this.call({ op: 'range', prefix }) as Promise<RangeResult>
  }

  txn(compares: readonly VersionCompare[], ops: readonly StoreOp[]): Promise<TxnResult> {
    return this.call({ op: 'txn', compares, ops }) as Promise<TxnResult>
  }

  leader(election: string): Promise<string | null> {
    return this.call({ op: 'leader', election }) as Promise<string | null>
  }

  watch(
    prefix: string,
    fromRevision: number,
    onEvents: (events: readonly WatchEvent[], revision: number) => void,
    onError?: (error: MetadataStoreError) => void,
  ): Watch {
    const watchId = this.nextWatchId++
    this.watches.set(watchId, { onEvents, onError })
    this.post({ t: 'watch', watchId, prefix, fromRevision })
    return {
      cancel: () => {
        if (!this.watches.delete(watchId)) return
        this.post({ t: 'unwatch', watchId })
      },
    }
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    const { id } = (await this.call({ op: 'grantLease', ttlMs })) as { id: string; ttlMs: number }
    const lost = new Promise<void>((resolve) => this.onLost(this.leaseLost, id, `lease:${id}`, resolve))
    return { id, ttlMs, lost, revoke: async () => void (await this.call({ op: 'revoke', leaseId: id })) }
  }

  async campaign(election: string, candidate: string, lease: Lease): Promise<Leadership> {
    const leadershipId = (await this.call({
      op: 'campaign',
      election,
      candidate,
      leaseId: lease.id,
    })) as number
    const lost = new Promise<void>((resolve) =>
      this.onLost(this.leadershipLost, leadershipId, `leadership:${leadershipId}`, resolve),
    )
    return { lost, resign: async () => void (await this.call({ op: 'resign', leadershipId })) }
  }

  /**
   * Closes this view of the store, not the main thread's store: calls fail with
   * STORE_CLOSED from now on, watches end, and the leases and leaderships held through it
   * count as lost (in the store they run out one TTL later, as an etcd client's do).
   */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    const error = new MetadataStoreError('STORE_CLOSED', 'store closed')
    for (const pending of this.pending.values()) pending.reject(error)
    this.pending.clear()
    for (const watch of this.watches.values()) watch.onError?.(error)
    this.watches.clear()
    for (const resolve of [...this.leaseLost.values(), ...this.leadershipLost.values()]) resolve()
    this.leaseLost.clear()
    this.leadershipLost.clear()
    this.port.close()
  }

  private onLost<K>(waiting: Map<K, () => void>, id: K, name: string, resolve: () => void): void {
    if (this.lostEarly.delete(name)) resolve()
    else waiting.set(id, resolve)
  }

  private lost<K>(waiting: Map<K, () => void>, id: K, name: string): void {
    const resolve = waiting.get(id)
    waiting.delete(id)
    if (resolve) resolve()
    else this.lostEarly.add(name)
  }

  private call(call: Call): Promise<unknown> {
    if (this.closed) return Promise.reject(new MetadataStoreError('STORE_CLOSED', 'store closed'))
    const callId = this.nextCallId++
    return new Promise((resolve, reject) => {
      this.pending.set(callId, { resolve, reject })
      this.post({ t: 'call', callId, call })
    })
  }

  private post(message: ToHost): void {
    if (!this.closed) this.port.postMessage(message)
  }

  private receive(message: ToClient): void {
    switch (message.t) {
      case 'result':
      case 'error': {
        const pending = this.pending.get(message.callId)
        this.pending.delete(message.callId)
        if (message.t === 'result') pending?.resolve(message.value)
        else pending?.reject(errorOf(message.error))
        return
      }
      case 'events':
        this.watches.get(message.watchId)?.onEvents(message.events, message.revision)
        return
      case 'watchError': {
        const watch = this.watches.get(message.watchId)
        this.watches.delete(message.watchId)
        const error = errorOf(message.error)
        watch?.onError?.(
          error instanceof MetadataStoreError
            ? error
            : new MetadataStoreError('STORE_UNAVAILABLE', error.message),
        )
        return
      }
      case 'leaseLost':
        this.lost(this.leaseLost, message.leaseId, `lease:${message.leaseId}`)
        return
      case 'leadershipLost':
        this.lost(this.leadershipLost, message.leadershipId, `leadership:${message.leadershipId}`)
    }
  }
}

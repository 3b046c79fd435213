/**
 * Elections on any MetadataStore, after etcd's election recipe (clientv3/concurrency):
 * each candidate puts `<election>/<leaseId>` bound to its lease; candidates queue by the
 * key's createRevision and the lowest one leads. When the leader resigns or its lease ends,
 * its key is deleted and the next in line leads. Both stores share this code, so leadership
 * behaves the same in the embedded store and on etcd.
 *
 * Safety comes from the lease: a leader's `lost` resolves no later than its lease's, and a
 * follower only takes over after it has seen the leader's key deleted.
 */
import { assert } from '../../common/assert.js'
import {
  type KeyValue,
  type Leadership,
  type Lease,
  type MetadataStore,
  MetadataStoreError,
  type Watch,
  type WatchEvent,
} from './metadata-store.js'
import { electionPrefix } from './txn-checks.js'

/** Queues `candidate` in `election` and resolves once it leads; rejects if its lease ends first. */
export async function campaign(
  store: MetadataStore,
  election: string,
  candidate: string,
  lease: Lease,
): Promise<Leadership> {
  const key = `${electionPrefix(election)}${lease.id}`
  // A repeated campaign with the same lease only updates the value; its place in line stays.
  await store.txn([], [{ type: 'put', key, value: candidate, lease: lease.id }])
  const { kvs, revision } = await store.range(electionPrefix(election))
  return new Candidacy(store, election, key, lease).start(kvs, revision)
}

/** The candidate value of the key with the lowest createRevision, or null. */
export async function leader(store: MetadataStore, election: string): Promise<string | null> {
  const { kvs } = await store.range(electionPrefix(election))
  return first(kvs)?.value ?? null
}

function first(kvs: Iterable<KeyValue>): KeyValue | null {
  let best: KeyValue | null = null
  for (const kv of kvs) {
    if (best === null || kv.createRevision < best.createRevision) best = kv
  }
  return best
}

type Phase = 'waiting' | 'leading' | 'ended'

class Candidacy implements Leadership {
  readonly lost: Promise<void>
  private resolveLost!: () => void
  private phase: Phase = 'waiting'
  private watch: Watch | null = null
  /** The queue as this candidate last saw it: key -> createRevision. */
  private readonly candidates = new Map<string, number>()
  private settle!: { resolve: (leadership: Leadership) => void; reject: (error: unknown) => void }

  constructor(
    private readonly store: MetadataStore,
    private readonly election: string,
    private readonly key: string,
    private readonly lease: Lease,
  ) {
    this.lost = new Promise<void>((resolve) => {
      this.resolveLost = resolve
    })
  }

  start(kvs: readonly KeyValue[], revision: number): Promise<Leadership> {
    const elected = new Promise<Leadership>((resolve, reject) => {
      this.settle = { resolve, reject }
    })
    for (const kv of kvs) this.candidates.set(kv.key, kv.createRevision)
    // `lost` never rejects: the lease only ever resolves it.
    void this.lease.lost.then(() => this.end(leaseLost(this.lease)))
    try {
      this.watch = this.store.watch(
        electionPrefix(this.election),
        revision + 1,
        (events) => this.onEvents(events),
        (error) => this.end(error),
      )
    } catch (err) {
      this.end(err)
      return elected
    }
    this.evaluate()
    return elected
  }

  async resign(): Promise<void> {
    if (this.phase === 'ended') return
    this.finish()
    await this.store.txn([], [{ type: 'delete', key: this.key }])
  }

  private onEvents(events: readonly WatchEvent[]): void {
    if (this.phase === 'ended') return
    for (const event of events) {
      if (event.type === 'put') this.candidates.set(event.kv.key, event.kv.createRevision)
      else this.candidates.delete(event.kv.key)
    }
    this.evaluate()
  }

  /** Leads once this key is the oldest in line; ends if the key is gone (lease ended, deleted). */
  private evaluate(): void {
    const mine = this.candidates.get(this.key)
    if (mine === undefined) {
      this.end(leaseLost(this.lease))
      return
    }
    if (this.phase !== 'waiting') return
    for (const createRevision of this.candidates.values()) {
      if (createRevision < mine) return
    }
    this.phase = 'leading'
    this.settle.resolve(this)
  }

  /**
   * Leaves the election for good. A candidate that never led gives up its place in line
   * too, or its orphaned key would become a leader nobody acts as.
   */
  private end(error: unknown): void {
    if (this.phase === 'ended') return
    const wasLeading = this.phase === 'leading'
    this.finish()
    if (!wasLeading) this.settle.reject(error)
    this.store.txn([], [{ type: 'delete', key: this.key }]).catch((err: unknown) => {
      // A failing or closed store: the key goes when the lease does. Anything else is a bug.
      if (!(err instanceof MetadataStoreError)) throw err
    })
  }

  private finish(): void {
    assert(this.phase !== 'ended', 'candidacy finished twice')
    this.phase = 'ended'
    this.watch?.cancel()
    this.watch = null
    this.resolveLost()
  }
}

function leaseLost(lease: Lease): MetadataStoreError {
  return new MetadataStoreError('LEASE_NOT_FOUND', `lease ${lease.id} ended before or during the campaign`)
}

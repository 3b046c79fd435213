/**
 * The metadata store: the one place cluster state lives. Two implementations share this
 * interface and one contract test suite: an embedded store (one process, any number of
 * brokers, optionally persisted) and etcd (multi-process, multi-machine clusters).
 *
 * The model is etcd's, reduced to what tidelog needs:
 * - a flat keyspace of string keys and string values (JSON documents);
 * - a store-wide revision that grows by one with every successful write transaction;
 * - per key a `version` (1 on creation, +1 on each put; 0 means absent) and `modRevision`;
 * - atomic transactions guarded by compares on key versions (compare-and-set);
 * - prefix watches that deliver every change after a given revision, in revision order;
 * - leases: keys bound to a lease are deleted when it expires or is revoked (sessions);
 * - elections: one leader per election name, bound to the leader's lease;
 * - limits on one transaction (etcd's `--max-txn-ops` and `--max-request-bytes`): a writer
 *   splits what does not fit (txn-batches.ts), and a store refuses a transaction over them
 *   with TXN_TOO_LARGE, which retrying unchanged cannot cure.
 */
import { TidelogError } from '../../common/errors.js'

export interface KeyValue {
  readonly key: string
  readonly value: string
  /** 1 when created, +1 per put; a deleted and re-created key starts again at 1. */
  readonly version: number
  /** Store revision of the key's creation. */
  readonly createRevision: number
  /** Store revision of the key's last change. */
  readonly modRevision: number
  /** The lease the key is bound to, or null. */
  readonly lease: string | null
}

/**
 * Holds when the key's current version equals `version` (0: the key must be absent) and,
 * when `modRevision` is set, its last change was at that store revision: a version alone
 * cannot tell a key from one deleted and created again since (both at version 1).
 */
export interface VersionCompare {
  readonly key: string
  readonly version: number
  readonly modRevision?: number
}

export type StoreOp =
  | { readonly type: 'put'; readonly key: string; readonly value: string; readonly lease?: string }
  | { readonly type: 'delete'; readonly key: string }
  /** Deletes every key starting with `prefix`. */
  | { readonly type: 'deletePrefix'; readonly prefix: string }

export interface TxnResult {
  /** False when a compare failed; then nothing was written. */
  readonly succeeded: boolean
  /** Store revision after the transaction (unchanged when it failed). */
  readonly revision: number
}

export interface WatchEvent {
  readonly type: 'put' | 'delete'
  /** For a delete: the key with an empty value, version 0 and the delete's modRevision. */
  readonly kv: KeyValue
}

export interface Watch {
  cancel(): void
}

export interface RangeResult {
  readonly kvs: readonly KeyValue[]
  /** Store revision the read was taken at (start a watch at revision + 1 to miss nothing). */
  readonly revision: number
}

export interface Lease {
  readonly id: string
  readonly ttlMs: number
  /** Resolves once the lease is lost (expired, revoked, or the store connection gave up). */
  readonly lost: Promise<void>
  /** Ends the lease now; its keys are deleted. */
  revoke(): Promise<void>
}

export interface Leadership {
  /** Resolves once this candidate is no longer leader (resigned or lease lost). */
  readonly lost: Promise<void>
  resign(): Promise<void>
}

/**
 * What one transaction may hold. etcd refuses a transaction with more compares, or more
 * ops, than `--max-txn-ops` (each side counts on its own; a compare with a modRevision is
 * two of etcd's compares), or a request larger than `--max-request-bytes`. Sizes are the
 * estimate of txnRequestBytes (txn-checks.ts), an upper bound of etcd's count.
 */
export interface StoreLimits {
  /** Compares, and ops, per transaction (etcd `--max-txn-ops`, 128 by default). */
  readonly txnOpsMax: number
  /** Estimated bytes per transaction (etcd `--max-request-bytes`, 1.5 MiB by default). */
  readonly requestBytesMax: number
}

/** etcd's defaults; the embedded store keeps them too, so code that fits it fits etcd. */
export const STORE_LIMITS_DEFAULT: StoreLimits = { txnOpsMax: 128, requestBytesMax: 1536 * 1024 }

export interface MetadataStore {
  /** The largest transaction this store accepts; larger ones fail with TXN_TOO_LARGE. */
  readonly limits: StoreLimits
  get(key: string): Promise<KeyValue | null>
  /** Keys with `prefix`, sorted by key, and the revision of the read. */
  range(prefix: string): Promise<RangeResult>
  /** If every compare holds, applies every op atomically as one new revision. */
  txn(compares: readonly VersionCompare[], ops: readonly StoreOp[]): Promise<TxnResult>
  /**
   * Calls `onEvents` with the changes to keys under `prefix` from `fromRevision` on (every
   * event of one revision in one call, revisions in order, none skipped or repeated).
   * A watch that cannot go on (its next revision was compacted away, the store was closed
   * or gave up, or it stalled: WATCH_STALLED, etcd-store.ts) calls `onError` once and delivers nothing more; a store that already knows
   * `fromRevision` is compacted may instead throw REVISION_COMPACTED at once. Either way the
   * caller re-reads with `range` and watches again from that read's revision + 1.
   */
  watch(
    prefix: string,
    fromRevision: number,
    onEvents: (events: readonly WatchEvent[], revision: number) => void,
    onError?: (error: MetadataStoreError) => void,
  ): Watch
  /** A lease kept alive in the background until revoked or lost; `ttlMs` is at least 1000. */
  grantLease(ttlMs: number): Promise<Lease>
  /**
   * Waits until `candidate` (a value such as a broker id) leads `election`, bound to `lease`;
   * at most one candidate leads an election at any time.
   */
  campaign(election: string, candidate: string, lease: Lease): Promise<Leadership>
  /** The current leader's candidate value, or null. */
  leader(election: string): Promise<string | null>
  close(): Promise<void>
}

/**
 * Thrown by a store whose backend failed or was closed; retriable unless closed.
 * TXN_TOO_LARGE: the transaction is over the store's limits (never retriable as it is).
 * WATCH_STALLED: a watch found to have stopped delivering; it ended, read again and re-watch.
 */
export class MetadataStoreError extends TidelogError {
  constructor(
    code:
      | 'STORE_UNAVAILABLE'
      | 'STORE_CLOSED'
      | 'LEASE_NOT_FOUND'
      | 'REVISION_COMPACTED'
      | 'TXN_TOO_LARGE'
      | 'WATCH_STALLED',
    message: string,
    cause?: unknown,
  ) {
    super(code, message, { cause, retriable: code === 'STORE_UNAVAILABLE' })
    this.name = 'MetadataStoreError'
  }
}

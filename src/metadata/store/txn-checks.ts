/**
 * Transaction shapes both stores reject the same way. etcd refuses a transaction that puts
 * one key twice or puts a key that one of its deletes also covers ("duplicate key given in
 * txn request"); the embedded store asserts the same so code that passes against it never
 * fails against etcd. Overlapping deletes are allowed, as in etcd.
 */
import { assert } from '../../common/assert.js'
import { MetadataStoreError, type StoreLimits, type StoreOp, type VersionCompare } from './metadata-store.js'

/**
 * Bytes counted per compare and per op beyond its key and value: etcd's protobuf framing
 * (under 20 bytes) and the store's key namespace ('/tidelog', or one of up to 40 bytes),
 * so the estimate stays an upper bound of the request etcd measures.
 */
export const TXN_ENTRY_OVERHEAD_BYTES = 64

/** etcd's count: compares (a modRevision compare is a second one) and ops each against the limit. */
export function txnOpCount(compares: readonly VersionCompare[], ops: readonly StoreOp[]): number {
  return Math.max(compareCount(compares), ops.length)
}

export function compareCount(compares: readonly VersionCompare[]): number {
  let count = 0
  for (const compare of compares) count += compare.modRevision === undefined ? 1 : 2
  return count
}

/** An upper bound of the transaction's request size as etcd measures it. */
export function txnRequestBytes(compares: readonly VersionCompare[], ops: readonly StoreOp[]): number {
  let bytes = 0
  for (const compare of compares) bytes += compareBytes(compare)
  for (const op of ops) bytes += opBytes(op)
  return bytes
}

export function compareBytes(compare: VersionCompare): number {
  const entries = compare.modRevision === undefined ? 1 : 2
  return entries * (Buffer.byteLength(compare.key) + TXN_ENTRY_OVERHEAD_BYTES)
}

export function opBytes(op: StoreOp): number {
  switch (op.type) {
    case 'put':
      return (
        Buffer.byteLength(op.key) +
        Buffer.byteLength(op.value) +
        (op.lease === undefined ? 0 : 20) +
        TXN_ENTRY_OVERHEAD_BYTES
      )
    case 'delete':
      return Buffer.byteLength(op.key) + TXN_ENTRY_OVERHEAD_BYTES
    case 'deletePrefix':
      return 2 * Buffer.byteLength(op.prefix) + TXN_ENTRY_OVERHEAD_BYTES
  }
}

/** Refuses, before anything is sent, a transaction over `limits` (TXN_TOO_LARGE). */
export function checkTxnFits(
  limits: StoreLimits,
  compares: readonly VersionCompare[],
  ops: readonly StoreOp[],
): void {
  const count = txnOpCount(compares, ops)
  if (count > limits.txnOpsMax) {
    throw new MetadataStoreError(
      'TXN_TOO_LARGE',
      `transaction of ${compareCount(compares)} compares and ${ops.length} ops is over the store's limit of ${limits.txnOpsMax} (tidelog.metadata.store.max.txn.ops)`,
    )
  }
  const bytes = txnRequestBytes(compares, ops)
  if (bytes > limits.requestBytesMax) {
    throw new MetadataStoreError(
      'TXN_TOO_LARGE',
      `transaction of about ${bytes} bytes is over the store's limit of ${limits.requestBytesMax} (tidelog.metadata.store.max.request.bytes)`,
    )
  }
}

/** Limits as given by the user, checked once at construction. */
export function checkedLimits(limits: StoreLimits): StoreLimits {
  assert(
    Number.isInteger(limits.txnOpsMax) && limits.txnOpsMax >= 8,
    () => `txnOpsMax ${limits.txnOpsMax} < 8`,
  )
  assert(
    Number.isInteger(limits.requestBytesMax) && limits.requestBytesMax >= 64 * 1024,
    () => `requestBytesMax ${limits.requestBytesMax} < 64 KiB`,
  )
  return { txnOpsMax: limits.txnOpsMax, requestBytesMax: limits.requestBytesMax }
}

export function assertValidTxn(compares: readonly VersionCompare[], ops: readonly StoreOp[]): void {
  for (const compare of compares) {
    assert(Number.isInteger(compare.version), () => `compare on ${compare.key}: version must be an integer`)
    assert(compare.version >= 0, () => `compare on ${compare.key}: version ${compare.version} < 0`)
    if (compare.modRevision !== undefined)
      assert(
        Number.isInteger(compare.modRevision) && compare.modRevision >= 0,
        () => `compare on ${compare.key}: modRevision ${compare.modRevision} is not a revision`,
      )
  }
  const puts = new Set<string>()
  for (const op of ops) {
    if (op.type !== 'put') continue
    assert(!puts.has(op.key), () => `txn puts ${op.key} twice`)
    puts.add(op.key)
  }
  for (const op of ops) {
    if (op.type === 'delete') assert(!puts.has(op.key), () => `txn puts and deletes ${op.key}`)
    if (op.type === 'deletePrefix') {
      for (const key of puts)
        assert(!key.startsWith(op.prefix), () => `txn puts ${key} and deletes prefix ${op.prefix}`)
    }
  }
}

/** Election candidates live at `<election>/<leaseId>` (etcd's election recipe). */
export function electionPrefix(election: string): string {
  return `${election}/`
}

/**
 * Transaction shapes both stores reject the same way. etcd refuses a transaction that puts
 * one key twice or puts a key that one of its deletes also covers ("duplicate key given in
 * txn request"); the embedded store asserts the same so code that passes against it never
 * fails against etcd. Overlapping deletes are allowed, as in etcd.
 */
import { assert } from '../../common/assert.js'
import type { StoreOp, VersionCompare } from './metadata-store.js'

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

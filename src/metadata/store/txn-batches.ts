/**
 * Splitting writes into transactions within the store's limits (etcd's `--max-txn-ops` and
 * `--max-request-bytes`): the caller cuts its write into parts, each consistent on its own
 * (one partition's compare-and-set, one topic's record with what must change with it, one
 * ACL), and packTxns packs consecutive parts into as few transactions as fit, in order. A
 * part is never split; one that cannot fit alone is refused before anything is written.
 * Kafka's controller bounds its record batches the same way (a user operation of too many
 * records is refused, the others are written in batches).
 */
import { assert } from '../../common/assert.js'
import {
  type MetadataStore,
  MetadataStoreError,
  type StoreLimits,
  type StoreOp,
  type VersionCompare,
} from './metadata-store.js'
import { compareBytes, compareCount, opBytes } from './txn-checks.js'

/** Compares and ops that must commit together. */
export interface TxnPart {
  readonly compares: readonly VersionCompare[]
  readonly ops: readonly StoreOp[]
}

/**
 * `parts` in order, packed into transactions each within `limits`, each also holding the
 * `shared` compares (e.g. the broker epochs a change depends on). Throws TXN_TOO_LARGE when
 * a part with the shared compares does not fit in a transaction of its own.
 */
export function packTxns(
  limits: StoreLimits,
  parts: readonly TxnPart[],
  shared: readonly VersionCompare[] = [],
): TxnPart[] {
  const sharedCount = compareCount(shared)
  const sharedBytes = shared.reduce((sum, compare) => sum + compareBytes(compare), 0)
  const txns: TxnPart[] = []
  let compares: VersionCompare[] = [...shared]
  let ops: StoreOp[] = []
  let count = sharedCount
  let bytes = sharedBytes
  for (const part of parts) {
    const partCount = compareCount(part.compares)
    let partBytes = 0
    for (const compare of part.compares) partBytes += compareBytes(compare)
    for (const op of part.ops) partBytes += opBytes(op)
    const fitsAlone =
      sharedCount + partCount <= limits.txnOpsMax &&
      part.ops.length <= limits.txnOpsMax &&
      sharedBytes + partBytes <= limits.requestBytesMax
    if (!fitsAlone) {
      throw new MetadataStoreError(
        'TXN_TOO_LARGE',
        `one indivisible change of ${partCount} compares, ${part.ops.length} ops and about ${partBytes} bytes ` +
          `(first key ${part.ops[0]?.type === 'deletePrefix' ? part.ops[0].prefix : (part.ops[0]?.key ?? '-')}) ` +
          `is over the store's limits of ${limits.txnOpsMax} ops and ${limits.requestBytesMax} bytes per transaction`,
      )
    }
    const fits =
      count + partCount <= limits.txnOpsMax &&
      ops.length + part.ops.length <= limits.txnOpsMax &&
      bytes + partBytes <= limits.requestBytesMax
    if (!fits) {
      txns.push({ compares, ops })
      compares = [...shared]
      ops = []
      count = sharedCount
      bytes = sharedBytes
    }
    compares.push(...part.compares)
    ops.push(...part.ops)
    count += partCount
    bytes += partBytes
  }
  if (ops.length > 0 || compares.length > shared.length) txns.push({ compares, ops })
  for (const txn of txns) assert(txn.ops.length <= limits.txnOpsMax, 'packed transaction over the limit')
  return txns
}

/**
 * Applies independent unconditional ops (each key's change stands on its own, e.g. ACL
 * bindings or credentials) in as few transactions as fit; resolves with the last revision.
 * A failure part way leaves the earlier transactions applied.
 */
export async function applyInBatches(store: MetadataStore, ops: readonly StoreOp[]): Promise<number> {
  let revision = 0
  for (const txn of packTxns(
    store.limits,
    ops.map((op) => ({ compares: [], ops: [op] })),
  )) {
    const result = await store.txn(txn.compares, txn.ops)
    assert(result.succeeded, 'a transaction without compares failed')
    revision = result.revision
  }
  return revision
}

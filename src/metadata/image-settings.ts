/**
 * The image's cluster-wide settings as keys of the metadata store, read into the image and
 * written from it (cluster-metadata.ts's buildImage and diffParts): named config sets (one
 * key each) and the finalized feature levels (one key, `features`).
 */
import type { FinalizedFeatures, FinalizedFeaturesEpoch } from './cluster-image.js'
import type { KeyValue, VersionCompare } from './store/metadata-store.js'
import type { TxnPart } from './store/txn-batches.js'

/** The key of the finalized feature levels: {levels: {<name>: level}}. */
export const FEATURES_KEY = 'features'

interface FeaturesValue {
  levels: Record<string, number>
}

/** The finalized levels in `kv`; the key's last change is their epoch (it only grows). */
export function finalizedFeaturesFrom(kv: KeyValue): FinalizedFeatures {
  const value = JSON.parse(kv.value) as FeaturesValue
  return {
    epoch: kv.modRevision as FinalizedFeaturesEpoch,
    levels: new Map(Object.entries(value.levels)),
  }
}

/**
 * The write of changed feature levels, guarded by the version the base image read. Levels
 * at 0 are written too: a feature turned off must not fall back to its bootstrap level.
 */
export function diffFeatures(
  base: FinalizedFeatures | undefined,
  next: FinalizedFeatures | undefined,
  guard: (key: string) => VersionCompare,
  parts: TxnPart[],
): void {
  if (next === undefined || next === base) return
  const encode = (features: FinalizedFeatures | undefined): string | null =>
    features === undefined
      ? null
      : JSON.stringify({
          levels: Object.fromEntries([...features.levels].sort(([a], [b]) => (a < b ? -1 : 1))),
        } satisfies FeaturesValue)
  const value = encode(next)
  if (value === null || value === encode(base)) return
  parts.push({ compares: [guard(FEATURES_KEY)], ops: [{ type: 'put', key: FEATURES_KEY, value }] })
}

/** One key per named config set (dynamic broker configs, client metrics subscriptions); empty sets are deleted. */
export function diffConfigMaps(
  base: ReadonlyMap<string, Readonly<Record<string, string>>> | undefined,
  next: ReadonlyMap<string, Readonly<Record<string, string>>> | undefined,
  keyOf: (name: string) => string,
  guard: (key: string) => VersionCompare,
  parts: TxnPart[],
): void {
  const before = base ?? new Map<string, Readonly<Record<string, string>>>()
  const after = next ?? new Map<string, Readonly<Record<string, string>>>()
  for (const name of new Set([...before.keys(), ...after.keys()])) {
    const a = after.get(name)
    const value = a && Object.keys(a).length > 0 ? JSON.stringify(a) : null
    const old = before.get(name)
    const oldValue = old && Object.keys(old).length > 0 ? JSON.stringify(old) : null
    if (value === oldValue) continue
    const key = keyOf(name)
    parts.push({
      compares: [guard(key)],
      ops: [value === null ? { type: 'delete', key } : { type: 'put', key, value }],
    })
  }
}

/**
 * Changes of the finalized feature levels (Kafka's FeatureControlManager): UpdateFeatures'
 * checks, with Kafka 4.4's messages, and the write, one compare-and-set of the `features`
 * key (image-settings.ts) that every broker's image then follows.
 *
 * Kafka 4.4's rules, per update, in the order it checks them:
 * - an upgrade type other than UPGRADE (1), SAFE_DOWNGRADE (2), UNSAFE_DOWNGRADE (3) is refused;
 * - a level below 0 is refused;
 * - a level outside the supported range (features.ts) is refused; a feature this code does
 *   not know has the range [0, 0] (Kafka's features tidelog does not report, such as
 *   metadata.version, count as unknown);
 * - a level below the finalized one needs a downgrade type, one above it needs UPGRADE;
 * - an unknown feature at level 0 passes those and fails last ("Feature x not found.").
 * One failing update fails the request, nothing is written, and the error named is the one
 * of the first failing update in the order Kafka's HashMap of the updates iterates
 * (javaHashMapOrder). A safe and an unsafe downgrade are the same here: no level of
 * tidelog's features loses data going down (Kafka refuses only metadata.version's, which
 * tidelog does not report).
 */
import { ErrorCode } from '../protocol/error-codes.js'
import type { BrokerId, ClusterImage } from './cluster-image.js'
import { finalizedFeaturesOf, SUPPORTED_FEATURES, supportedRange } from './features.js'
import { commitFailure } from './topic-admin.js'

/** UpdateFeatures' UpgradeType (v1+); anything else is Kafka's UNKNOWN. */
export const UpgradeType = { UPGRADE: 1, SAFE_DOWNGRADE: 2, UNSAFE_DOWNGRADE: 3 } as const

export interface FeatureUpdate {
  readonly feature: string
  readonly level: number
  readonly upgradeType: number
}

/**
 * Why the request failed: an update refused (INVALID_UPDATE_VERSION, Kafka's message, the
 * feature named), or a write the metadata store did not commit (feature null).
 */
export interface FeatureUpdateError {
  readonly feature: string | null
  readonly errorCode: number
  readonly message: string
}

/** What UpdateFeatures asks of the metadata: its image and a compare-and-set change of it. */
export interface FeatureMetadata {
  update(change: (image: ClusterImage) => ClusterImage): Promise<ClusterImage>
}

/**
 * Checks `updates` against `image` and, unless `validateOnly` or one fails, writes them.
 * `controllerId` names the node in messages (Kafka: "Local controller <id>"): tidelog has
 * no separate controller quorum, and the broker that answers checks and writes.
 * Resolves with the first error, or null once the levels are written (or would be).
 */
export async function updateFeatures(
  metadata: FeatureMetadata,
  updates: readonly FeatureUpdate[],
  validateOnly: boolean,
  controllerId: BrokerId,
): Promise<FeatureUpdateError | null> {
  let outcome: FeatureUpdateError | null = null
  try {
    await metadata.update((image) => {
      outcome = checkFeatureUpdates(image, updates, controllerId)
      if (outcome !== null || validateOnly) return image
      return withFeatureLevels(image, updates)
    })
  } catch (error) {
    // A store that is down or keeps conflicting: REQUEST_TIMED_OUT, as for topic changes.
    const failure = commitFailure(error)
    if (failure === null) throw error
    return { feature: null, errorCode: failure.errorCode, message: failure.errorMessage ?? '' }
  }
  return outcome
}

/** The first refused update of `updates` (in Kafka's order), or null when all pass. */
export function checkFeatureUpdates(
  image: ClusterImage,
  updates: readonly FeatureUpdate[],
  controllerId: BrokerId,
): FeatureUpdateError | null {
  const levels = finalizedFeaturesOf(image).levels
  for (const update of javaHashMapOrder(updates)) {
    const reason = reasonRefused(update, levels.get(update.feature) ?? 0, controllerId)
    if (reason !== null)
      return {
        feature: update.feature,
        errorCode: ErrorCode.INVALID_UPDATE_VERSION,
        message: `Invalid update version ${update.level} for feature ${update.feature}. ${reason}`,
      }
  }
  return null
}

function reasonRefused(update: FeatureUpdate, current: number, controllerId: BrokerId): string | null {
  const { feature, level, upgradeType } = update
  if (!Object.values<number>(UpgradeType).includes(upgradeType))
    return 'The controller does not support the given upgrade type.'
  if (level < 0) return 'A feature version cannot be less than 0.'
  const range = supportedRange(feature)
  if (level < range.minVersion || level > range.maxVersion)
    return range.maxVersion === 0
      ? `Local controller ${controllerId} does not support this feature.`
      : `Local controller ${controllerId} only supports versions ${versionRange(range.minVersion, range.maxVersion)}`
  if (level < current && upgradeType === UpgradeType.UPGRADE)
    return "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."
  if (level > current && upgradeType !== UpgradeType.UPGRADE) return "Can't downgrade to a newer version."
  // Kafka looks the feature up for its dependencies last: an unknown one gets here at level 0.
  if (!SUPPORTED_FEATURES.some((f) => f.name === feature)) return `Feature ${feature} not found.`
  return null
}

/** Kafka's VersionRange.toString. */
function versionRange(min: number, max: number): string {
  return min === max ? `${min}` : `${min}-${max}`
}

/** `image` with `updates` applied over its finalized levels (the bootstrap ones included). */
function withFeatureLevels(image: ClusterImage, updates: readonly FeatureUpdate[]): ClusterImage {
  const current = finalizedFeaturesOf(image)
  const levels = new Map(current.levels)
  for (const update of updates) levels.set(update.feature, update.level)
  return { ...image, finalizedFeatures: { epoch: current.epoch, levels } }
}

/**
 * `updates` in the order Kafka's controller meets them: it puts them in a java.util.HashMap
 * by name (a repeated name keeps its last level, in its first place) and iterates that, so
 * which error a request with several bad updates gets depends on the names' hash buckets.
 */
export function javaHashMapOrder(updates: readonly FeatureUpdate[]): FeatureUpdate[] {
  const byName = new Map<string, FeatureUpdate>()
  for (const update of updates) byName.set(update.feature, update)
  // The table doubles from 16 while holding more than 3/4 of its capacity.
  let capacity = 16
  while (byName.size > capacity * 0.75) capacity *= 2
  const bucketOf = (name: string): number => {
    const h = javaStringHash(name)
    return (h ^ (h >>> 16)) & (capacity - 1)
  }
  // Within a bucket, entries keep their insertion order (Array.prototype.sort is stable).
  return [...byName.values()].sort((a, b) => bucketOf(a.feature) - bucketOf(b.feature))
}

/** Java's String.hashCode (UTF-16 code units, 32-bit overflow). */
function javaStringHash(s: string): number {
  let h = 0
  for (let i = 0; i < s.length; i++) h = (Math.imul(h, 31) + s.charCodeAt(i)) | 0
  return h
}

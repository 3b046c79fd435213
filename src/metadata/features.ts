/**
 * Feature levels (KIP-584), as Kafka 4.4 names them: what this code can run (the supported
 * ranges, the one table of them) and what the cluster runs at (the finalized levels, cluster
 * state in the metadata store that UpdateFeatures changes, see feature-control.ts).
 *
 * A client reads them in ApiVersions (v3+) to decide which protocol it may use: above all a
 * Kafka 4 producer uses the transaction protocol v2 (KIP-890 part 2: EndTxn v5, Produce v12
 * adding partitions implicitly) only when `transaction.version` is finalized at 2 or more.
 * A level-0 feature is disabled: Kafka leaves it out of FinalizedFeatures.
 */
import type { ClusterImage, FinalizedFeatures, FinalizedFeaturesEpoch } from './cluster-image.js'

export interface SupportedFeature {
  readonly name: string
  readonly minVersion: number
  readonly maxVersion: number
}

/** What this broker can run, per feature (Kafka's SupportedFeatures), by name. */
export const SUPPORTED_FEATURES: readonly SupportedFeature[] = [
  // KIP-848's consumer groups (ConsumerGroupHeartbeat, ConsumerGroupDescribe) are served.
  { name: 'group.version', minVersion: 0, maxVersion: 1 },
  // tidelog's controller is not a KRaft quorum: only the static-quorum level.
  { name: 'kraft.version', minVersion: 0, maxVersion: 0 },
  // Share groups (KIP-932: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge).
  { name: 'share.version', minVersion: 0, maxVersion: 1 },
  // Streams groups (KIP-1071: StreamsGroupHeartbeat, StreamsGroupDescribe).
  { name: 'streams.version', minVersion: 0, maxVersion: 1 },
  // Transaction version 2 (KIP-890 part 2): EndTxn v5, Produce v12, TxnOffsetCommit v5.
  { name: 'transaction.version', minVersion: 0, maxVersion: 2 },
]

/**
 * The levels of a cluster no UpdateFeatures has changed (Kafka's bootstrap levels of a
 * cluster formatted at the latest release, within what tidelog supports).
 */
export const BOOTSTRAP_FEATURE_LEVELS: ReadonlyMap<string, number> = new Map([
  ['group.version', 1],
  ['share.version', 1],
  // Kafka 4.4 too: streams.version 1 since metadata version 4.2-IV1.
  ['streams.version', 1],
  // Kafka 4.4's default too: Kafka 4 producers use transaction version 2 (KIP-890 part 2).
  ['transaction.version', 2],
])

/** The epoch of the bootstrap levels, before any change (Kafka's -1 would mean unknown). */
export const BOOTSTRAP_FEATURES_EPOCH = 0 as FinalizedFeaturesEpoch

/** The feature whose level 2 makes Kafka 4 producers use transaction version 2. */
export const TRANSACTION_VERSION_FEATURE = 'transaction.version'

/** group.version 1 turns on KIP-848's consumer protocol (Kafka's GroupVersion.GV_1). */
export const GROUP_VERSION_CONSUMER_PROTOCOL = 1

/** The finalized levels `image` holds, or the bootstrap ones before any change. */
export function finalizedFeaturesOf(image: ClusterImage): FinalizedFeatures {
  return image.finalizedFeatures ?? { epoch: BOOTSTRAP_FEATURES_EPOCH, levels: BOOTSTRAP_FEATURE_LEVELS }
}

/** The finalized level of `name` (0: disabled or unknown). */
export function finalizedLevel(image: ClusterImage, name: string): number {
  return finalizedFeaturesOf(image).levels.get(name) ?? 0
}

/** The supported range of `name`; a feature this code does not know is [0, 0] (Kafka's DISABLED). */
export function supportedRange(name: string): SupportedFeature {
  return SUPPORTED_FEATURES.find((f) => f.name === name) ?? { name, minVersion: 0, maxVersion: 0 }
}

/**
 * The supported features for an ApiVersions answer of `version`. Below v4 Kafka leaves out
 * features whose minimum is 0: older Java clients reject such a range (KAFKA-17011).
 */
export function supportedFeaturesFor(version: number): readonly SupportedFeature[] {
  return version >= 4 ? SUPPORTED_FEATURES : SUPPORTED_FEATURES.filter((f) => f.minVersion > 0)
}

/**
 * The feature levels tidelog reports in ApiVersions (v3+, KIP-584), as Kafka 4.4 names them.
 * A client reads them to decide which protocol it may use: above all a Kafka 4 producer
 * uses the transaction protocol v2 (KIP-890 part 2: EndTxn v5, Produce v12 adding
 * partitions implicitly) only when `transaction.version` is finalized at 2 or more. tidelog
 * does not implement transaction version 2, so that feature is supported and finalized at
 * level 0, which Kafka leaves out of FinalizedFeatures (a level-0 feature is disabled).
 *
 * The levels are fixed: what the code implements, not a cluster setting, so there is no
 * UpdateFeatures and the epoch never moves.
 */

export interface SupportedFeature {
  readonly name: string
  readonly minVersion: number
  readonly maxVersion: number
}

export interface FinalizedFeature {
  readonly name: string
  readonly level: number
}

/** What this broker can run, per feature (Kafka's SupportedFeatures). */
export const SUPPORTED_FEATURES: readonly SupportedFeature[] = [
  // KIP-848's consumer groups (ConsumerGroupHeartbeat, ConsumerGroupDescribe) are served.
  { name: 'group.version', minVersion: 0, maxVersion: 1 },
  // tidelog's controller is not a KRaft quorum: only the static-quorum level.
  { name: 'kraft.version', minVersion: 0, maxVersion: 0 },
  // Share groups (KIP-932: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge).
  { name: 'share.version', minVersion: 0, maxVersion: 1 },
  // Streams groups (KIP-1071) are not served.
  { name: 'streams.version', minVersion: 0, maxVersion: 0 },
  // Transaction protocol v1 only (see above).
  { name: 'transaction.version', minVersion: 0, maxVersion: 0 },
]

/** What the cluster runs at (Kafka's FinalizedFeatures): only levels above 0 are listed. */
export const FINALIZED_FEATURES: readonly FinalizedFeature[] = [
  { name: 'group.version', level: 1 },
  { name: 'share.version', level: 1 },
]

/** The finalized features never change, so their epoch is fixed (Kafka: -1 means unknown). */
export const FINALIZED_FEATURES_EPOCH = 0n

/**
 * The supported features for an ApiVersions answer of `version`. Below v4 Kafka leaves out
 * features whose minimum is 0: older Java clients reject such a range (KAFKA-17011).
 */
export function supportedFeaturesFor(version: number): readonly SupportedFeature[] {
  return version >= 4 ? SUPPORTED_FEATURES : SUPPORTED_FEATURES.filter((f) => f.minVersion > 0)
}

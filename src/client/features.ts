/**
 * Feature levels through the admin client, as Kafka's Admin.describeFeatures and
 * updateFeatures (what kafka-features.sh calls): describe reads ApiVersions v4+ of any
 * broker (v3 leaves out every feature whose minimum is 0, KAFKA-17011); update sends one
 * UpdateFeatures to the controller, where any tidelog broker will do.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import { ApiKey, type ApiVersionsResponse, type UpdateFeaturesResponse } from '../protocol/generated/index.js'
import type { Admin } from './admin.js'
import { KafkaProtocolError } from './errors.js'

export interface FeatureDescription {
  readonly name: string
  readonly supportedMinVersion: number
  readonly supportedMaxVersion: number
  /** 0 when the feature is not finalized (disabled). */
  readonly finalizedLevel: number
}

export interface FeatureMetadata {
  /** Sorted by name: every feature the broker supports, and any finalized one it does not. */
  readonly features: readonly FeatureDescription[]
  /** The finalized features' epoch; null when the broker reports none (-1). */
  readonly finalizedFeaturesEpoch: bigint | null
}

/** Kafka's FeatureUpdate.UpgradeType, by the names kafka-features.sh's subcommands imply. */
export type FeatureUpgradeType = 'upgrade' | 'safe-downgrade' | 'unsafe-downgrade'

const UPGRADE_TYPE_CODES: Readonly<Record<FeatureUpgradeType, number>> = {
  upgrade: 1,
  'safe-downgrade': 2,
  'unsafe-downgrade': 3,
}

export interface FeatureLevelUpdate {
  readonly feature: string
  readonly level: number
  readonly upgradeType: FeatureUpgradeType
}

/** The oldest ApiVersions that lists features whose minimum is 0 (KAFKA-17011). */
const API_VERSIONS_WITH_ALL_FEATURES = 4

export async function describeFeatures(admin: Admin): Promise<FeatureMetadata> {
  const connection = await admin.client.anyConnection()
  const version = Math.max(connection.versionFor(ApiKey.ApiVersions), API_VERSIONS_WITH_ALL_FEATURES)
  const response = await connection.request<ApiVersionsResponse>(
    ApiKey.ApiVersions,
    { clientSoftwareName: 'tidelog-cli', clientSoftwareVersion: '0', clusterId: null, nodeId: -1 },
    { version },
  )
  if (response.errorCode !== ErrorCode.NONE) throw new KafkaProtocolError(response.errorCode, 'ApiVersions')
  const finalized = new Map(response.finalizedFeatures.map((f) => [f.name, f.maxVersionLevel]))
  const names = new Set([...response.supportedFeatures.map((f) => f.name), ...finalized.keys()])
  const features = [...names].sort().map((name) => {
    const supported = response.supportedFeatures.find((f) => f.name === name)
    return {
      name,
      supportedMinVersion: supported?.minVersion ?? 0,
      supportedMaxVersion: supported?.maxVersion ?? 0,
      finalizedLevel: finalized.get(name) ?? 0,
    }
  })
  const epoch = response.finalizedFeaturesEpoch
  return { features, finalizedFeaturesEpoch: epoch < 0n ? null : epoch }
}

/**
 * Changes finalized levels in one request: all or none (Kafka 4.4 refuses the whole request
 * when one update is refused). Throws KafkaProtocolError with the broker's message.
 */
export async function updateFeatures(
  admin: Admin,
  updates: readonly FeatureLevelUpdate[],
  options: { validateOnly?: boolean } = {},
): Promise<void> {
  const response = await admin.client.request<UpdateFeaturesResponse>(
    'controller',
    ApiKey.UpdateFeatures,
    (version) => {
      // A v0-only broker cannot validate: it would apply what was meant as a dry run.
      if (version === 0 && options.validateOnly)
        throw new KafkaProtocolError(
          ErrorCode.UNSUPPORTED_VERSION,
          'the broker cannot validate feature updates (UpdateFeatures v0)',
        )
      return {
        timeoutMs: 30000,
        featureUpdates: updates.map((u) => ({
          feature: u.feature,
          maxVersionLevel: u.level,
          // v0 has only AllowDowngrade (which Kafka 4.4 ignores); v1+ the upgrade type.
          allowDowngrade: version === 0 && u.upgradeType !== 'upgrade',
          upgradeType: version === 0 ? 1 : UPGRADE_TYPE_CODES[u.upgradeType],
        })),
        validateOnly: version >= 1 && (options.validateOnly ?? false),
      }
    },
  )
  if (response.errorCode !== ErrorCode.NONE)
    throw new KafkaProtocolError(response.errorCode, response.errorMessage)
  for (const result of response.results)
    if (result.errorCode !== ErrorCode.NONE)
      throw new KafkaProtocolError(result.errorCode, `${result.feature}: ${result.errorMessage}`)
}

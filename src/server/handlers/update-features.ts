/**
 * UpdateFeatures (key 57).
 * Behavior: changes finalized feature levels (metadata/feature-control.ts holds Kafka 4.4's
 * checks and the write). One refused update fails the whole request: the top-level error
 * is INVALID_UPDATE_VERSION with Kafka's "The update failed for all features since the
 * following feature had an error: ..." and no results; otherwise v0-v1 list every feature
 * with NONE. validateOnly (v1+) checks and writes nothing. Kafka forwards the request to
 * its active controller; tidelog has no separate controller, so any broker checks and
 * writes (one compare-and-set of the metadata store) and answers once its own image has
 * the new levels; the other brokers follow through their watch of the store.
 * A write the metadata store did not commit answers REQUEST_TIMED_OUT (top level).
 * Authorization: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED (top level).
 * Version notes: v0's AllowDowngrade is ignored, as Kafka 4.4 ignores it: a v0 request is
 * an UPGRADE (a lower level is refused). v1 adds UpgradeType and ValidateOnly; v2 drops
 * the results from the response.
 */
import { type FeatureUpdate, UpgradeType, updateFeatures } from '../../metadata/feature-control.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type UpdateFeaturesRequest,
  type UpdateFeaturesResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const updateFeaturesHandler: ApiHandler<UpdateFeaturesRequest, UpdateFeaturesResponse> = {
  apiKey: ApiKey.UpdateFeatures,
  minVersion: 0,
  maxVersion: 2,
  async handle(context, request) {
    const failed = (errorCode: number, errorMessage: string): UpdateFeaturesResponse => ({
      throttleTimeMs: 0,
      errorCode,
      errorMessage,
      results: [],
    })
    if (!context.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME))
      return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 'Cluster authorization failed.')
    const version = context.apiVersion
    const updates: FeatureUpdate[] = request.featureUpdates.map((u) => ({
      feature: u.feature,
      level: u.maxVersionLevel,
      upgradeType: version >= 1 ? u.upgradeType : UpgradeType.UPGRADE,
    }))
    const validateOnly = version >= 1 && request.validateOnly
    const broker = context.broker
    const error = await updateFeatures(broker.metadata, updates, validateOnly, broker.nodeId)
    if (error !== null)
      return failed(
        error.errorCode,
        error.feature === null
          ? error.message
          : `The update failed for all features since the following feature had an error: ${error.message}`,
      )
    if (!validateOnly) broker.logger.info({ updates }, 'finalized feature levels updated')
    return {
      throttleTimeMs: 0,
      errorCode: ErrorCode.NONE,
      errorMessage: null,
      // Kafka names each feature once, with ApiError.NONE's message.
      results: [...new Set(updates.map((u) => u.feature))].map((feature) => ({
        feature,
        errorCode: ErrorCode.NONE,
        errorMessage: 'NONE',
      })),
    }
  },
}

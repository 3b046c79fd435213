/**
 * FindCoordinator (key 10).
 * Behavior: a group's coordinator is the leader of its __consumer_offsets partition
 * (abs(groupId.hashCode) % partitions), the topic being created on first use. While this
 * broker leads that partition but is still loading it the answer is
 * COORDINATOR_NOT_AVAILABLE (after a short wait), as a client would otherwise reach a
 * coordinator answering COORDINATOR_LOAD_IN_PROGRESS, which kafkajs does not retry in
 * JoinGroup. A transactional id's coordinator (key type 1) is found the same way on
 * __transaction_state (created on first use), as Kafka's TransactionStateManager places it.
 * A share-partition's share coordinator (key type 2, KIP-932, key "group:topicId:partition")
 * on __share_group_state, for brokers: CLUSTER_ACTION, else CLUSTER_AUTHORIZATION_FAILED.
 * Authorization: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or the transactional id
 * (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
 * Version notes: v0 is advertised because librdkafka gates its group coordinator (and lz4)
 * on it; v1 adds key type, throttle time and error message; v3+ flexible; v4+ batches the
 * keys (coordinatorKeys) with one result each.
 */

import { parseCoordinatorKey } from '../../coordinator/share/share-state-records.js'
import { type BrokerId, endpointFor } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type FindCoordinatorRequest,
  type FindCoordinatorResponse,
  type FindCoordinatorResponseCoordinator,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

const KEY_TYPE_GROUP = 0
const KEY_TYPE_TRANSACTION = 1
const KEY_TYPE_SHARE = 2

export const findCoordinatorHandler: ApiHandler<FindCoordinatorRequest, FindCoordinatorResponse> = {
  apiKey: ApiKey.FindCoordinator,
  minVersion: 0,
  maxVersion: 6,
  async handle(context, request) {
    if (context.apiVersion >= 4) {
      const coordinators = await Promise.all(
        request.coordinatorKeys.map((key) => locate(context, key, request.keyType)),
      )
      return { ...emptyResponse(), coordinators }
    }
    const found = await locate(context, request.key, request.keyType)
    return {
      ...emptyResponse(),
      errorCode: found.errorCode,
      errorMessage: context.apiVersion >= 1 ? found.errorMessage : null,
      nodeId: found.nodeId,
      host: found.host,
      port: found.port,
    }
  },
}

function emptyResponse(): FindCoordinatorResponse {
  return {
    throttleTimeMs: 0,
    errorCode: ErrorCode.NONE,
    errorMessage: null,
    nodeId: 0,
    host: '',
    port: 0,
    coordinators: [],
  }
}

async function locate(
  context: RequestContext,
  key: string,
  keyType: number,
): Promise<FindCoordinatorResponseCoordinator> {
  const failure = (errorCode: number, errorMessage: string) => ({
    key,
    nodeId: -1,
    host: '',
    port: -1,
    errorCode,
    errorMessage,
  })
  if (keyType === KEY_TYPE_TRANSACTION) {
    if (!context.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key))
      return failure(
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        'Transactional Id authorization failed.',
      )
    if (key === '') return failure(ErrorCode.INVALID_REQUEST, 'empty transactional id')
    const found = await context.broker.transactionCoordinator.findCoordinator(key)
    return { key, ...found, ...onListener(context, found.nodeId) }
  }
  if (keyType === KEY_TYPE_SHARE) {
    // Kafka's share coordinator keys are for brokers: CLUSTER_ACTION, and "group:topicId:partition".
    if (!context.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME))
      return failure(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 'Cluster authorization failed.')
    if (parseCoordinatorKey(key) === undefined)
      return failure(ErrorCode.INVALID_REQUEST, 'Invalid coordinator key.')
    const found = await context.broker.shareCoordinator.findCoordinator(key)
    return { key, ...found, ...onListener(context, found.nodeId) }
  }
  if (keyType !== KEY_TYPE_GROUP) return failure(ErrorCode.INVALID_REQUEST, `unknown key type ${keyType}`)
  if (!context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key))
    return failure(ErrorCode.GROUP_AUTHORIZATION_FAILED, 'Group authorization failed.')
  const found = await context.broker.groupCoordinator.findCoordinator(key)
  return { key, ...found, ...onListener(context, found.nodeId) }
}

/** The coordinator's address on the listener the client came on (Kafka answers per listener). */
function onListener(context: RequestContext, nodeId: BrokerId): { host: string; port: number } | object {
  const registration = context.broker.metadataImage().brokers.get(nodeId)
  return (registration && endpointFor(registration, context.connection.listenerName)) ?? {}
}

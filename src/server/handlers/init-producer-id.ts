/**
 * InitProducerId (key 22).
 * Behavior: a producer without a transactional id gets a fresh producer id, cluster-wide
 * unique (blocks claimed from the metadata store), at epoch 0. As in Kafka, this holds
 * even when a v3+ request names its current producer id and epoch (KIP-360 "bump"):
 * Kafka's TransactionCoordinator "blindly accepts" non-transactional requests with a new
 * id, and clients (librdkafka's epoch bump, the Java client) take the new id and restart
 * their sequences at 0. Only one of producerId/producerEpoch given is INVALID_REQUEST.
 * A transactional id goes to the transaction coordinator (epoch bump, fencing of older
 * instances, abort of their open transaction; an empty id is INVALID_REQUEST, as Kafka).
 * Authorization: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without
 * one, IDEMPOTENT_WRITE on the cluster or WRITE on any topic (CLUSTER_AUTHORIZATION_FAILED).
 * Version notes: v2+ flexible; v3 adds producerId/producerEpoch; v4 adds PRODUCER_FENCED
 * (INVALID_PRODUCER_EPOCH before it); v5 changes nothing on the broker side.
 */

import { NO_PRODUCER_ID, producerIdFromWire } from '../../common/types.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type InitProducerIdRequest,
  type InitProducerIdResponse,
} from '../../protocol/generated/index.js'
import { defaultInitProducerIdResponse } from '../../protocol/generated/init-producer-id-response.js'
import { toErrorCode } from '../../replication/kafka-error.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

const NO_PRODUCER_EPOCH = -1

export const initProducerIdHandler: ApiHandler<InitProducerIdRequest, InitProducerIdResponse> = {
  apiKey: ApiKey.InitProducerId,
  minVersion: 0,
  maxVersion: 5,
  async handle(context, request) {
    const refused = refusal(request)
    if (refused !== null) return failure(refused)
    const denied = authorizationError(context, request.transactionalId)
    if (denied !== null) return failure(denied)
    if (request.transactionalId !== null) {
      const expected =
        request.producerId === NO_PRODUCER_ID
          ? null
          : { producerId: producerIdFromWire(request.producerId), producerEpoch: request.producerEpoch }
      const result = await context.broker.transactionCoordinator.initProducerId(
        request.transactionalId,
        request.transactionTimeoutMs,
        expected,
      )
      const errorCode =
        result.errorCode === ErrorCode.PRODUCER_FENCED && context.apiVersion < 4
          ? ErrorCode.INVALID_PRODUCER_EPOCH
          : result.errorCode
      return { ...defaultInitProducerIdResponse(), ...result, errorCode }
    }
    try {
      const producerId = await context.broker.producerIdManager.generateProducerId()
      return { ...defaultInitProducerIdResponse(), errorCode: ErrorCode.NONE, producerId, producerEpoch: 0 }
    } catch (error) {
      context.broker.logger.warn({ err: error }, 'InitProducerId: no producer id available')
      // Store unavailable or contended: a retriable answer, as Kafka's while a block is pending.
      return failure(toErrorCode(error) ?? ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    }
  },
}

/**
 * A transactional producer needs WRITE on its transactional id; an idempotent one
 * IDEMPOTENT_WRITE on the cluster or WRITE on some topic (Kafka 3's rule, KIP-679).
 */
function authorizationError(context: RequestContext, transactionalId: string | null): number | null {
  if (transactionalId !== null)
    return context.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactionalId)
      ? null
      : ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
  return context.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME) ||
    context.authorizeByResourceType(AclOperation.WRITE, ResourceType.TOPIC)
    ? null
    : ErrorCode.CLUSTER_AUTHORIZATION_FAILED
}

function refusal(request: InitProducerIdRequest): number | null {
  const hasId = request.producerId !== NO_PRODUCER_ID
  const hasEpoch = request.producerEpoch !== NO_PRODUCER_EPOCH
  if (hasId !== hasEpoch) return ErrorCode.INVALID_REQUEST
  if (request.transactionalId === '') return ErrorCode.INVALID_REQUEST
  return null
}

function failure(errorCode: number): InitProducerIdResponse {
  return {
    ...defaultInitProducerIdResponse(),
    errorCode,
    producerId: NO_PRODUCER_ID,
    producerEpoch: NO_PRODUCER_EPOCH,
  }
}

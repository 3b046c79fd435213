/**
 * AddOffsetsToTxn (key 25).
 * Behavior: before TxnOffsetCommit, a transactional producer adds the group's
 * __consumer_offsets partition to its transaction, so the commit's markers reach the group
 * coordinator too (Kafka's handler: AddPartitionsToTxn of that one partition).
 * Authorization: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ
 * on the group (GROUP_AUTHORIZATION_FAILED).
 * Version notes: v2 adds PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before it); v3+ flexible;
 * v4 adds TRANSACTION_ABORTABLE, which tidelog does not return.
 */
import { producerIdFromWire } from '../../common/types.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  type AddOffsetsToTxnRequest,
  type AddOffsetsToTxnResponse,
  ApiKey,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const addOffsetsToTxnHandler: ApiHandler<AddOffsetsToTxnRequest, AddOffsetsToTxnResponse> = {
  apiKey: ApiKey.AddOffsetsToTxn,
  minVersion: 0,
  maxVersion: 4,
  async handle(context, request) {
    if (!context.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactionalId))
      return { throttleTimeMs: 0, errorCode: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED }
    if (!context.authorize(AclOperation.READ, ResourceType.GROUP, request.groupId))
      return { throttleTimeMs: 0, errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED }
    const errorCode = await context.broker.transactionCoordinator.addOffsets(
      request.transactionalId,
      { producerId: producerIdFromWire(request.producerId), producerEpoch: request.producerEpoch },
      request.groupId,
    )
    return {
      throttleTimeMs: 0,
      errorCode:
        errorCode === ErrorCode.PRODUCER_FENCED && context.apiVersion < 2
          ? ErrorCode.INVALID_PRODUCER_EPOCH
          : errorCode,
    }
  },
}

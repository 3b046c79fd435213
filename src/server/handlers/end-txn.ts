/**
 * EndTxn (key 26).
 * Behavior: commits or aborts the producer's ongoing transaction. Answered once
 * PrepareCommit/PrepareAbort is in __transaction_state; the markers to every partition and
 * the final state follow, and until then the next transactional request of that id gets
 * CONCURRENT_TRANSACTIONS. Ending a transaction that already ended the same way is NONE
 * (a retry); the other way, or with none ongoing, INVALID_TXN_STATE.
 * Authorization: WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
 * Version notes: v2 adds PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before it); v3+ flexible;
 * v4 adds TRANSACTION_ABORTABLE, which tidelog does not return.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import { defaultEndTxnResponse } from '../../protocol/generated/end-txn-response.js'
import { ApiKey, type EndTxnRequest, type EndTxnResponse } from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const endTxnHandler: ApiHandler<EndTxnRequest, EndTxnResponse> = {
  apiKey: ApiKey.EndTxn,
  minVersion: 0,
  maxVersion: 4,
  async handle(context, request) {
    if (!context.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactionalId))
      return { ...defaultEndTxnResponse(), errorCode: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED }
    const errorCode = await context.broker.transactionCoordinator.endTransaction(
      request.transactionalId,
      request.producerId,
      request.producerEpoch,
      request.committed ? 'commit' : 'abort',
    )
    return {
      ...defaultEndTxnResponse(),
      errorCode:
        errorCode === ErrorCode.PRODUCER_FENCED && context.apiVersion < 2
          ? ErrorCode.INVALID_PRODUCER_EPOCH
          : errorCode,
    }
  },
}

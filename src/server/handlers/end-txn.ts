/**
 * EndTxn (key 26).
 * Behavior: commits or aborts the producer's ongoing transaction. Answered once
 * PrepareCommit/PrepareAbort is in __transaction_state; the markers to every partition and
 * the final state follow, and until then the next transactional request of that id gets
 * CONCURRENT_TRANSACTIONS. Ending a transaction that already ended the same way is NONE
 * (a retry); the other way, or with none ongoing, INVALID_TXN_STATE.
 * Authorization: WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
 * Version notes: v2 adds PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before it); v3+ flexible;
 * v4 adds TRANSACTION_ABORTABLE, which tidelog does not return; v5 is transaction version 2
 * (KIP-890 part 2): every end bumps the producer epoch (the markers carry the bumped one, so
 * a late write of the ended transaction is fenced), the answer names the producer id and
 * epoch to continue with, a retry of an end already done is recognised by the epoch one
 * below, and an abort with no transaction ongoing only bumps the epoch.
 */
import { producerIdFromWire } from '../../common/types.js'
import { TV_0, TV_2 } from '../../coordinator/transaction/transaction-metadata.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { defaultEndTxnResponse } from '../../protocol/generated/end-txn-response.js'
import { ApiKey, type EndTxnRequest, type EndTxnResponse } from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const endTxnHandler: ApiHandler<EndTxnRequest, EndTxnResponse> = {
  apiKey: ApiKey.EndTxn,
  minVersion: 0,
  maxVersion: 5,
  async handle(context, request) {
    if (!context.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactionalId))
      return { ...defaultEndTxnResponse(), errorCode: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED }
    // Kafka's transactionVersionForEndTxn: the request's version, not the finalized level.
    const answer = await context.broker.transactionCoordinator.endTxn(
      request.transactionalId,
      { producerId: producerIdFromWire(request.producerId), producerEpoch: request.producerEpoch },
      request.committed ? 'commit' : 'abort',
      true,
      context.apiVersion >= 5 ? TV_2 : TV_0,
    )
    return {
      ...defaultEndTxnResponse(),
      errorCode:
        answer.errorCode === ErrorCode.PRODUCER_FENCED && context.apiVersion < 2
          ? ErrorCode.INVALID_PRODUCER_EPOCH
          : answer.errorCode,
      producerId: answer.producerId,
      producerEpoch: answer.producerEpoch,
    }
  },
}

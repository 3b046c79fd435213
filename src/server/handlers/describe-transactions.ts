/**
 * DescribeTransactions (key 65).
 * Behavior: the state of each transactional id this broker coordinates: producer id and
 * epoch, timeout, start time and the partitions still without their marker.
 * NOT_COORDINATOR for ids coordinated elsewhere, TRANSACTIONAL_ID_NOT_FOUND for unknown ones.
 * Authorization: DESCRIBE on each transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
 * Version notes: v0 only (flexible).
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DescribeTransactionsRequest,
  type DescribeTransactionsResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const describeTransactionsHandler: ApiHandler<
  DescribeTransactionsRequest,
  DescribeTransactionsResponse
> = {
  apiKey: ApiKey.DescribeTransactions,
  minVersion: 0,
  maxVersion: 0,
  handle(context, request) {
    const allowed = (id: string) =>
      context.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, id)
    // An id answered with an error carries the schema's zero defaults in its other fields,
    // as Kafka's coordinator leaves them (a fresh TransactionState with an error code).
    const failed = (transactionalId: string, errorCode: number) => ({
      transactionalId,
      errorCode,
      transactionState: '',
      transactionTimeoutMs: 0,
      transactionStartTimeMs: 0,
      producerId: 0n,
      producerEpoch: 0,
      topics: [],
    })
    const described = context.broker.transactionCoordinator
      .describe(request.transactionalIds)
      .map((d) =>
        !allowed(d.transactionalId)
          ? failed(d.transactionalId, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
          : d.errorCode !== ErrorCode.NONE
            ? failed(d.transactionalId, d.errorCode)
            : d,
      )
    return {
      throttleTimeMs: 0,
      transactionStates: described.map((d) => ({
        ...d,
        transactionStartTimeMs: BigInt(d.transactionStartTimeMs),
      })),
    }
  },
}

/**
 * DescribeTransactions (key 65).
 * Behavior: the state of each transactional id this broker coordinates: producer id and
 * epoch, timeout, start time and the partitions still without their marker.
 * NOT_COORDINATOR for ids coordinated elsewhere, TRANSACTIONAL_ID_NOT_FOUND for unknown ones.
 * Version notes: v0 only (flexible).
 */
import {
  ApiKey,
  type DescribeTransactionsRequest,
  type DescribeTransactionsResponse,
} from '../../protocol/generated/index.js'
import type { ApiHandler } from './registry.js'

export const describeTransactionsHandler: ApiHandler<
  DescribeTransactionsRequest,
  DescribeTransactionsResponse
> = {
  apiKey: ApiKey.DescribeTransactions,
  minVersion: 0,
  maxVersion: 0,
  handle(context, request) {
    const described = context.broker.transactionCoordinator.describe(request.transactionalIds)
    return {
      throttleTimeMs: 0,
      transactionStates: described.map((d) => ({
        ...d,
        transactionStartTimeMs: BigInt(d.transactionStartTimeMs),
      })),
    }
  },
}

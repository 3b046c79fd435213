/**
 * ListTransactions (key 66).
 * Behavior: the transactional ids this broker coordinates, filtered by state names (unknown
 * ones listed back in unknownStateFilters), producer ids and, v1+, how long the transaction
 * has run. COORDINATOR_LOAD_IN_PROGRESS while a __transaction_state partition loads.
 * Authorization: only the transactional ids the principal may DESCRIBE are listed.
 * Version notes: v0 flexible; v1 adds the duration filter.
 */
import {
  ApiKey,
  type ListTransactionsRequest,
  type ListTransactionsResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const listTransactionsHandler: ApiHandler<ListTransactionsRequest, ListTransactionsResponse> = {
  apiKey: ApiKey.ListTransactions,
  minVersion: 0,
  maxVersion: 1,
  handle(context, request) {
    const listing = context.broker.transactionCoordinator.list({
      states: request.stateFilters,
      producerIds: request.producerIdFilters,
      durationMs: context.apiVersion >= 1 ? Number(request.durationFilter) : -1,
    })
    // Kafka lists only the transactional ids the principal may describe.
    const transactionStates = listing.transactionStates.filter((t) =>
      context.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactionalId),
    )
    return { throttleTimeMs: 0, ...listing, transactionStates }
  },
}

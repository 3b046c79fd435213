/**
 * ListTransactions (key 66).
 * Behavior: the transactional ids this broker coordinates, filtered by state names (unknown
 * ones listed back in unknownStateFilters), producer ids and, v1+, how long the transaction
 * has run. COORDINATOR_LOAD_IN_PROGRESS while a __transaction_state partition loads.
 * Authorization: only the transactional ids the principal may DESCRIBE are listed.
 * Version notes: v0 flexible; v1 adds the duration filter; v2 (KIP-1152) a transactional id
 * pattern: a regular expression the whole id must match (Java's Matcher.matches), null or
 * empty for all; one that does not compile answers INVALID_REGULAR_EXPRESSION. The pattern is
 * compiled as a JavaScript RegExp, whose syntax is close to, not the same as, Java's.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
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
  maxVersion: 2,
  handle(context, request) {
    const pattern = context.apiVersion >= 2 ? request.transactionalIdPattern : null
    let matches: (transactionalId: string) => boolean = () => true
    if (pattern !== null && pattern !== '') {
      let regex: RegExp
      try {
        regex = new RegExp(`^(?:${pattern})$`, 'u')
      } catch {
        return {
          throttleTimeMs: 0,
          errorCode: ErrorCode.INVALID_REGULAR_EXPRESSION,
          unknownStateFilters: [],
          transactionStates: [],
        }
      }
      matches = (transactionalId) => regex.test(transactionalId)
    }
    const listing = context.broker.transactionCoordinator.list({
      states: request.stateFilters,
      producerIds: request.producerIdFilters,
      durationMs: context.apiVersion >= 1 ? Number(request.durationFilter) : -1,
    })
    // Kafka lists only the transactional ids the principal may describe.
    const transactionStates = listing.transactionStates.filter(
      (t) =>
        matches(t.transactionalId) &&
        context.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactionalId),
    )
    return { throttleTimeMs: 0, ...listing, transactionStates }
  },
}

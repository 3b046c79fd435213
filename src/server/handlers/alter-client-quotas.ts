/**
 * AlterClientQuotas (key 49).
 * Behavior: sets or removes quota keys of user / client-id entities (a null name is the
 * default) in the metadata store, where every broker follows them; one result per entry.
 * Kafka's checks (ClientQuotaControlManager): an empty entity, an unknown entity type, an
 * empty name, an unknown quota key or a byte rate that is not a whole number answer
 * INVALID_REQUEST for that entry, which then changes nothing. tidelog also refuses ip
 * entities and controller_mutation_rate (not enforced here) and non-positive values.
 * `validateOnly` checks and answers without writing.
 * Version notes: v0-1; v1 is flexible.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  type AlterClientQuotasRequest,
  type AlterClientQuotasResponse,
  ApiKey,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import { checkQuotaValue, entityFromWire } from '../quota/client-quota-entity.js'
import type { QuotaAlteration } from '../quota/client-quota-store.js'
import type { ApiHandler } from './registry.js'

export const alterClientQuotasHandler: ApiHandler<AlterClientQuotasRequest, AlterClientQuotasResponse> = {
  apiKey: ApiKey.AlterClientQuotas,
  minVersion: 0,
  maxVersion: 1,
  async handle(context, request) {
    // As Kafka: ALTER_CONFIGS on the cluster, or every entry fails.
    if (!context.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME))
      return {
        throttleTimeMs: 0,
        entries: request.entries.map((entry) => ({
          errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          errorMessage: 'Not authorized to alter client quotas (ALTER_CONFIGS on the cluster).',
          entity: entry.entity.map(({ entityType, entityName }) => ({ entityType, entityName })),
        })),
      }
    const quotaStore = context.broker.clientQuotaStore
    const results = request.entries.map((entry) => {
      const entity = entityFromWire(entry.entity)
      if (!entity.ok) return { failure: entity.message }
      if (quotaStore === undefined) return { failure: 'This broker keeps no client quotas' }
      const ops = new Map<string, number | null>()
      for (const op of entry.ops) {
        if (ops.has(op.key)) return { failure: `Duplicate quota key ${op.key} for one entity` }
        if (!op.remove) {
          const checked = checkQuotaValue(op.key, op.value)
          if (!checked.ok) return { failure: checked.message }
        }
        ops.set(op.key, op.remove ? null : op.value)
      }
      return { alteration: { entity: entity.value, ops } satisfies QuotaAlteration }
    })
    if (!request.validateOnly && quotaStore !== undefined)
      await quotaStore.alter(results.flatMap((r) => (r.alteration ? [r.alteration] : [])))
    return {
      throttleTimeMs: 0,
      entries: request.entries.map((entry, i) => {
        const failure = results[i].failure
        return {
          errorCode: failure === undefined ? ErrorCode.NONE : ErrorCode.INVALID_REQUEST,
          errorMessage: failure ?? null,
          entity: entry.entity.map(({ entityType, entityName }) => ({ entityType, entityName })),
        }
      }),
    }
  },
}

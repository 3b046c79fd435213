/**
 * DescribeClientQuotas (key 48).
 * Behavior: the quotas of every entity the filter matches, from the metadata store as this
 * broker follows it. A component matches one entity type: match type 0 an exact name,
 * 1 the default, 2 any name of the type, default included (Kafka's KRaft controller). Not
 * strict, an entity matches when every component does; strict, it must also have no other
 * type. A component of an unknown type, a type named twice, or match type 0 without a name
 * answers INVALID_REQUEST for the whole request, with no entries.
 * Version notes: v0-1; v1 is flexible.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DescribeClientQuotasRequest,
  type DescribeClientQuotasResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import { CLIENT_ID, type ClientQuotaEntity, entityToWire, IP, USER } from '../quota/client-quota-entity.js'
import type { ApiHandler } from './registry.js'

const MATCH_EXACT = 0
const MATCH_DEFAULT = 1
const MATCH_SPECIFIED = 2

type Matcher = (name: string | null) => boolean

export const describeClientQuotasHandler: ApiHandler<
  DescribeClientQuotasRequest,
  DescribeClientQuotasResponse
> = {
  apiKey: ApiKey.DescribeClientQuotas,
  minVersion: 0,
  maxVersion: 1,
  handle(context, request) {
    // As Kafka: DESCRIBE_CONFIGS on the cluster.
    if (!context.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME))
      return {
        throttleTimeMs: 0,
        errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        errorMessage: 'Not authorized to describe client quotas (DESCRIBE_CONFIGS on the cluster).',
        entries: [],
      }
    const matchers = new Map<string, Matcher>()
    for (const { entityType, matchType, match } of request.components) {
      let failure: string | null = null
      if (entityType === '') failure = 'Unexpected empty filter component entity type'
      else if (entityType !== USER && entityType !== CLIENT_ID && entityType !== IP)
        failure = `Custom entity type ${entityType} not supported`
      else if (matchers.has(entityType)) failure = `Duplicate ${entityType} filter component entity type`
      else if (matchType === MATCH_EXACT && match === null)
        failure = 'Request specified MATCH_TYPE_EXACT, but set match string to null'
      else if (matchType !== MATCH_EXACT && matchType !== MATCH_DEFAULT && matchType !== MATCH_SPECIFIED)
        failure = `Unexpected match type ${matchType}`
      if (failure !== null)
        return {
          throttleTimeMs: 0,
          errorCode: ErrorCode.INVALID_REQUEST,
          errorMessage: failure,
          entries: null,
        }
      matchers.set(
        entityType,
        matchType === MATCH_EXACT
          ? (name) => name === match
          : matchType === MATCH_DEFAULT
            ? (name) => name === null
            : () => true,
      )
    }
    if (matchers.has(IP) && matchers.size > 1)
      return {
        throttleTimeMs: 0,
        errorCode: ErrorCode.INVALID_REQUEST,
        errorMessage:
          'Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.',
        entries: null,
      }
    const entries = [...(context.broker.clientQuotaStore?.current().values() ?? [])]
      .filter(({ entity }) => matches(entity, matchers, request.strict))
      .map(({ entity, values }) => ({
        entity: entityToWire(entity),
        values: Object.entries(values)
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .map(([key, value]) => ({ key, value })),
      }))
    return { throttleTimeMs: 0, errorCode: ErrorCode.NONE, errorMessage: null, entries }
  },
}

function matches(
  entity: ClientQuotaEntity,
  matchers: ReadonlyMap<string, Matcher>,
  strict: boolean,
): boolean {
  const names = new Map<string, string | null>()
  if (entity.user !== undefined) names.set(USER, entity.user)
  if (entity.clientId !== undefined) names.set(CLIENT_ID, entity.clientId)
  for (const [type, matcher] of matchers) {
    if (!names.has(type) || !matcher(names.get(type)!)) return false
  }
  return !strict || [...names.keys()].every((type) => matchers.has(type))
}

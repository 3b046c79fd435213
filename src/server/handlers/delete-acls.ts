/**
 * DeleteAcls (key 31).
 * Behavior: deletes every stored ACL any filter matches, in one store transaction, and
 * answers for each filter the ACLs it matched. SECURITY_DISABLED without an authorizer,
 * CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster; a filter with unknown codes
 * makes the request invalid, as Kafka's DeleteAclsRequest.validate does: every filter then
 * answers INVALID_REQUEST and nothing is deleted.
 * Version notes: v1 pattern types (v0 filters LITERAL only), v2+ flexible, v3 the same as v2.
 */
import { MetadataStoreError } from '../../metadata/store/metadata-store.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { ApiKey, type DeleteAclsRequest, type DeleteAclsResponse } from '../../protocol/generated/index.js'
import {
  type AclBinding,
  type AclBindingFilter,
  AclOperation,
  CLUSTER_NAME,
  InvalidAclError,
  ResourceType,
  validateFilter,
} from '../../security/authorizer/acl.js'
import { aclKey } from '../../security/authorizer/acl-store.js'
import type { ApiHandler } from './registry.js'

export const deleteAclsHandler: ApiHandler<DeleteAclsRequest, DeleteAclsResponse> = {
  apiKey: ApiKey.DeleteAcls,
  minVersion: 0,
  maxVersion: 3,
  async handle(context, request) {
    const failAll = (errorCode: number, errorMessage: string): DeleteAclsResponse => ({
      throttleTimeMs: 0,
      filterResults: request.filters.map(() => ({ errorCode, errorMessage, matchingAcls: [] })),
    })
    const acls = context.broker.acls
    if (acls === null) return failAll(ErrorCode.SECURITY_DISABLED, 'No Authorizer is configured.')
    if (!context.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME))
      return failAll(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 'Cluster authorization failed.')
    const filters = request.filters.map(
      (f) =>
        ({
          resourceType: f.resourceTypeFilter,
          resourceName: f.resourceNameFilter,
          patternType: f.patternTypeFilter,
          principal: f.principalFilter,
          host: f.hostFilter,
          operation: f.operation,
          permissionType: f.permissionType,
        }) as AclBindingFilter,
    )
    try {
      for (const filter of filters) validateFilter(filter)
    } catch (error) {
      if (!(error instanceof InvalidAclError)) throw error
      return failAll(ErrorCode.INVALID_REQUEST, error.message)
    }
    let matched: AclBinding[][]
    try {
      matched = await acls.matching(filters)
      const doomed = new Map<string, AclBinding>()
      for (const list of matched) for (const b of list) doomed.set(aclKey(b), b)
      await acls.delete([...doomed.values()])
    } catch (error) {
      if (!(error instanceof MetadataStoreError)) throw error
      return failAll(ErrorCode.UNKNOWN_SERVER_ERROR, `The metadata store failed: ${error.message}`)
    }
    return {
      throttleTimeMs: 0,
      filterResults: matched.map((list) => ({
        errorCode: ErrorCode.NONE,
        errorMessage: null,
        matchingAcls: list.map((b) => ({
          errorCode: ErrorCode.NONE,
          errorMessage: null,
          ...b,
          patternType: b.patternType,
        })),
      })),
    }
  },
}

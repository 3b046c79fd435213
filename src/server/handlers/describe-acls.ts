/**
 * DescribeAcls (key 29).
 * Behavior: the stored ACLs the filter matches (Kafka's AclBindingFilter: ANY and MATCH
 * pattern types, null name, principal and host for "any"), grouped by resource pattern.
 * SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on
 * the cluster, INVALID_REQUEST for a filter with unknown codes or a malformed principal.
 * Version notes: v1 pattern types (v0 filters LITERAL only), v2+ flexible, v3 the same as v2.
 */
import { MetadataStoreError } from '../../metadata/store/metadata-store.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DescribeAclsRequest,
  type DescribeAclsResponse,
} from '../../protocol/generated/index.js'
import {
  type AclBinding,
  type AclBindingFilter,
  AclOperation,
  CLUSTER_NAME,
  InvalidAclError,
  ResourceType,
  validateFilter,
} from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

type Resource = DescribeAclsResponse['resources'][number]

export const describeAclsHandler: ApiHandler<DescribeAclsRequest, DescribeAclsResponse> = {
  apiKey: ApiKey.DescribeAcls,
  minVersion: 0,
  maxVersion: 3,
  async handle(context, request) {
    const fail = (errorCode: number, errorMessage: string): DescribeAclsResponse => ({
      throttleTimeMs: 0,
      errorCode,
      errorMessage,
      resources: [],
    })
    const acls = context.broker.acls
    if (acls === null) return fail(ErrorCode.SECURITY_DISABLED, 'No Authorizer is configured.')
    if (!context.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME))
      return fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 'Cluster authorization failed.')
    const filter = {
      resourceType: request.resourceTypeFilter,
      resourceName: request.resourceNameFilter,
      patternType: request.patternTypeFilter,
      principal: request.principalFilter,
      host: request.hostFilter,
      operation: request.operation,
      permissionType: request.permissionType,
    } as AclBindingFilter
    try {
      validateFilter(filter)
    } catch (error) {
      if (!(error instanceof InvalidAclError)) throw error
      return fail(ErrorCode.INVALID_REQUEST, error.message)
    }
    let matching: AclBinding[]
    try {
      ;[matching] = await acls.matching([filter])
    } catch (error) {
      if (!(error instanceof MetadataStoreError)) throw error
      return fail(ErrorCode.UNKNOWN_SERVER_ERROR, `The metadata store failed: ${error.message}`)
    }
    const resources = new Map<string, Resource>()
    for (const b of matching) {
      const key = JSON.stringify([b.resourceType, b.patternType, b.resourceName])
      let resource = resources.get(key)
      if (resource === undefined) {
        resource = {
          resourceType: b.resourceType,
          resourceName: b.resourceName,
          patternType: b.patternType,
          acls: [],
        }
        resources.set(key, resource)
      }
      resource.acls.push({
        principal: b.principal,
        host: b.host,
        operation: b.operation,
        permissionType: b.permissionType,
      })
    }
    return {
      throttleTimeMs: 0,
      errorCode: ErrorCode.NONE,
      errorMessage: null,
      resources: [...resources.values()],
    }
  },
}

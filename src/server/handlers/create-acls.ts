/**
 * CreateAcls (key 30).
 * Behavior: stores each valid binding in the metadata store, where every broker's authorizer
 * finds it; one result per creation, in order. Kafka's answers: SECURITY_DISABLED without an
 * authorizer, CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster, INVALID_REQUEST for
 * a binding Kafka refuses (unknown or filter-only codes, an empty name, a CLUSTER name other
 * than kafka-cluster, a principal that is not `type:name`). Creating an existing ACL again
 * succeeds and leaves one.
 * A metadata store failure answers UNKNOWN_SERVER_ERROR for every creation.
 * Version notes: v1 pattern types (v0 is LITERAL only), v2+ flexible, v3 the same as v2.
 */
import { MetadataStoreError } from '../../metadata/store/metadata-store.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { ApiKey, type CreateAclsRequest, type CreateAclsResponse } from '../../protocol/generated/index.js'
import {
  type AclBinding,
  AclOperation,
  CLUSTER_NAME,
  InvalidAclError,
  ResourceType,
  validateBinding,
} from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

type Result = CreateAclsResponse['results'][number]

export const createAclsHandler: ApiHandler<CreateAclsRequest, CreateAclsResponse> = {
  apiKey: ApiKey.CreateAcls,
  minVersion: 0,
  maxVersion: 3,
  async handle(context, request) {
    const acls = context.broker.acls
    const failAll = (errorCode: number, errorMessage: string): CreateAclsResponse => ({
      throttleTimeMs: 0,
      results: request.creations.map(() => ({ errorCode, errorMessage })),
    })
    if (acls === null) return failAll(ErrorCode.SECURITY_DISABLED, 'No Authorizer is configured.')
    if (!context.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME))
      return failAll(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 'Cluster authorization failed.')
    const results: Result[] = []
    const valid: AclBinding[] = []
    for (const creation of request.creations) {
      const binding = {
        resourceType: creation.resourceType,
        resourceName: creation.resourceName,
        patternType: creation.resourcePatternType,
        principal: creation.principal,
        host: creation.host,
        operation: creation.operation,
        permissionType: creation.permissionType,
      } as AclBinding
      try {
        validateBinding(binding)
      } catch (error) {
        if (!(error instanceof InvalidAclError)) throw error
        results.push({ errorCode: ErrorCode.INVALID_REQUEST, errorMessage: error.message })
        continue
      }
      valid.push(binding)
      results.push({ errorCode: ErrorCode.NONE, errorMessage: null })
    }
    try {
      await acls.create(valid)
    } catch (error) {
      if (!(error instanceof MetadataStoreError)) throw error
      return failAll(ErrorCode.UNKNOWN_SERVER_ERROR, `The metadata store failed: ${error.message}`)
    }
    return { throttleTimeMs: 0, results }
  },
}

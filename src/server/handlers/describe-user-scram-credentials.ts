/**
 * DescribeUserScramCredentials (key 50).
 * Behavior: the SCRAM mechanisms and iterations of each named user (never salts or keys),
 * or of every user with a credential when `users` is null or empty (Kafka's ScramImage reads
 * both as "all": librdkafka asks for every user with an empty array). A named user without
 * one gets RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE, with Kafka's messages.
 * Authorization: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
 * Version notes: v0 only, flexible.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DescribeUserScramCredentialsRequest,
  type DescribeUserScramCredentialsResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import { SCRAM_MECHANISMS } from '../../security/scram.js'
import type { ApiHandler } from './registry.js'

export const describeUserScramCredentialsHandler: ApiHandler<
  DescribeUserScramCredentialsRequest,
  DescribeUserScramCredentialsResponse
> = {
  apiKey: ApiKey.DescribeUserScramCredentials,
  minVersion: 0,
  maxVersion: 0,
  async handle(context, request) {
    if (!context.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME))
      return {
        throttleTimeMs: 0,
        errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        errorMessage: 'Cluster authorization failed.',
        results: [],
      }
    const store = context.broker.scramCredentials
    const known = store ? await store.describe() : new Map()
    const named = request.users ?? []
    const names = named.length === 0 ? [...known.keys()].sort() : named.map((u) => u.name)
    const counts = new Map<string, number>()
    for (const name of names) counts.set(name, (counts.get(name) ?? 0) + 1)
    const results = [...new Set(names)].map((user) => {
      if ((counts.get(user) ?? 0) > 1)
        return {
          user,
          errorCode: ErrorCode.DUPLICATE_RESOURCE,
          errorMessage: `Cannot describe SCRAM credentials for the same user twice in a single request: ${user}`,
          credentialInfos: [],
        }
      const infos = known.get(user)
      if (infos === undefined)
        return {
          user,
          errorCode: ErrorCode.RESOURCE_NOT_FOUND,
          errorMessage: `Attempt to describe a user credential that does not exist: ${user}`,
          credentialInfos: [],
        }
      return {
        user,
        errorCode: ErrorCode.NONE,
        errorMessage: null,
        credentialInfos: infos.map((i: { mechanism: string; iterations: number }) => ({
          mechanism: SCRAM_MECHANISMS.indexOf(i.mechanism as (typeof SCRAM_MECHANISMS)[number]) + 1,
          iterations: i.iterations,
        })),
      }
    })
    return { throttleTimeMs: 0, errorCode: ErrorCode.NONE, errorMessage: null, results }
  },
}

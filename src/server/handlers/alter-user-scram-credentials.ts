/**
 * AlterUserScramCredentials (key 51).
 * Behavior: upserts and deletes SCRAM credentials in the metadata store, one result per
 * user. The client sends the salted password; the broker keeps only the stored and server
 * keys derived from it. Kafka's checks: mechanism 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512)
 * else UNSUPPORTED_SASL_MECHANISM; an empty name, iterations outside 4096..16384 or an
 * empty salt UNACCEPTABLE_CREDENTIAL; a user altered twice for one mechanism
 * DUPLICATE_RESOURCE; deleting a credential that does not exist RESOURCE_NOT_FOUND. A user
 * with any error has none of its alterations applied.
 * Authorization: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every user.
 * Version notes: v0 only, flexible.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  type AlterUserScramCredentialsRequest,
  type AlterUserScramCredentialsResponse,
  ApiKey,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import {
  credentialFromSaltedPassword,
  SCRAM_MAX_ITERATIONS,
  SCRAM_MECHANISMS,
  SCRAM_MIN_ITERATIONS,
  type ScramMechanism,
} from '../../security/scram.js'
import type { ScramAlteration } from '../../security/scram-credentials.js'
import type { ApiHandler } from './registry.js'

type Failure = { errorCode: number; errorMessage: string }

export const alterUserScramCredentialsHandler: ApiHandler<
  AlterUserScramCredentialsRequest,
  AlterUserScramCredentialsResponse
> = {
  apiKey: ApiKey.AlterUserScramCredentials,
  minVersion: 0,
  maxVersion: 0,
  async handle(context, request) {
    const store = context.broker.scramCredentials
    const failures = new Map<string, Failure>()
    const fail = (user: string, errorCode: number, errorMessage: string): void => {
      if (!failures.has(user)) failures.set(user, { errorCode, errorMessage })
    }
    const users: string[] = []
    const seen = new Set<string>()
    const alterations: ScramAlteration[] = []
    const all = [
      ...request.deletions.map((d) => ({ ...d, type: 'delete' as const })),
      ...request.upsertions.map((u) => ({ ...u, type: 'upsert' as const })),
    ]
    const allowed = context.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
    for (const alteration of all) {
      const user = alteration.name
      if (!users.includes(user)) users.push(user)
      if (!allowed) {
        fail(user, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 'Cluster authorization failed.')
        continue
      }
      const mechanism = SCRAM_MECHANISMS[alteration.mechanism - 1] as ScramMechanism | undefined
      if (store === undefined) {
        fail(user, ErrorCode.UNSUPPORTED_VERSION, 'This broker keeps no SCRAM credentials')
        continue
      }
      if (user === '') {
        fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, 'Username must not be empty')
        continue
      }
      if (mechanism === undefined) {
        fail(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, 'Unknown SCRAM mechanism')
        continue
      }
      const key = `${mechanism}/${user}`
      if (seen.has(key)) {
        fail(
          user,
          ErrorCode.DUPLICATE_RESOURCE,
          'A user credential cannot be altered twice in the same request',
        )
        continue
      }
      seen.add(key)
      if (alteration.type === 'delete') {
        if (!(await store.exists(mechanism, user)))
          fail(user, ErrorCode.RESOURCE_NOT_FOUND, 'Attempt to delete a user credential that does not exist')
        else alterations.push({ type: 'delete', user, mechanism })
        continue
      }
      const { iterations, salt, saltedPassword } = alteration
      if (iterations < SCRAM_MIN_ITERATIONS)
        fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, 'Too few iterations')
      else if (iterations > SCRAM_MAX_ITERATIONS)
        fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, 'Too many iterations')
      else if (salt.length === 0 || saltedPassword.length === 0)
        fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, 'Salt and salted password must not be empty')
      else
        alterations.push({
          type: 'upsert',
          user,
          mechanism,
          credential: credentialFromSaltedPassword(
            mechanism,
            Buffer.from(saltedPassword),
            Buffer.from(salt),
            iterations,
          ),
        })
    }
    await store?.alter(alterations.filter((a) => !failures.has(a.user)))
    return {
      throttleTimeMs: 0,
      results: users.map((user) => {
        const failure = failures.get(user)
        return {
          user,
          errorCode: failure?.errorCode ?? ErrorCode.NONE,
          errorMessage: failure?.errorMessage ?? null,
        }
      }),
    }
  },
}

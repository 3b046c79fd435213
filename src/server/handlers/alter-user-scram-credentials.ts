/**
 * AlterUserScramCredentials (key 51).
 * Behavior: upserts and deletes SCRAM credentials in the metadata store, one result per
 * user. The client sends the salted password; the broker keeps only the stored and server
 * keys derived from it. Kafka's checks: mechanism 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512)
 * else UNSUPPORTED_SASL_MECHANISM; an empty name, iterations outside 4096..16384 or an
 * empty salt UNACCEPTABLE_CREDENTIAL; deleting a credential that does not exist
 * RESOURCE_NOT_FOUND. A user may be altered once per request (Kafka's ScramControlManager):
 * a second deletion or upsertion of a user, for any mechanism, cancels the first with
 * DUPLICATE_RESOURCE, and a user's first failure stands.
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
import type { ScramAlteration, ScramCredentialStore } from '../../security/scram-credentials.js'
import type { ApiHandler } from './registry.js'

type Failure = { errorCode: number; errorMessage: string }
type Alteration =
  | (AlterUserScramCredentialsRequest['deletions'][number] & { type: 'delete' })
  | (AlterUserScramCredentialsRequest['upsertions'][number] & { type: 'upsert' })

const DUPLICATE: Failure = {
  errorCode: ErrorCode.DUPLICATE_RESOURCE,
  errorMessage: 'A user credential cannot be altered twice in the same request',
}

export const alterUserScramCredentialsHandler: ApiHandler<
  AlterUserScramCredentialsRequest,
  AlterUserScramCredentialsResponse
> = {
  apiKey: ApiKey.AlterUserScramCredentials,
  minVersion: 0,
  maxVersion: 0,
  async handle(context, request) {
    const store = context.broker.scramCredentials
    const allowed = context.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
    // As Kafka's ScramControlManager: a user is altered at most once per request, whatever
    // the mechanism. Its first failure stands; a second alteration of a user whose first
    // was accepted cancels both with DUPLICATE_RESOURCE.
    const failures = new Map<string, Failure>()
    const accepted = new Map<string, ScramAlteration>()
    const all: Alteration[] = [
      ...request.deletions.map((d) => ({ ...d, type: 'delete' as const })),
      ...request.upsertions.map((u) => ({ ...u, type: 'upsert' as const })),
    ]
    for (const alteration of all) {
      const user = alteration.name
      if (failures.has(user)) continue
      if (accepted.delete(user)) {
        failures.set(user, DUPLICATE)
        continue
      }
      const checked = allowed
        ? await check(alteration, store)
        : { errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED, errorMessage: 'Cluster authorization failed.' }
      if ('errorCode' in checked) failures.set(user, checked)
      else accepted.set(user, checked)
    }
    if (accepted.size > 0) await store?.alter([...accepted.values()])
    // Kafka lists the deletions done, the upsertions done, then the failures.
    const done = [...accepted.values()].sort((a, b) => (a.type === b.type ? 0 : a.type === 'delete' ? -1 : 1))
    return {
      throttleTimeMs: 0,
      results: [
        ...done.map((a) => ({ user: a.user, errorCode: ErrorCode.NONE, errorMessage: null })),
        ...[...failures].map(([user, failure]) => ({ user, ...failure })),
      ],
    }
  },
}

/** One alteration validated as Kafka's validateDeletion and validateUpsertion do. */
async function check(
  alteration: Alteration,
  store: ScramCredentialStore | undefined,
): Promise<ScramAlteration | Failure> {
  const user = alteration.name
  if (store === undefined)
    return {
      errorCode: ErrorCode.UNSUPPORTED_VERSION,
      errorMessage: 'This broker keeps no SCRAM credentials',
    }
  if (user === '')
    return { errorCode: ErrorCode.UNACCEPTABLE_CREDENTIAL, errorMessage: 'Username must not be empty' }
  const mechanism = SCRAM_MECHANISMS[alteration.mechanism - 1] as ScramMechanism | undefined
  if (mechanism === undefined)
    return { errorCode: ErrorCode.UNSUPPORTED_SASL_MECHANISM, errorMessage: 'Unknown SCRAM mechanism' }
  if (alteration.type === 'delete')
    return (await store.exists(mechanism, user))
      ? { type: 'delete', user, mechanism }
      : {
          errorCode: ErrorCode.RESOURCE_NOT_FOUND,
          errorMessage: 'Attempt to delete a user credential that does not exist',
        }
  const { iterations, salt, saltedPassword } = alteration
  if (iterations < SCRAM_MIN_ITERATIONS)
    return { errorCode: ErrorCode.UNACCEPTABLE_CREDENTIAL, errorMessage: 'Too few iterations' }
  if (iterations > SCRAM_MAX_ITERATIONS)
    return { errorCode: ErrorCode.UNACCEPTABLE_CREDENTIAL, errorMessage: 'Too many iterations' }
  if (salt.length === 0 || saltedPassword.length === 0)
    return {
      errorCode: ErrorCode.UNACCEPTABLE_CREDENTIAL,
      errorMessage: 'Salt and salted password must not be empty',
    }
  return {
    type: 'upsert',
    user,
    mechanism,
    credential: credentialFromSaltedPassword(
      mechanism,
      Buffer.from(saltedPassword),
      Buffer.from(salt),
      iterations,
    ),
  }
}

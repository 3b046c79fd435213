/**
 * Who may do what in the schema registry, where the broker's security is on.
 *
 * Authentication is HTTP basic auth (RFC 7617) against the cluster's SASL users, as
 * Confluent's registry checks basic auth against a JAAS realm: the broker supplies
 * `verify`. A request without credentials, or with wrong ones, is 401 with Confluent's body
 * (`{"error_code":401,"message":"Unauthorized"}`, its REST layer's) and a
 * `WWW-Authenticate: Basic` challenge.
 *
 * Authorization reuses the cluster's Kafka ACLs. Kafka has no SUBJECT resource (Confluent's
 * schema registry ACL authorizer adds SUBJECT and GLOBAL operations of its own), so a
 * subject is mapped to the topic it names under Confluent's default TopicNameStrategy
 * (`orders-value` and `orders-key` → topic `orders`; any other subject, e.g. one of
 * RecordNameStrategy, → the topic named as the subject itself):
 * - reading a subject's schemas, looking a schema up, checking compatibility → DESCRIBE on
 *   the topic (implied by READ and WRITE, so every producer and consumer of the topic may);
 * - registering a schema → WRITE on the topic (a producer's auto-registration);
 * - deleting a version or the subject → DELETE on the topic;
 * - a subject's `/config` and `/mode`: DESCRIBE_CONFIGS to read, ALTER_CONFIGS to change;
 * - global `/config` and `/mode`: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster;
 * - a schema by id: DESCRIBE on the topic of at least one subject that holds the id
 *   (Confluent checks the id's subjects too); `/subjects` and an id's subjects and versions
 *   list only the subjects the caller may DESCRIBE; `/schemas/types` and `/` any user.
 * A denial is Confluent's 40301.
 */
import { Errors } from './errors.js'

export type RegistryOperation = 'DESCRIBE' | 'WRITE' | 'DELETE' | 'DESCRIBE_CONFIGS' | 'ALTER_CONFIGS'

/** A Kafka ACL resource: a topic (by name) or the cluster. */
export type RegistryResource =
  | { readonly type: 'topic'; readonly name: string }
  | { readonly type: 'cluster' }

/** What the broker lends the registry for its security; absent where security is off. */
export interface RegistrySecurity {
  /** Checks a user's password against the cluster's SASL users (PLAIN's, SCRAM's). */
  verify(user: string, password: string): Promise<boolean>
  /** The broker's authorizer's decision (allows everything without `authorizer.class.name`). */
  authorize(
    principal: string,
    host: string,
    operation: RegistryOperation,
    resource: RegistryResource,
  ): boolean
}

/** The caller of one request, once authenticated. */
export interface RegistryCaller {
  /** `User:name`, as Kafka's ACLs name principals. */
  readonly principal: string
  /** The client's IP address, for ACLs that name hosts. */
  readonly host: string
}

const SUBJECT_SUFFIXES = ['-value', '-key']

/** The topic whose ACLs stand for a subject's (TopicNameStrategy, else the subject itself). */
export function topicOfSubject(subject: string): string {
  for (const suffix of SUBJECT_SUFFIXES)
    if (subject.endsWith(suffix) && subject.length > suffix.length) return subject.slice(0, -suffix.length)
  return subject
}

/** Confluent's realm name (its `authentication.realm` default is the JAAS entry's). */
export const BASIC_REALM = 'SchemaRegistry'

/**
 * The user and password of an `Authorization: Basic` header, or null when there is none or
 * it is not basic auth. The password may hold `:`; the user may not (RFC 7617).
 */
export function basicCredentials(header: string | undefined): { user: string; password: string } | null {
  if (header === undefined) return null
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header)
  if (!match) return null
  const text = Buffer.from(match[1], 'base64').toString('utf8')
  const colon = text.indexOf(':')
  if (colon <= 0) return null
  return { user: text.slice(0, colon), password: text.slice(colon + 1) }
}

/** Authenticates a request's `Authorization` header: the caller, or 401. */
export async function authenticate(
  security: RegistrySecurity,
  header: string | undefined,
  host: string,
): Promise<RegistryCaller> {
  const credentials = basicCredentials(header)
  if (credentials === null) throw Errors.unauthorized()
  if (!(await security.verify(credentials.user, credentials.password))) throw Errors.unauthorized()
  return { principal: `User:${credentials.user}`, host }
}

/** Subject-level access in Confluent's words, mapped to a Kafka operation above. */
export type SubjectAccess = 'read' | 'write' | 'delete' | 'readConfig' | 'writeConfig'

/** Confluent's names of its operations, as its 40301 messages give them. */
const CONFLUENT_NAME: Readonly<Record<SubjectAccess, string>> = {
  read: 'Read',
  write: 'Write',
  delete: 'Delete',
  readConfig: 'ReadCompatibility',
  writeConfig: 'WriteCompatibility',
}

const OPERATION_OF: Readonly<Record<SubjectAccess, RegistryOperation>> = {
  read: 'DESCRIBE',
  write: 'WRITE',
  delete: 'DELETE',
  readConfig: 'DESCRIBE_CONFIGS',
  writeConfig: 'ALTER_CONFIGS',
}

/** May `caller` do `access` on `subject`? */
export function maySubject(
  security: RegistrySecurity,
  caller: RegistryCaller,
  subject: string,
  access: SubjectAccess,
): boolean {
  return security.authorize(caller.principal, caller.host, OPERATION_OF[access], {
    type: 'topic',
    name: topicOfSubject(subject),
  })
}

/** 40301 unless `caller` may do `access` on `subject`. */
export function checkSubject(
  security: RegistrySecurity,
  caller: RegistryCaller,
  subject: string,
  access: SubjectAccess,
): void {
  if (!maySubject(security, caller, subject, access))
    throw Errors.forbidden(`User is denied operation ${CONFLUENT_NAME[access]} on Subject: ${subject}`)
}

/** 40301 unless `caller` may read (`readConfig`) or change (`writeConfig`) the global config and mode. */
export function checkGlobal(
  security: RegistrySecurity,
  caller: RegistryCaller,
  access: 'readConfig' | 'writeConfig',
): void {
  if (!security.authorize(caller.principal, caller.host, OPERATION_OF[access], { type: 'cluster' }))
    throw Errors.forbidden(`User is denied operation ${CONFLUENT_NAME[access]} on Global`)
}

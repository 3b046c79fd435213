/**
 * The authorizer properties, with Kafka's names and defaults. `authorizer.class.name` turns
 * authorization on: tidelog has one authorizer and accepts the class names a Kafka
 * `server.properties` names it by; empty (the default) leaves every request allowed.
 */
import type { ConfigDef, ConfigValue } from '../../common/config-def.js'
import { ConfigError } from '../../common/errors.js'
import type { AuthorizerSettings } from './standard-authorizer.js'

export const AUTHORIZER_CLASS_NAMES: readonly string[] = [
  'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
  'kafka.security.authorizer.AclAuthorizer',
]

export const authorizerConfigDefs: readonly ConfigDef[] = [
  {
    name: 'authorizer.class.name',
    type: 'string',
    defaultValue: '',
    doc: `The authorizer (${AUTHORIZER_CLASS_NAMES.join(' or ')}); empty: no authorization.`,
  },
  {
    name: 'super.users',
    type: 'string',
    defaultValue: null,
    doc: 'Principals (User:name) allowed every operation, separated by semicolons.',
  },
  {
    name: 'allow.everyone.if.no.acl.found',
    type: 'boolean',
    defaultValue: false,
    doc: 'Allow a resource that has no ACL to everyone.',
  },
]

/** The authorizer's settings, or null when authorization is off; throws ConfigError. */
export function authorizerSettings(values: ReadonlyMap<string, ConfigValue>): AuthorizerSettings | null {
  const className = String(values.get('authorizer.class.name') ?? '').trim()
  if (className === '') return null
  if (!AUTHORIZER_CLASS_NAMES.includes(className))
    throw new ConfigError(
      `authorizer.class.name ${className} is not available; use ${AUTHORIZER_CLASS_NAMES.join(' or ')}`,
    )
  const superUsers = new Set<string>()
  for (const item of String(values.get('super.users') ?? '').split(';')) {
    const principal = item.trim()
    if (principal === '') continue
    const colon = principal.indexOf(':')
    if (colon <= 0 || colon === principal.length - 1)
      throw new ConfigError(`super.users: ${principal} is not a principal of the form User:name`)
    superUsers.add(principal)
  }
  return { superUsers, allowEveryoneIfNoAclFound: values.get('allow.everyone.if.no.acl.found') === true }
}

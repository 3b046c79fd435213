/**
 * A broker's authorization: the authorizer its handlers ask and, when `authorizer.class.name`
 * is set, the ACL mirror that keeps it in step with the metadata store.
 */
import type { ConfigValue } from '../../common/config-def.js'
import type { Logger } from '../../common/logger.js'
import type { MetadataStore } from '../../metadata/store/metadata-store.js'
import { AclStore } from './acl-store.js'
import { authorizerSettings } from './authorizer-config.js'
import {
  ALLOW_ALL,
  type Authorizer,
  type AuthorizerSettings,
  StandardAuthorizer,
} from './standard-authorizer.js'

export interface Authorization {
  readonly authorizer: Authorizer
  /** The stored ACLs; null without an authorizer (CreateAcls answers SECURITY_DISABLED). */
  readonly acls: AclStore | null
  close(): void
}

/** Checks the authorizer properties (throws ConfigError) before anything is opened. */
export function checkAuthorizerConfig(values: ReadonlyMap<string, ConfigValue>): AuthorizerSettings | null {
  return authorizerSettings(values)
}

export async function openAuthorization(
  settings: AuthorizerSettings | null,
  store: MetadataStore,
  logger: Logger,
): Promise<Authorization> {
  if (settings === null) return { authorizer: ALLOW_ALL, acls: null, close: () => {} }
  const authorizer = new StandardAuthorizer(settings)
  const acls = await AclStore.open(store, (bindings) => authorizer.replaceAcls(bindings), logger)
  return { authorizer, acls, close: () => acls.close() }
}

/**
 * The decisions of Kafka's StandardAuthorizer (StandardAuthorizerData.authorize), over the
 * ACLs the broker mirrors from the metadata store:
 * - a principal in `super.users` is allowed everything, ACLs or not;
 * - the ACLs that apply to a resource are its LITERAL ones, the LITERAL `*` of its type and
 *   the PREFIXED ones whose name starts the resource's name;
 * - of those, an entry matches when its principal is the caller's or `User:*`, its host the
 *   caller's address or `*`, and its operation the one asked or ALL; an ALLOW entry also
 *   grants the operations it implies (DESCRIBE from READ, WRITE, DELETE and ALTER;
 *   DESCRIBE_CONFIGS from ALTER_CONFIGS), a DENY entry only denies what it names;
 * - a matching DENY wins over any ALLOW; no matching ALLOW is a denial;
 * - a resource with no ACL at all is allowed only with `allow.everyone.if.no.acl.found`.
 */
import {
  type AclBinding,
  AclOperation,
  AclPermissionType,
  OPERATIONS_OF,
  PatternType,
  type ResourceType,
  WILDCARD,
  WILDCARD_PRINCIPAL,
} from './acl.js'

export interface AuthorizerSettings {
  /** Principals (`User:name`) allowed everything. */
  readonly superUsers: ReadonlySet<string>
  readonly allowEveryoneIfNoAclFound: boolean
}

/** Who asks: the principal text (`User:alice`) and the client's IP address. */
export interface AuthorizableRequest {
  readonly principal: string
  readonly host: string
}

/** Kafka's bitfield of authorized operations: bit n set when operation code n is allowed. */
export type AuthorizedOperations = number

/** The answer to "which operations", the same for every caller when authorization is off. */
export interface Authorizer {
  authorize(
    request: AuthorizableRequest,
    operation: AclOperation,
    resourceType: ResourceType,
    resourceName: string,
  ): boolean
  /** Kafka's Authorizer.authorizeByResourceType: allowed on at least one resource of the type. */
  authorizeByResourceType(
    request: AuthorizableRequest,
    operation: AclOperation,
    resourceType: ResourceType,
  ): boolean
  /** The include_*_authorized_operations answer for one resource. */
  authorizedOperations(
    request: AuthorizableRequest,
    resourceType: ResourceType,
    resourceName: string,
  ): AuthorizedOperations
}

/** `authorizer.class.name` empty: every request is allowed, as before ACLs existed. */
export const ALLOW_ALL: Authorizer = {
  authorize: () => true,
  authorizeByResourceType: () => true,
  authorizedOperations: (_request, resourceType) => operationBits(OPERATIONS_OF[resourceType] ?? []),
}

const IMPLIES_DESCRIBE: ReadonlySet<number> = new Set([
  AclOperation.DESCRIBE,
  AclOperation.READ,
  AclOperation.WRITE,
  AclOperation.DELETE,
  AclOperation.ALTER,
  AclOperation.ALL,
])
const IMPLIES_DESCRIBE_CONFIGS: ReadonlySet<number> = new Set([
  AclOperation.DESCRIBE_CONFIGS,
  AclOperation.ALTER_CONFIGS,
  AclOperation.ALL,
])

/** Kafka's authorizeByResourceType first asks about this made-up name (super users, no-ACL rule). */
const HARDCODED_NAME = 'hardcode'

interface TypeIndex {
  readonly literal: Map<string, AclBinding[]>
  /** PREFIXED ACLs by their name, and the distinct lengths of those names, shortest first. */
  readonly prefixed: Map<string, AclBinding[]>
  prefixLengths: number[]
}

/** How the ACLs that apply to one resource decide: DENY wins, then any ALLOW, else none matched. */
enum Verdict {
  NoMatch,
  Allow,
  Deny,
}

export class StandardAuthorizer implements Authorizer {
  private byType = new Map<number, TypeIndex>()
  private all: readonly AclBinding[] = []

  constructor(private readonly settings: AuthorizerSettings) {}

  /** Replaces the ACLs decisions are made on (the mirror of the metadata store calls it). */
  replaceAcls(bindings: Iterable<AclBinding>): void {
    const byType = new Map<number, TypeIndex>()
    const all: AclBinding[] = []
    for (const binding of bindings) {
      all.push(binding)
      let index = byType.get(binding.resourceType)
      if (index === undefined) {
        index = { literal: new Map(), prefixed: new Map(), prefixLengths: [] }
        byType.set(binding.resourceType, index)
      }
      const byName = binding.patternType === PatternType.PREFIXED ? index.prefixed : index.literal
      const list = byName.get(binding.resourceName) ?? []
      list.push(binding)
      byName.set(binding.resourceName, list)
    }
    for (const index of byType.values())
      index.prefixLengths = [...new Set([...index.prefixed.keys()].map((name) => name.length))].sort(
        (a, b) => a - b,
      )
    this.byType = byType
    this.all = all
  }

  isSuperUser(principal: string): boolean {
    return this.settings.superUsers.has(principal)
  }

  authorize(
    request: AuthorizableRequest,
    operation: AclOperation,
    resourceType: ResourceType,
    resourceName: string,
  ): boolean {
    if (this.isSuperUser(request.principal)) return true
    const index = this.byType.get(resourceType)
    if (index === undefined) return this.settings.allowEveryoneIfNoAclFound
    // Walks the resource's LITERAL, LITERAL * and PREFIXED ACLs without collecting them.
    let found = false
    let allowed = false
    const decide = (acls: readonly AclBinding[] | undefined): boolean => {
      if (acls === undefined) return false
      found = true
      const verdict = verdictOf(acls, request, operation)
      if (verdict === Verdict.Allow) allowed = true
      return verdict === Verdict.Deny
    }
    if (decide(index.literal.get(resourceName))) return false
    if (resourceName !== WILDCARD && decide(index.literal.get(WILDCARD))) return false
    for (const length of index.prefixLengths) {
      if (length > resourceName.length) break
      if (decide(index.prefixed.get(resourceName.slice(0, length)))) return false
    }
    return found ? allowed : this.settings.allowEveryoneIfNoAclFound
  }

  authorizeByResourceType(
    request: AuthorizableRequest,
    operation: AclOperation,
    resourceType: ResourceType,
  ): boolean {
    if (this.authorize(request, operation, resourceType, HARDCODED_NAME)) return true
    const denyLiteral = new Set<string>()
    const denyPrefixed = new Set<string>()
    const allowLiteral = new Set<string>()
    const allowPrefixed = new Set<string>()
    let wildcardAllowed = false
    for (const acl of this.all) {
      if (acl.resourceType !== resourceType || !entryApplies(acl, request)) continue
      if (acl.operation !== operation && acl.operation !== AclOperation.ALL) continue
      const deny = acl.permissionType === AclPermissionType.DENY
      if (acl.patternType === PatternType.LITERAL) {
        if (acl.resourceName === WILDCARD) {
          if (deny) return false
          wildcardAllowed = true
          continue
        }
        ;(deny ? denyLiteral : allowLiteral).add(acl.resourceName)
      } else (deny ? denyPrefixed : allowPrefixed).add(acl.resourceName)
    }
    if (wildcardAllowed) return true
    // An allowed name counts unless a DENY of the same literal name or of a prefix of it covers it.
    const dominated = (name: string): boolean => {
      for (let end = 1; end <= name.length; end++) if (denyPrefixed.has(name.slice(0, end))) return true
      return false
    }
    for (const name of allowLiteral) if (!denyLiteral.has(name) && !dominated(name)) return true
    for (const name of allowPrefixed) if (!dominated(name)) return true
    return false
  }

  authorizedOperations(
    request: AuthorizableRequest,
    resourceType: ResourceType,
    resourceName: string,
  ): AuthorizedOperations {
    const operations = OPERATIONS_OF[resourceType] ?? []
    return operationBits(operations.filter((op) => this.authorize(request, op, resourceType, resourceName)))
  }
}

function verdictOf(
  acls: readonly AclBinding[],
  request: AuthorizableRequest,
  operation: AclOperation,
): Verdict {
  let verdict = Verdict.NoMatch
  for (const acl of acls) {
    if (!entryApplies(acl, request)) continue
    if (acl.permissionType === AclPermissionType.DENY) {
      if (acl.operation === AclOperation.ALL || acl.operation === operation) return Verdict.Deny
    } else if (allowGrants(acl.operation, operation)) verdict = Verdict.Allow
  }
  return verdict
}

function entryApplies(acl: AclBinding, request: AuthorizableRequest): boolean {
  const principalMatches =
    acl.principal === request.principal ||
    (acl.principal === WILDCARD_PRINCIPAL && request.principal.startsWith('User:'))
  return principalMatches && (acl.host === WILDCARD || acl.host === request.host)
}

function allowGrants(aclOperation: AclOperation, asked: AclOperation): boolean {
  if (asked === AclOperation.DESCRIBE) return IMPLIES_DESCRIBE.has(aclOperation)
  if (asked === AclOperation.DESCRIBE_CONFIGS) return IMPLIES_DESCRIBE_CONFIGS.has(aclOperation)
  return aclOperation === AclOperation.ALL || aclOperation === asked
}

export function operationBits(operations: readonly AclOperation[]): AuthorizedOperations {
  let bits = 0
  for (const operation of operations) bits |= 1 << operation
  return bits
}

/** The address part of a connection's `host:port` (IPv6 hosts keep their colons). */
export function hostOf(remoteAddress: string): string {
  const colon = remoteAddress.lastIndexOf(':')
  const host = colon < 0 ? remoteAddress : remoteAddress.slice(0, colon)
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
  // Node reports IPv4 clients of a dual-stack socket as IPv4-mapped IPv6; Java shows them as IPv4.
  return bare.startsWith('::ffff:') && bare.includes('.') ? bare.slice(7) : bare
}

/**
 * ACL bindings as Kafka defines them (org.apache.kafka.common.acl and .resource): the codes
 * of resource types, pattern types, operations and permission types are the wire codes of
 * CreateAcls/DescribeAcls/DeleteAcls, and the matching of filters is Kafka's
 * ResourcePatternFilter/AccessControlEntryFilter.
 */

import { AclOperation, AclPermissionType, PatternType, ResourceType } from '../../protocol/acl-codes.js'

export { AclOperation, AclPermissionType, PatternType, ResourceType }

/** The one name of the CLUSTER resource. */
export const CLUSTER_NAME = 'kafka-cluster'
/** A LITERAL resource name, principal or host that matches every one. */
export const WILDCARD = '*'
export const WILDCARD_PRINCIPAL = 'User:*'

/** Operations each resource type has (Kafka's ResourceType → AclOperation table, KIP-430). */
export const OPERATIONS_OF: Readonly<Record<number, readonly AclOperation[]>> = {
  [ResourceType.TOPIC]: [
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DESCRIBE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
  ],
  // DESCRIBE_CONFIGS and ALTER_CONFIGS: group configs (KIP-848, Kafka 4.4's AclEntry).
  [ResourceType.GROUP]: [
    AclOperation.READ,
    AclOperation.DESCRIBE,
    AclOperation.DELETE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
  ],
  [ResourceType.CLUSTER]: [
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
  ],
  [ResourceType.TRANSACTIONAL_ID]: [AclOperation.DESCRIBE, AclOperation.WRITE],
  [ResourceType.DELEGATION_TOKEN]: [AclOperation.DESCRIBE],
  [ResourceType.USER]: [AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS],
}

export interface ResourcePattern {
  readonly resourceType: ResourceType
  readonly resourceName: string
  readonly patternType: PatternType
}

export interface AccessControlEntry {
  /** `User:name`, or `User:*` for every principal. */
  readonly principal: string
  /** An IP address, or `*` for every host. */
  readonly host: string
  readonly operation: AclOperation
  readonly permissionType: AclPermissionType
}

export type AclBinding = ResourcePattern & AccessControlEntry

/** What DescribeAcls and DeleteAcls select with: null names, principals and hosts match all. */
export interface AclBindingFilter {
  readonly resourceType: ResourceType
  readonly resourceName: string | null
  readonly patternType: PatternType
  readonly principal: string | null
  readonly host: string | null
  readonly operation: AclOperation
  readonly permissionType: AclPermissionType
}

/** A binding or filter Kafka refuses; the handlers answer INVALID_REQUEST with the message. */
export class InvalidAclError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'InvalidAclError'
  }
}

function nameOf(table: Record<string, number>, code: number): string | undefined {
  return Object.keys(table).find((key) => table[key] === code)
}

export function resourceTypeName(code: number): string {
  return nameOf(ResourceType, code) ?? `UNKNOWN(${code})`
}
export function operationName(code: number): string {
  return nameOf(AclOperation, code) ?? `UNKNOWN(${code})`
}
export function patternTypeName(code: number): string {
  return nameOf(PatternType, code) ?? `UNKNOWN(${code})`
}
export function permissionTypeName(code: number): string {
  return nameOf(AclPermissionType, code) ?? `UNKNOWN(${code})`
}

function known(table: Record<string, number>, code: number): boolean {
  return Object.values(table).includes(code) && code !== 0
}

/** Kafka's SecurityUtils.parseKafkaPrincipal: `type:name`, both parts non-empty. */
function checkPrincipal(principal: string): void {
  const colon = principal.indexOf(':')
  if (colon <= 0 || colon === principal.length - 1)
    throw new InvalidAclError(
      `Could not parse principal from \`${principal}\` (no colon is present separating the principal type from the principal name)`,
    )
}

/** The checks of Kafka's AclControlManager.validateNewAcl and of CreateAcls. */
export function validateBinding(binding: AclBinding): void {
  if (!known(ResourceType, binding.resourceType) || binding.resourceType === ResourceType.ANY)
    throw new InvalidAclError(`Invalid resource type ${resourceTypeName(binding.resourceType)}`)
  if (binding.patternType !== PatternType.LITERAL && binding.patternType !== PatternType.PREFIXED)
    throw new InvalidAclError(
      `Invalid patternType ${patternTypeName(binding.patternType)}: only LITERAL and PREFIXED ACLs can be created`,
    )
  if (!known(AclOperation, binding.operation) || binding.operation === AclOperation.ANY)
    throw new InvalidAclError(`Invalid operation ${operationName(binding.operation)}`)
  if (binding.permissionType !== AclPermissionType.ALLOW && binding.permissionType !== AclPermissionType.DENY)
    throw new InvalidAclError(`Invalid permission type ${permissionTypeName(binding.permissionType)}`)
  if (binding.resourceName === '') throw new InvalidAclError('Resource name should not be empty')
  if (binding.resourceType === ResourceType.CLUSTER && binding.resourceName !== CLUSTER_NAME)
    throw new InvalidAclError(`The only valid name for the CLUSTER resource is ${CLUSTER_NAME}`)
  checkPrincipal(binding.principal)
  if (binding.host === '') throw new InvalidAclError('Host should not be empty')
}

/** Kafka's AclBindingFilter.isUnknown and the principal parse of DescribeAcls/DeleteAcls. */
export function validateFilter(filter: AclBindingFilter): void {
  if (!known(ResourceType, filter.resourceType))
    throw new InvalidAclError(`Invalid resource type ${resourceTypeName(filter.resourceType)} in filter`)
  if (!known(PatternType, filter.patternType))
    throw new InvalidAclError(`Invalid pattern type ${patternTypeName(filter.patternType)} in filter`)
  if (!known(AclOperation, filter.operation))
    throw new InvalidAclError(`Invalid operation ${operationName(filter.operation)} in filter`)
  if (!known(AclPermissionType, filter.permissionType))
    throw new InvalidAclError(
      `Invalid permission type ${permissionTypeName(filter.permissionType)} in filter`,
    )
  if (filter.principal !== null) checkPrincipal(filter.principal)
}

/** Kafka's ResourcePatternFilter.matches. */
function patternMatches(filter: AclBindingFilter, pattern: ResourcePattern): boolean {
  if (filter.resourceType !== ResourceType.ANY && filter.resourceType !== pattern.resourceType) return false
  if (
    filter.patternType !== PatternType.ANY &&
    filter.patternType !== PatternType.MATCH &&
    filter.patternType !== pattern.patternType
  )
    return false
  if (filter.resourceName === null) return true
  if (filter.patternType === PatternType.ANY || filter.patternType === pattern.patternType)
    return filter.resourceName === pattern.resourceName
  // MATCH: the patterns that would apply to a resource of this name.
  if (pattern.patternType === PatternType.LITERAL)
    return filter.resourceName === pattern.resourceName || pattern.resourceName === WILDCARD
  return filter.resourceName.startsWith(pattern.resourceName)
}

/** Kafka's AclBindingFilter.matches (the entry part compares exactly: `User:*` only matches itself). */
export function filterMatches(filter: AclBindingFilter, binding: AclBinding): boolean {
  return (
    patternMatches(filter, binding) &&
    (filter.principal === null || filter.principal === binding.principal) &&
    (filter.host === null || filter.host === binding.host) &&
    (filter.operation === AclOperation.ANY || filter.operation === binding.operation) &&
    (filter.permissionType === AclPermissionType.ANY || filter.permissionType === binding.permissionType)
  )
}

/** `kafka-acls.sh`'s rendering of a binding, for logs and the CLI. */
export function bindingText(binding: AclBinding): string {
  return `(principal=${binding.principal}, host=${binding.host}, operation=${operationName(binding.operation)}, permissionType=${permissionTypeName(binding.permissionType)}) on ${resourceTypeName(binding.resourceType)}:${patternTypeName(binding.patternType)}:${binding.resourceName}`
}

/**
 * Client quota entities and keys as Kafka names them (KIP-55, KIP-546): an entity is a user,
 * a client id, or both; a null name is that type's default (`<default>` in kafka-configs.sh).
 * The quota keys tidelog enforces are the byte rates and the request percentage.
 */

/** A quota entity: `undefined` leaves a type out, `null` names its default. */
export interface ClientQuotaEntity {
  readonly user?: string | null
  readonly clientId?: string | null
}

export const QUOTA_KEYS = ['producer_byte_rate', 'consumer_byte_rate', 'request_percentage'] as const
export type QuotaKey = (typeof QUOTA_KEYS)[number]

/** Kafka's QuotaConfigs types: byte rates are longs, the percentage a double. */
const WHOLE_NUMBER_KEYS: ReadonlySet<string> = new Set(['producer_byte_rate', 'consumer_byte_rate'])

export const USER = 'user'
export const CLIENT_ID = 'client-id'
export const IP = 'ip'

/** The wire form of an entity (AlterClientQuotas, DescribeClientQuotas). */
export interface EntityPart {
  readonly entityType: string
  readonly entityName: string | null
}

const DEFAULT_NAME = '<default>'

/**
 * The entity as one string (the metadata store's key, a map key): `user=<name>`,
 * `client-id=<name>` or both, names URL-encoded as Kafka's Sanitizer does, `<default>` for a
 * default (which no encoded name can equal, `<` being encoded).
 */
export function entityKey(entity: ClientQuotaEntity): string {
  const parts: string[] = []
  if (entity.user !== undefined) parts.push(`${USER}=${encodeName(entity.user)}`)
  if (entity.clientId !== undefined) parts.push(`${CLIENT_ID}=${encodeName(entity.clientId)}`)
  return parts.join('/')
}

export function parseEntityKey(key: string): ClientQuotaEntity | null {
  let user: string | null | undefined
  let clientId: string | null | undefined
  for (const part of key.split('/')) {
    const eq = part.indexOf('=')
    if (eq < 0) return null
    const name = decodeName(part.slice(eq + 1))
    const type = part.slice(0, eq)
    if (type === USER && user === undefined) user = name
    else if (type === CLIENT_ID && clientId === undefined) clientId = name
    else return null
  }
  if (user === undefined && clientId === undefined) return null
  return { ...(user !== undefined ? { user } : {}), ...(clientId !== undefined ? { clientId } : {}) }
}

function encodeName(name: string | null): string {
  return name === null ? DEFAULT_NAME : encodeURIComponent(name)
}

function decodeName(text: string): string | null {
  return text === DEFAULT_NAME ? null : decodeURIComponent(text)
}

export type Checked<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly message: string }

/** Kafka's ClientQuotaControlManager.validateEntity and configKeysForEntityType. */
export function entityFromWire(parts: readonly EntityPart[]): Checked<ClientQuotaEntity> {
  if (parts.length === 0) return { ok: false, message: 'Invalid empty client quota entity' }
  let user: string | null | undefined
  let clientId: string | null | undefined
  for (const { entityType, entityName } of parts) {
    if (entityType !== USER && entityType !== CLIENT_ID && entityType !== IP)
      return { ok: false, message: `Unhandled client quota entity type: ${entityType}` }
    if (entityName !== null && entityName.length === 0)
      return { ok: false, message: `Empty ${entityType} not supported` }
    if (entityType === IP)
      return { ok: false, message: 'IP quotas (connection_creation_rate) are not supported by tidelog' }
    if ((entityType === USER ? user : clientId) !== undefined)
      return { ok: false, message: `Duplicate ${entityType} entity type in the client quota entity` }
    if (entityType === USER) user = entityName
    else clientId = entityName
  }
  return {
    ok: true,
    value: { ...(user !== undefined ? { user } : {}), ...(clientId !== undefined ? { clientId } : {}) },
  }
}

export function entityToWire(entity: ClientQuotaEntity): EntityPart[] {
  const parts: EntityPart[] = []
  if (entity.user !== undefined) parts.push({ entityType: USER, entityName: entity.user })
  if (entity.clientId !== undefined) parts.push({ entityType: CLIENT_ID, entityName: entity.clientId })
  return parts
}

/** Kafka's validateQuotaKeyValue: a known key; a whole number for the byte rates. */
export function checkQuotaValue(key: string, value: number): Checked<QuotaKey> {
  if (!(QUOTA_KEYS as readonly string[]).includes(key)) {
    const hint =
      key === 'controller_mutation_rate' ? ' (controller mutation quotas are not supported by tidelog)' : ''
    return { ok: false, message: `Invalid configuration key ${key}${hint}` }
  }
  if (!Number.isFinite(value)) return { ok: false, message: `Configuration ${key} must be a finite number` }
  // A zero or negative bound would make every request throttled without end (the throttle
  // time divides by the bound): refuse it rather than store it.
  if (value <= 0) return { ok: false, message: `Configuration ${key} must be positive` }
  if (WHOLE_NUMBER_KEYS.has(key) && Math.abs(Math.trunc(value + 1e-6) - value) > 1e-6)
    return { ok: false, message: `Configuration ${key} must be a Long value` }
  return { ok: true, value: key as QuotaKey }
}

/**
 * Named listeners as Kafka configures them: `listeners` (where to bind), `advertised.listeners`
 * (what clients are told), `listener.security.protocol.map` (each name's security protocol)
 * and `inter.broker.listener.name` / `security.inter.broker.protocol` (which listener the
 * brokers use among themselves). Validated here once, with Kafka's rules and messages, so
 * the rest of the broker reads typed listeners.
 */
import { ConfigError } from '../common/errors.js'

export const SECURITY_PROTOCOLS = ['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'] as const
export type SecurityProtocol = (typeof SECURITY_PROTOCOLS)[number]

/** Kafka's default map: every security protocol is a listener name of itself. */
export const DEFAULT_SECURITY_PROTOCOL_MAP = SECURITY_PROTOCOLS.map((p) => `${p}:${p}`)

export interface Endpoint {
  /** The listener name, upper case as Kafka normalises it. */
  readonly listener: string
  readonly securityProtocol: SecurityProtocol
  readonly host: string
  /** 0 in `listeners`: a free port; 0 in `advertised.listeners`: the bound port. */
  readonly port: number
}

export interface ListenerSettings {
  /** Where to bind, in the order configured. */
  readonly listeners: readonly Endpoint[]
  /** What the broker registers for clients, one per listener name it advertises. */
  readonly advertised: readonly Endpoint[]
  readonly interBrokerListener: string
}

export function usesTls(protocol: SecurityProtocol): boolean {
  return protocol === 'SSL' || protocol === 'SASL_SSL'
}

export function usesSasl(protocol: SecurityProtocol): boolean {
  return protocol === 'SASL_PLAINTEXT' || protocol === 'SASL_SSL'
}

export interface ListenerConfigInput {
  readonly listeners: readonly string[]
  readonly advertisedListeners: readonly string[] | null
  readonly securityProtocolMap: readonly string[]
  readonly interBrokerListenerName: string | null
  /** Whether security.inter.broker.protocol was set explicitly (Kafka refuses both). */
  readonly interBrokerProtocolSet: boolean
  readonly interBrokerProtocol: string
}

export function listenerSettings(input: ListenerConfigInput): ListenerSettings {
  const protocolMap = parseProtocolMap(input.securityProtocolMap)
  const listeners = parseEndpoints('listeners', input.listeners, protocolMap)
  if (listeners.length === 0) throw new ConfigError('listeners must name at least one listener')
  checkUnique('listeners', listeners, true)
  const advertised =
    input.advertisedListeners && input.advertisedListeners.length > 0
      ? parseEndpoints('advertised.listeners', input.advertisedListeners, protocolMap)
      : listeners
  checkUnique('advertised.listeners', advertised, false)
  for (const endpoint of advertised) {
    if (!listeners.some((l) => l.listener === endpoint.listener))
      throw new ConfigError(
        `advertised.listeners listener names must be equal to or a subset of the ones defined in listeners: ${endpoint.listener} is not`,
      )
    if (endpoint.host === '0.0.0.0' || endpoint.host === '::')
      throw new ConfigError(`advertised.listeners cannot use the nonroutable meta-address ${endpoint.host}`)
  }
  return { listeners, advertised, interBrokerListener: interBrokerListener(input, advertised) }
}

function interBrokerListener(input: ListenerConfigInput, advertised: readonly Endpoint[]): string {
  if (input.interBrokerListenerName !== null && input.interBrokerProtocolSet)
    throw new ConfigError(
      'Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.',
    )
  const name =
    input.interBrokerListenerName !== null
      ? input.interBrokerListenerName.trim().toUpperCase()
      : checkedProtocol(input.interBrokerProtocol, 'security.inter.broker.protocol')
  if (!advertised.some((e) => e.listener === name))
    throw new ConfigError(
      `inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are ${advertised.map((e) => e.listener).join(',')} (${name} is not)`,
    )
  return name
}

function parseProtocolMap(entries: readonly string[]): Map<string, SecurityProtocol> {
  const map = new Map<string, SecurityProtocol>()
  for (const entry of entries) {
    const parts = entry.split(':')
    if (parts.length !== 2 || parts[0].trim() === '')
      throw new ConfigError(`listener.security.protocol.map entry ${entry}: expected NAME:PROTOCOL`)
    const name = parts[0].trim().toUpperCase()
    if (map.has(name)) throw new ConfigError(`listener.security.protocol.map names ${name} twice`)
    map.set(name, checkedProtocol(parts[1], 'listener.security.protocol.map'))
  }
  return map
}

function checkedProtocol(text: string, config: string): SecurityProtocol {
  const protocol = text.trim().toUpperCase()
  if (!(SECURITY_PROTOCOLS as readonly string[]).includes(protocol))
    throw new ConfigError(
      `${config}: unknown security protocol ${text.trim()} (expected one of ${SECURITY_PROTOCOLS.join(', ')})`,
    )
  return protocol as SecurityProtocol
}

function parseEndpoints(
  config: string,
  entries: readonly string[],
  protocolMap: ReadonlyMap<string, SecurityProtocol>,
): Endpoint[] {
  return entries.map((entry) => {
    const match = /^([A-Za-z0-9_.-]+):\/\/\[?([^\]]*?)\]?:(\d+)$/.exec(entry.trim())
    if (!match) throw new ConfigError(`Invalid ${config} entry ${entry}: expected NAME://host:port`)
    const listener = match[1].toUpperCase()
    const securityProtocol = protocolMap.get(listener)
    if (securityProtocol === undefined)
      throw new ConfigError(
        `No security protocol defined for listener ${listener} (${config}): add it to listener.security.protocol.map`,
      )
    const port = Number(match[3])
    if (port > 65535) throw new ConfigError(`Invalid ${config} entry ${entry}: port out of range`)
    return { listener, securityProtocol, host: match[2] === '' ? '127.0.0.1' : match[2], port }
  })
}

function checkUnique(config: string, endpoints: readonly Endpoint[], portsToo: boolean): void {
  const names = new Set<string>()
  const ports = new Set<number>()
  for (const e of endpoints) {
    if (names.has(e.listener))
      throw new ConfigError(`Each listener must have a different name: ${config} repeats ${e.listener}`)
    names.add(e.listener)
    if (portsToo && e.port !== 0) {
      if (ports.has(e.port))
        throw new ConfigError(`Each listener must have a different port: ${config} repeats ${e.port}`)
      ports.add(e.port)
    }
  }
}

/** `listener.name.<name>.<key>` as Kafka spells the per-listener override (name lower case). */
export function listenerPrefix(listener: string): string {
  return `listener.name.${listener.toLowerCase()}.`
}

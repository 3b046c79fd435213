/**
 * Option validation at construction: a bad value fails fast with InvalidArgumentError
 * naming Kafka's property, instead of misbehaving later.
 */
import { type Clock, systemClock } from '../common/clock.js'
import { InvalidArgumentError } from './errors.js'

/**
 * The client's default clock: the system clock, except that its timers keep the process
 * alive. The broker's `systemClock` unrefs them (its listening sockets hold the process);
 * an application awaiting a send or a poll may have nothing else pending while a retry
 * backoff or a linger runs, and must not exit in the middle of it.
 */
export const clientSystemClock: Clock = {
  nowMs: () => systemClock.nowMs(),
  monotonicMs: () => systemClock.monotonicMs(),
  setTimeout(callback, delayMs) {
    const timer = setTimeout(callback, delayMs)
    return { cancel: () => clearTimeout(timer) }
  },
}

export function intOption(
  name: string,
  value: number | undefined,
  defaultValue: number,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  const v = value ?? defaultValue
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new InvalidArgumentError(`${name} must be an integer in [${min}, ${max}], got ${String(value)}`)
  }
  return v
}

export function oneOf<T extends string | number>(
  name: string,
  value: T | undefined,
  defaultValue: T,
  allowed: readonly T[],
): T {
  const v = value ?? defaultValue
  if (!allowed.includes(v))
    throw new InvalidArgumentError(`${name} must be one of ${allowed.join(', ')}, got ${String(value)}`)
  return v
}

export interface BrokerAddress {
  readonly host: string
  readonly port: number
}

/** 'host:port,host:port' or a list; IPv6 hosts in brackets: '[::1]:9092'. */
export function parseBootstrapServers(servers: string | readonly string[]): BrokerAddress[] {
  const items = (typeof servers === 'string' ? servers.split(',') : [...servers])
    .map((s) => s.trim())
    .filter(Boolean)
  if (items.length === 0) throw new InvalidArgumentError('bootstrap.servers is empty')
  return items.map(parseAddress)
}

function parseAddress(item: string): BrokerAddress {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(item)
  const port = match ? Number(match[3]) : Number.NaN
  if (!match || port < 1 || port > 65535) {
    throw new InvalidArgumentError(`bootstrap server '${item}' is not host:port`)
  }
  return { host: match[1] ?? match[2], port }
}

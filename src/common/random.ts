/**
 * Randomness as an injected dependency: core code (placement, topic and cluster ids, group
 * member ids, fetch session ids, backoff jitter) draws from a `Random` it is given, so the
 * deterministic simulation can replay a run from its seed. `systemRandom` is Node's.
 */
import { randomBytes, randomInt } from 'node:crypto'

export interface Random {
  /** Uniform in [0, 1). */
  next(): number
  /** Uniform integer in [min, max], both inclusive. */
  int(min: number, max: number): number
  /** `length` random bytes. */
  bytes(length: number): Buffer
}

/** Version-4 UUID text from the given random source (group member ids, as Kafka's). */
export function randomUuid(random: Random): string {
  const b = random.bytes(16)
  b[6] = (b[6] & 0x0f) | 0x40
  b[8] = (b[8] & 0x3f) | 0x80
  const hex = b.toString('hex')
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

export const systemRandom: Random = {
  next: () => Math.random(),
  int: (min, max) => randomInt(min, max + 1),
  bytes: (length) => randomBytes(length),
}

/**
 * Broker ids for hand-built metadata (partition states, registrations, live sets): the
 * checked constructor, so a test's ids are branded as the broker's own are at their sources.
 */
import { type BrokerId, toBrokerId } from '../../src/common/types.js'

export { toBrokerId }

/** `ids(1, 2, 3)`: a replica list, ISR or live set of broker ids. */
export function ids(...values: number[]): BrokerId[] {
  return values.map(toBrokerId)
}

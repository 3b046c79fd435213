/**
 * What group tests consumed, counted, not collected in a Set: a Set hides a record read
 * twice. A test asserts exactly once where the semantics promise it (offsets committed
 * before partitions move, no rebalance while the records are read), and at least once,
 * printing the duplicates, where a rebalance or failover may legitimately reread records
 * from the last commit (it says why).
 */
import assert from 'node:assert/strict'

/** How many times each value was consumed. */
export function countConsumed(consumed: Iterable<string>): Map<string, number> {
  const counts = new Map<string, number>()
  for (const value of consumed) counts.set(value, (counts.get(value) ?? 0) + 1)
  return counts
}

/** True when every one of `expected` was consumed at least once. */
export function consumedAll(consumed: Iterable<string>, expected: readonly string[]): boolean {
  const counts = countConsumed(consumed)
  return expected.every((value) => counts.has(value))
}

/** Values read more than once, with their counts, sorted. */
export function duplicatesOf(counts: ReadonlyMap<string, number>): [string, number][] {
  return [...counts].filter(([, n]) => n > 1).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
}

/** Every one of `expected` consumed exactly once, nothing else. */
export function assertConsumedOnce(
  consumed: readonly string[],
  expected: readonly string[],
  what: string,
): void {
  const counts = countConsumed(consumed)
  assert.deepEqual(duplicatesOf(counts), [], `${what}: records consumed more than once`)
  assert.deepEqual(
    [...counts.keys()].sort(),
    [...expected].sort(),
    `${what}: every record consumed, nothing else`,
  )
}

/**
 * Every one of `expected` consumed at least once, nothing else; the duplicates are printed
 * (a rebalance or failover that rereads from the last commit makes them) and their number
 * returned.
 */
export function assertConsumedAtLeastOnce(
  consumed: readonly string[],
  expected: readonly string[],
  what: string,
): number {
  const counts = countConsumed(consumed)
  assert.deepEqual(
    [...counts.keys()].sort(),
    [...expected].sort(),
    `${what}: every record consumed, nothing else`,
  )
  const duplicates = duplicatesOf(counts)
  const extra = duplicates.reduce((sum, [, n]) => sum + n - 1, 0)
  console.log(
    `${what}: ${consumed.length} records consumed for ${expected.length} produced, ${extra} duplicate(s)${
      duplicates.length > 0
        ? `: ${duplicates
            .slice(0, 10)
            .map(([v, n]) => `${v} x${n}`)
            .join(', ')}${duplicates.length > 10 ? ', ...' : ''}`
        : ''
    }`,
  )
  return extra
}

/** Prints how many of `consumed` were read more than once (at-least-once runs); returns it. */
export function reportDuplicates(consumed: readonly string[], what: string): number {
  const duplicates = duplicatesOf(countConsumed(consumed))
  const extra = duplicates.reduce((sum, [, n]) => sum + n - 1, 0)
  console.log(
    `${what}: ${consumed.length} records consumed, ${extra} duplicate read(s) of ${duplicates.length} record(s)`,
  )
  return extra
}

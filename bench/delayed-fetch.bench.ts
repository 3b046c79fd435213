/**
 * The leader's waiting-fetch check (replication/delayed-operations.ts waitForFetchData) per
 * change, against the number of partitions the fetch watches (issue 38: a follower's fetch
 * of thousands of partitions, woken by every append while they are created and caught up).
 * One follower fetch waits on --partitions toy partitions (their state in fields, as cheap
 * to read as the real Partition's getters; no log, no disk), then --changes appends land on
 * partitions picked at random, each waking the fetch's check; the fetch never completes.
 * Prints the time per change and the registration's time. Run it before and after a change
 * of the check to compare; the machine's load is printed, the figures move with it.
 *
 *   node dist/bench/delayed-fetch.bench.js [--partitions 1000,10000,33000] [--changes 20000]
 */
import { loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { systemClock } from '../src/common/clock.js'
import { toOffset } from '../src/common/types.js'
import { fetchWatch, waitForFetchData } from '../src/replication/delayed-operations.js'
import type { Partition } from '../src/replication/partition.js'

const { values } = parseArgs({
  options: {
    partitions: { type: 'string', default: '1000,10000,33000' },
    changes: { type: 'string', default: '20000' },
  },
})
const partitionCounts = values.partitions.split(',').map(Number)
const changes = Number(values.changes)

/** What the check reads of a partition, and its watchers of the log end. */
class ToyPartition {
  readonly isLeader = true
  readonly leaderEpoch = 0
  highWatermark = toOffset(0)
  lastStableOffset = toOffset(0)
  readonly log = { size: 0, logEndOffset: toOffset(0) }
  private readonly endWatchers = new Set<() => void>()
  private readonly hwWatchers = new Set<() => void>()

  watchLogEnd(watcher: () => void): () => void {
    this.endWatchers.add(watcher)
    return () => this.endWatchers.delete(watcher)
  }
  watchHighWatermark(watcher: () => void): () => void {
    this.hwWatchers.add(watcher)
    return () => this.hwWatchers.delete(watcher)
  }
  append(bytes: number): void {
    this.log.size += bytes
    this.log.logEndOffset = toOffset(this.log.logEndOffset + 1)
    for (const watcher of this.endWatchers) watcher()
  }
}

/** A deterministic pick of partitions (xorshift), so before and after see the same changes. */
function picker(seed: number): (bound: number) => number {
  let state = seed
  return (bound) => {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    return (state >>> 0) % bound
  }
}

console.log(
  `load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
)
console.log('| partitions watched | registration (ms) | per change (us) | changes |')
console.log('| --- | --- | --- | --- |')
for (const count of partitionCounts) {
  const partitions = Array.from({ length: count }, () => new ToyPartition())
  const watches = partitions.map((p) => fetchWatch(p as unknown as Partition, toOffset(0), 'logEnd'))
  const registeredAt = performance.now()
  // Never enough bytes, a long wait: the fetch stays parked while the changes land.
  void waitForFetchData(systemClock, watches, Number.MAX_SAFE_INTEGER, 3_600_000, 'logEnd')
  const registrationMs = performance.now() - registeredAt
  const pick = picker(count)
  const startedAt = performance.now()
  for (let i = 0; i < changes; i++) partitions[pick(count)].append(100)
  const perChangeUs = ((performance.now() - startedAt) * 1000) / changes
  console.log(`| ${count} | ${registrationMs.toFixed(1)} | ${perChangeUs.toFixed(2)} | ${changes} |`)
}
console.log(
  `load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
)
// The parked fetches' timers would hold the process for an hour.
process.exit(0)

/**
 * The delayed fetch's completion check (delayed-operations.ts waitForFetchData) on toy
 * partitions that count how often they are read: a change re-reads only the partition whose
 * watcher fired, so a follower's fetch of thousands of partitions costs a constant per append
 * or commit, not a walk over all of them (issue 38: 11.4% of a broker's CPU creating 33,000
 * partitions). Its answers are those of the full walk: bytes summed over partitions, a
 * partition counted once with its latest growth, a leadership change completing at once.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type Offset, toOffset } from '../../src/common/types.js'
import {
  type DelayedFetchWatch,
  type FetchWakeOn,
  fetchWatch,
  waitForFetchData,
} from '../../src/replication/delayed-operations.js'
import type { Partition } from '../../src/replication/partition.js'
import { ManualClock } from '../helpers/manual-clock.js'

/** A partition as the check reads it; `reads` counts each read of its state. */
class ToyPartition {
  reads = 0
  private sizeBytes = 0
  private endOffset = 0
  private hw = 0
  private epoch = 0
  private leader = true
  private readonly hwWatchers = new Set<() => void>()
  private readonly endWatchers = new Set<() => void>()
  readonly log = {
    owner: this,
    get size(): number {
      this.owner.reads++
      return this.owner.sizeBytes
    },
    get logEndOffset(): Offset {
      this.owner.reads++
      return toOffset(this.owner.endOffset)
    },
  }

  get isLeader(): boolean {
    this.reads++
    return this.leader
  }
  get leaderEpoch(): number {
    this.reads++
    return this.epoch
  }
  get highWatermark(): Offset {
    this.reads++
    return toOffset(this.hw)
  }
  get lastStableOffset(): Offset {
    return this.highWatermark
  }

  watchHighWatermark(watcher: () => void): () => void {
    this.hwWatchers.add(watcher)
    return () => this.hwWatchers.delete(watcher)
  }
  watchLogEnd(watcher: () => void): () => void {
    this.endWatchers.add(watcher)
    return () => this.endWatchers.delete(watcher)
  }
  get watchers(): number {
    return this.hwWatchers.size + this.endWatchers.size
  }

  /** A leader's append of `bytes` in one record; its watchers of the log end hear of it. */
  append(bytes: number): void {
    this.sizeBytes += bytes
    this.endOffset++
    for (const watcher of [...this.endWatchers]) watcher()
  }
  /** The high watermark reaches the log end. */
  commit(): void {
    this.hw = this.endOffset
    for (const watcher of [...this.hwWatchers]) watcher()
  }
  /** Another leader epoch (the high watermark's watchers hear of leadership changes). */
  moveLeadership(): void {
    this.epoch++
    this.leader = false
    for (const watcher of [...this.hwWatchers]) watcher()
  }
}

function watchAll(partitions: readonly ToyPartition[], wakeOn: FetchWakeOn): DelayedFetchWatch[] {
  return partitions.map((p) => fetchWatch(p as unknown as Partition, toOffset(0), wakeOn))
}

const toys = (count: number) => Array.from({ length: count }, () => new ToyPartition())
const totalReads = (partitions: readonly ToyPartition[]) => partitions.reduce((sum, p) => sum + p.reads, 0)

describe('a delayed fetch of many partitions', () => {
  it('re-reads only the partition that changed (2,000 partitions, a follower fetch)', async () => {
    const partitions = toys(2000)
    const watches = watchAll(partitions, 'logEnd')
    let done = false
    const waiting = waitForFetchData(new ManualClock(), watches, 1_000_000, 500, 'logEnd').then(() => {
      done = true
    })
    // Registration checks every partition once.
    for (const p of partitions) p.reads = 0
    for (let i = 0; i < 200; i++) partitions[(i * 7) % partitions.length].append(100)
    const readsPerChange = totalReads(partitions) / 200
    // One partition's leadership, epoch, log end and size: a handful of reads, whatever the count.
    assert.ok(readsPerChange <= 6, `${readsPerChange} partition reads per append`)
    assert.equal(done, false, '20,000 bytes of the 1,000,000 needed')
    partitions[3].moveLeadership()
    await waiting
    assert.ok(
      partitions.every((p) => p.watchers === 0),
      'every watcher removed',
    )
  })

  it('sums the bytes over partitions and counts a partition once, with its latest growth', async () => {
    const [a, b, c] = toys(3)
    a.append(10)
    const watches = watchAll([a, b, c], 'highWatermark')
    let done = false
    const waiting = waitForFetchData(new ManualClock(), watches, 250, 500, 'highWatermark').then(() => {
      done = true
    })
    // Appended before the baseline, committed since: readable now, at least one byte.
    a.commit()
    b.append(100)
    b.commit()
    b.append(100)
    b.commit()
    await Promise.resolve()
    assert.equal(done, false, 'a 1 + b 200 = 201 of 250 bytes')
    c.append(10)
    c.commit()
    await Promise.resolve()
    assert.equal(done, false, 'a 1 + b 200 + c 10 = 211')
    b.append(40)
    await Promise.resolve()
    assert.equal(done, false, "a consumer's fetch waits for the commit")
    b.commit()
    await waiting
    assert.equal(done, true, 'a 1 + b 240 + c 10 = 251')
    assert.ok([a, b, c].every((p) => p.watchers === 0))
  })

  it('answers after maxWaitMs with too little data, and at once if a partition had data at registration', async () => {
    const clock = new ManualClock()
    const [a, b] = toys(2)
    let done = false
    const waiting = waitForFetchData(clock, watchAll([a, b], 'logEnd'), 1000, 500, 'logEnd').then(() => {
      done = true
    })
    a.append(10)
    clock.advance(499)
    await Promise.resolve()
    assert.equal(done, false)
    clock.advance(1)
    await waiting
    const [c] = toys(1)
    const watches = watchAll([c], 'logEnd')
    c.append(5)
    await waitForFetchData(clock, watches, 1, 60_000, 'logEnd')
    assert.equal(c.watchers, 0)
  })
})

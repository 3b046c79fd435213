/**
 * Issue 38: the probe that finds a store watch etcd stopped feeding (etcd 3.4 before 3.4.31,
 * docs/notes/scale.md), whatever its owner writes. Driven by a manual clock and a scripted
 * store: what each look costs, and when it concludes a stall.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setImmediate as turn } from 'node:timers/promises'
import {
  type ProbedWatch,
  sharedRevisionRead,
  WatchProbe,
  type WatchStallFinding,
} from '../../../src/metadata/store/watch-probe.js'
import { ManualClock } from '../../helpers/manual-clock.js'

const INTERVAL_MS = 1000

interface Script {
  storeRevision: number
  /** Revisions under the watch's prefix after its start: what a replay delivers. */
  readonly history: number[]
  compacted: boolean
}

function harness(nextRevision = 11) {
  const clock = new ManualClock()
  const watch = { nextRevision, deliveries: 0 }
  const script: Script = { storeRevision: nextRevision - 1, history: [], compacted: false }
  const counts = { reads: 0, replays: 0, replaysOpen: 0 }
  const replayedFrom: number[] = []
  const stalls: WatchStallFinding[] = []
  const probe = new WatchProbe(watch as ProbedWatch, {
    clock,
    intervalMs: INTERVAL_MS,
    storeRevision: async () => {
      counts.reads++
      return script.storeRevision
    },
    openReplay: (fromRevision, onRevision, onCompacted) => {
      counts.replays++
      counts.replaysOpen++
      replayedFrom.push(fromRevision)
      if (script.compacted) onCompacted()
      else for (const revision of script.history.filter((r) => r >= fromRevision)) onRevision(revision)
      return { cancel: () => counts.replaysOpen-- }
    },
    onStall: (finding) => stalls.push(finding),
    onLookFailed: (err) => assert.fail(`look failed: ${String(err)}`),
  })
  /** The watch delivers a revision, as a synced one does. */
  const deliver = (revision: number) => {
    watch.nextRevision = revision + 1
    watch.deliveries++
  }
  /** A write under the prefix: in the store and its history, not (yet) delivered. */
  const write = (revision: number) => {
    script.storeRevision = revision
    script.history.push(revision)
  }
  const intervals = async (n: number) => {
    for (let i = 0; i < n; i++) {
      clock.advance(INTERVAL_MS)
      await turn()
      await turn()
    }
  }
  return { clock, watch, script, counts, replayedFrom, stalls, probe, deliver, write, intervals }
}

test('an idle watch on an idle store costs one revision read per interval and nothing else', async () => {
  const h = harness()
  await h.intervals(10)
  assert.deepEqual(h.counts, { reads: 10, replays: 0, replaysOpen: 0 })
  assert.deepEqual(h.stalls, [])
  h.probe.stop()
  assert.equal(h.clock.pendingTimers, 0)
})

test('a watch that delivers is not looked at', async () => {
  const h = harness()
  for (let revision = 11; revision < 21; revision++) {
    h.write(revision)
    h.deliver(revision)
    await h.intervals(1)
  }
  assert.deepEqual(h.counts, { reads: 0, replays: 0, replaysOpen: 0 })
  assert.deepEqual(h.stalls, [])
  h.probe.stop()
})

test('a silent watch that missed a write under its prefix is found stalled within three intervals', async () => {
  const h = harness()
  await h.intervals(1)
  h.write(11) // etcd no longer sends: the watch never delivers it
  await h.intervals(1)
  assert.deepEqual(h.stalls, [], 'one look opens a replay, it does not conclude')
  assert.equal(h.counts.replays, 1)
  await h.intervals(1)
  assert.deepEqual(h.stalls, [
    {
      missedRevision: 11,
      nextRevision: 11,
      storeRevision: 11,
      reason: 'replay delivered a revision the watch did not',
    },
  ])
  assert.equal(h.counts.replaysOpen, 0, 'the replay is cancelled')
  assert.equal(h.clock.pendingTimers, 0, 'a probe that found a stall stops')
})

test('writes elsewhere in the store (other prefixes) cost one replay, then reads only', async () => {
  const h = harness()
  h.script.storeRevision = 50 // another prefix or cluster wrote 40 revisions
  await h.intervals(6)
  assert.deepEqual(h.stalls, [])
  assert.equal(h.counts.replays, 1, 'the replay found nothing under the prefix up to 50')
  assert.equal(h.counts.replaysOpen, 0)
  h.script.storeRevision = 60
  await h.intervals(2)
  assert.equal(h.counts.replays, 2, 'a later write elsewhere is checked again')
  assert.deepEqual(h.replayedFrom, [11, 51], 'from what is not known complete: the replay stays short')
  h.probe.stop()
})

test('a watch that delivers the replayed revision before the next look is not stalled', async () => {
  const h = harness()
  h.write(11)
  await h.intervals(1) // silent so far: a replay opens and sees 11
  assert.equal(h.counts.replays, 1)
  h.deliver(11) // slow, not stalled
  await h.intervals(4)
  assert.deepEqual(h.stalls, [])
  h.probe.stop()
})

test('a replay refused as compacted restarts a watch that stayed silent, not one that delivered', async () => {
  const silent = harness()
  silent.script.compacted = true
  silent.script.storeRevision = 30
  await silent.intervals(2)
  assert.equal(silent.stalls.length, 1)
  assert.equal(silent.stalls[0]?.reason, 'replay start compacted')

  const alive = harness()
  alive.script.compacted = true
  alive.script.storeRevision = 30
  await alive.intervals(1)
  alive.deliver(30)
  await alive.intervals(3)
  assert.deepEqual(alive.stalls, [])
  alive.probe.stop()
})

test("a store's probes share one revision read while it is younger than the limit; a failed one is not shared", async () => {
  const clock = new ManualClock()
  let reads = 0
  let fail = false
  const read = sharedRevisionRead(
    async () => {
      reads++
      if (fail) throw new Error('store unreachable')
      return 100 + reads
    },
    clock,
    500,
  )
  assert.deepEqual(await Promise.all([read(), read()]), [101, 101])
  clock.advance(499)
  assert.equal(await read(), 101)
  clock.advance(1)
  assert.equal(await read(), 102)
  clock.advance(500)
  fail = true
  await assert.rejects(read())
  fail = false
  assert.equal(await read(), 104, 'read again at once after a failure')
  assert.equal(reads, 4)
})

/**
 * The simulator's OffsetFetch check (src/sim/invariants-group.ts) on hand-made answers, apart
 * from any seed's schedule: an answer is held to the commits acknowledged and the answers
 * arrived before its fetch was sent, not to an answer that overtook it (seed 304's false
 * alarm: two overlapping fetches answered in the other order), and an answer below either of
 * those is a violation. And the checks fed from the members' polls and commits (tidelog's
 * Consumer): records in order while a partition is held, commits only after consumed records.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { CONSUMER_OFFSETS_TOPIC } from '../../src/coordinator/group.js'
import { GroupInvariants } from '../../src/sim/invariants-group.js'
import { Violation, type WorldView } from '../../src/sim/world-view.js'
import { toBrokerId } from '../helpers/broker-ids.js'

const COORDINATOR = 1

/** A world where broker 1 leads __consumer_offsets-0 in epoch 5, in the store and in its own eyes. */
function world(log: string[]): WorldView {
  const image = {
    topics: new Map([[CONSUMER_OFFSETS_TOPIC, { partitions: [{ leader: COORDINATOR, leaderEpoch: 5 }] }]]),
  }
  const partition = { isLeader: true, leaderEpoch: 5 }
  const broker = { replicaManager: { getPartition: () => partition } }
  return {
    truth: { image: () => image },
    brokers: new Map([[COORDINATOR, broker]]),
    log: (message: string) => log.push(message),
  } as unknown as WorldView
}

/** Member 0's polls returned offsets 0..`last` of `partition`, in order. */
function consume(checks: GroupInvariants, partition: number, last: number): void {
  for (let offset = 0; offset <= last; offset++) checks.onGroupRecord(0, partition, offset, offset > 0)
}

describe('simulator group offsets check', () => {
  it('does not hold an answer to a later answer that overtook it, and counts it', () => {
    const log: string[] = []
    const checks = new GroupInvariants(world(log))
    consume(checks, 0, 227)
    checks.onCommitAcked(0, 209, 0)
    // The first fetch is sent now (it sees commit 209), then commit 228 is acknowledged.
    const early = checks.offsetsBeforeFetch()
    checks.onCommitAcked(0, 228, 0)
    const late = checks.offsetsBeforeFetch()
    // The later fetch is answered first with 228, then the earlier one with 209.
    assert.equal(checks.onOffsetsFetched(toBrokerId(COORDINATOR), 0, new Map([[0, 228]]), late), true)
    assert.equal(checks.onOffsetsFetched(toBrokerId(COORDINATOR), 0, new Map([[0, 209]]), early), true)
    assert.equal(checks.counts.overtaken, 1)
    assert.match(log.join('\n'), /returned 209 for \S+ to a fetch overtaken by one that returned 228/)
  })

  it('fails an answer below what an answer before its fetch returned (went backwards)', () => {
    const checks = new GroupInvariants(world([]))
    checks.onOffsetsFetched(toBrokerId(COORDINATOR), 0, new Map([[0, 228]]), checks.offsetsBeforeFetch())
    const after = checks.offsetsBeforeFetch()
    assert.throws(
      () => checks.onOffsetsFetched(toBrokerId(COORDINATOR), 0, new Map([[0, 209]]), after),
      (error: unknown) => error instanceof Violation && /went backwards/.test(error.message),
    )
  })

  it('fails an answer below a commit acknowledged before its fetch was sent', () => {
    const checks = new GroupInvariants(world([]))
    consume(checks, 0, 227)
    checks.onCommitAcked(0, 228, 0)
    const before = checks.offsetsBeforeFetch()
    assert.throws(
      () => checks.onOffsetsFetched(toBrokerId(COORDINATOR), 0, new Map([[0, 209]]), before),
      (error: unknown) =>
        error instanceof Violation && /below the acknowledged commit 228/.test(error.message),
    )
  })

  it('fails a member whose poll returns an offset again while it holds the partition, not after a reassignment', () => {
    const checks = new GroupInvariants(world([]))
    consume(checks, 1, 5)
    // Assigned again (held: false): it restarts from the committed offset, 3.
    checks.onGroupRecord(0, 1, 3, false)
    checks.onGroupRecord(0, 1, 4, true)
    assert.throws(
      () => checks.onGroupRecord(0, 1, 4, true),
      (error: unknown) => error instanceof Violation && /read again or out of order/.test(error.message),
    )
  })

  it('fails an acknowledged commit of an offset no member consumed up to', () => {
    const checks = new GroupInvariants(world([]))
    consume(checks, 0, 9)
    checks.onCommitAcked(0, 10, 0)
    assert.throws(
      () => checks.onCommitAcked(0, 12, 1),
      (error: unknown) => error instanceof Violation && /no member consumed offset 11/.test(error.message),
    )
  })
})

import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import fc from 'fast-check'
import { type Offset, toOffset, toPartitionEpoch } from '../../src/common/types.js'
import type { PartitionState } from '../../src/metadata/cluster-image.js'
import {
  electPreferred,
  onBrokerChange,
  onBrokerRegistered,
  onControlledShutdown,
  withIsr,
} from '../../src/metadata/elections.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'

function state(partial: Partial<PartitionState>): PartitionState {
  return {
    partition: 0,
    replicas: ids(1, 2, 3),
    isr: ids(1, 2, 3),
    leader: toBrokerId(1),
    leaderEpoch: 5,
    partitionEpoch: toPartitionEpoch(1),
    ...partial,
  }
}

describe('onBrokerChange', () => {
  test('a live leader keeps leading; dead followers leave the ISR', () => {
    const result = onBrokerChange({
      state: state({}),
      live: new Set(ids(1, 3)),
      uncleanLeaderElection: false,
    })
    assert.deepEqual(result?.state.isr, [1, 3])
    assert.equal(result?.state.leader, 1)
    assert.equal(result?.state.leaderEpoch, 5, 'no leader change, no epoch bump')
  })

  test('nothing changes when everyone is alive', () => {
    assert.equal(
      onBrokerChange({ state: state({}), live: new Set(ids(1, 2, 3)), uncleanLeaderElection: false }),
      null,
    )
  })

  test('a dead leader is replaced by the first live ISR member in assignment order, epoch bumped', () => {
    const result = onBrokerChange({
      state: state({ replicas: ids(1, 3, 2), isr: ids(1, 2, 3) }),
      live: new Set(ids(2, 3)),
      uncleanLeaderElection: false,
    })
    assert.equal(result?.state.leader, 3)
    assert.deepEqual(result?.state.isr, [2, 3])
    assert.equal(result?.state.leaderEpoch, 6)
    assert.equal(result?.unclean, false)
  })

  test('never elects outside the ISR when unclean election is disabled: the partition goes offline', () => {
    const result = onBrokerChange({
      state: state({ isr: ids(1) }),
      live: new Set(ids(2, 3)),
      uncleanLeaderElection: false,
    })
    assert.equal(result?.state.leader, -1)
    assert.deepEqual(result?.state.isr, [1], 'the last ISR member is kept for its return')
    const again = onBrokerChange({
      state: result!.state,
      live: new Set(ids(2, 3)),
      uncleanLeaderElection: false,
    })
    assert.equal(again, null, 'stays offline without churning the epoch')
    const back = onBrokerChange({
      state: result!.state,
      live: new Set(ids(1, 2, 3)),
      uncleanLeaderElection: false,
    })
    assert.equal(back?.state.leader, 1, 'the returning ISR member leads')
  })

  test('unclean election picks a live replica outside the ISR and says so', () => {
    const result = onBrokerChange({
      state: state({ isr: ids(1) }),
      live: new Set(ids(3, 2)),
      uncleanLeaderElection: true,
    })
    assert.equal(result?.state.leader, 2)
    assert.deepEqual(result?.state.isr, [2])
    assert.equal(result?.unclean, true)
  })

  test('property: a clean result leads from the old ISR, epochs never decrease, ISR never empty', () => {
    fc.assert(
      fc.property(
        fc.shuffledSubarray(ids(1, 2, 3, 4, 5), { minLength: 1 }),
        fc.subarray(ids(1, 2, 3, 4, 5)),
        fc.subarray(ids(1, 2, 3, 4, 5)),
        fc.boolean(),
        (replicas, isrPick, livePick, unclean) => {
          const isr = replicas.filter((r) => isrPick.includes(r))
          const s = state({
            replicas,
            isr: isr.length ? isr : [replicas[0]],
            leader: isr.length ? isr[0] : replicas[0],
          })
          const result = onBrokerChange({ state: s, live: new Set(livePick), uncleanLeaderElection: unclean })
          if (!result) return
          assert.ok(result.state.leaderEpoch >= s.leaderEpoch)
          assert.ok(result.state.isr.length >= 1)
          if (result.state.leader !== -1) assert.ok(result.state.isr.includes(result.state.leader))
          if (!result.unclean && result.state.leader !== -1) assert.ok(s.isr.includes(result.state.leader))
        },
      ),
    )
  })
})

test('electPreferred moves leadership back to the first replica when it is in the ISR', () => {
  const s = state({ leader: toBrokerId(2), replicas: ids(1, 2, 3), isr: ids(2, 3, 1) })
  assert.equal(
    electPreferred({ state: s, live: new Set(ids(1, 2, 3)), uncleanLeaderElection: false })?.state.leader,
    1,
  )
  assert.equal(
    electPreferred({
      state: { ...s, isr: ids(2, 3) },
      live: new Set(ids(1, 2, 3)),
      uncleanLeaderElection: false,
    }),
    null,
  )
})

test('controlled shutdown hands leadership to another ISR member, or keeps it when alone', () => {
  const moved = onControlledShutdown(
    { state: state({}), live: new Set(ids(1, 2, 3)), uncleanLeaderElection: false },
    toBrokerId(1),
  )
  assert.equal(moved?.state.leader, 2)
  assert.ok(!moved?.state.isr.includes(toBrokerId(1)))
  const alone = onControlledShutdown(
    { state: state({ isr: ids(1) }), live: new Set(ids(1, 2, 3)), uncleanLeaderElection: false },
    toBrokerId(1),
  )
  assert.equal(alone, null)
})

describe('onBrokerRegistered (a new incarnation)', () => {
  test('leadership moves to another live ISR member and the new incarnation leaves the ISR', () => {
    const result = onBrokerRegistered(
      { state: state({}), live: new Set(ids(1, 2, 3)), uncleanLeaderElection: false },
      toBrokerId(1),
    )
    assert.equal(result?.state.leader, 2)
    assert.deepEqual(result?.state.isr, [2, 3])
    assert.equal(result?.state.leaderEpoch, 6)
  })

  test('as the last live ISR member and leader it keeps leading, in a new leader epoch', () => {
    const result = onBrokerRegistered(
      { state: state({ isr: ids(1) }), live: new Set(ids(1, 2, 3)), uncleanLeaderElection: false },
      toBrokerId(1),
    )
    assert.equal(result?.state.leader, 1)
    assert.deepEqual(result?.state.isr, [1])
    assert.equal(result?.state.leaderEpoch, 6, 'its previous incarnation is fenced out of epoch 5')
  })

  test('as the last live ISR member but not leader nothing changes', () => {
    const input = {
      state: state({ isr: ids(2), leader: toBrokerId(2) }),
      live: new Set(ids(2)),
      uncleanLeaderElection: false,
    }
    assert.equal(onBrokerRegistered(input, toBrokerId(3)), null)
    assert.equal(
      onBrokerRegistered(
        { ...input, state: state({ isr: ids(2, 3), leader: toBrokerId(-1) }), live: new Set(ids(3)) },
        toBrokerId(3),
      ),
      null,
    )
  })
})

describe('eligible leader replicas (KIP-966)', () => {
  const minIsr = 2

  test('a member leaving an ISR below min ISR joins the ELR; the ELR clears at min ISR again', () => {
    const dead2 = onBrokerChange({
      state: state({}),
      live: new Set(ids(1, 3)),
      uncleanLeaderElection: false,
      minIsr,
    })
    assert.deepEqual(dead2?.state.isr, [1, 3])
    assert.equal(dead2?.state.elr, undefined, 'ISR 2 >= min ISR 2: no ELR')
    const dead3 = onBrokerChange({
      state: dead2!.state,
      live: new Set(ids(1)),
      uncleanLeaderElection: false,
      minIsr,
    })
    assert.deepEqual(dead3?.state.isr, [1])
    assert.deepEqual(dead3?.state.elr, [3], '3 left an ISR below min ISR: it holds every committed record')
    assert.deepEqual(withIsr(dead3!.state, ids(1, 2), minIsr).elr, undefined)
  })

  test('with no live ISR member the first live ELR member is elected cleanly', () => {
    const offline = state({ isr: ids(1), elr: ids(3), leader: toBrokerId(1) })
    const result = onBrokerChange({
      state: offline,
      live: new Set(ids(2, 3)),
      uncleanLeaderElection: false,
      minIsr,
    })
    assert.equal(result?.unclean, false)
    assert.equal(result?.state.leader, 3)
    assert.deepEqual(result?.state.isr, [3])
    assert.deepEqual(result?.state.elr, [1], 'the dead last ISR member joins the ELR')
    assert.equal(result?.state.leaderEpoch, 6)
  })

  test('a broker back from an unclean shutdown leaves the ELR and, as the last ISR member, gives way to it', () => {
    const s = state({ isr: ids(1), elr: ids(2, 3), leader: toBrokerId(1) })
    const cleanBack = onBrokerRegistered(
      { state: s, live: new Set(ids(1, 2)), uncleanLeaderElection: false, minIsr },
      toBrokerId(1),
    )
    assert.equal(cleanBack?.state.leader, 1, 'clean: what it holds is all there is')
    const uncleanBack = onBrokerRegistered(
      { state: s, live: new Set(ids(1, 2)), uncleanLeaderElection: false, minIsr },
      toBrokerId(1),
      true,
    )
    assert.equal(uncleanBack?.state.leader, 2, 'the live ELR member holds what broker 1 may have lost')
    assert.deepEqual(uncleanBack?.state.isr, [2])
    assert.deepEqual(uncleanBack?.state.elr, [3], 'not broker 1: it may lack committed records')
    assert.deepEqual(uncleanBack?.state.lastKnownElr, [1])
    const elrMember = onBrokerRegistered(
      { state: uncleanBack!.state, live: new Set(ids(1, 2, 3)), uncleanLeaderElection: false, minIsr },
      toBrokerId(3),
      true,
    )
    assert.deepEqual(elrMember?.state.elr, [])
    assert.deepEqual(elrMember?.state.lastKnownElr, [1, 3])
  })

  test('unclean recovery: the last ISR member back uncleanly gives way to a live last-known-ELR member with a longer log', () => {
    // The simulator's seed 6 with --store-stalls --two-impairments: broker 2, the last ISR
    // member, lost unflushed records to a power loss; broker 3 crashed with its page cache
    // kept and came back first, leaving the ELR for the last known ELR with its log reported.
    const offline = state({ isr: ids(2), leader: toBrokerId(-1), elr: ids(3) })
    const third = onBrokerRegistered(
      { state: offline, live: new Set(ids(1, 3)), uncleanLeaderElection: false, minIsr },
      toBrokerId(3),
      true,
      { leaderEpoch: 4, endOffset: toOffset(242) },
    )
    assert.deepEqual(third?.state.lastKnownElr, [3])
    assert.deepEqual(third?.state.recoveryLogEnds, { 3: { leaderEpoch: 4, endOffset: toOffset(242) } })
    assert.equal(third?.state.leader, -1, 'nobody leads yet: broker 2 holds the ISR')
    const second = onBrokerRegistered(
      { state: third!.state, live: new Set(ids(1, 2, 3)), uncleanLeaderElection: false, minIsr },
      toBrokerId(2),
      true,
      { leaderEpoch: 4, endOffset: toOffset(13) },
    )
    assert.equal(second?.state.leader, 3, 'broker 3 kept the records broker 2 lost')
    assert.deepEqual(second?.state.isr, [3])
    assert.deepEqual(second?.state.lastKnownElr, [2])
    assert.equal(second?.state.recoveryLogEnds, undefined, 'a new leader makes reported log ends stale')
    assert.equal(second?.state.leaderEpoch, offline.leaderEpoch + 1)
    assert.equal(second?.unclean, false)
  })

  test('unclean recovery ranks by leader epoch first, and skips a shorter, dead or unreported member', () => {
    const offline = state({
      isr: ids(2),
      leader: toBrokerId(-1),
      lastKnownElr: ids(1, 3),
      recoveryLogEnds: {
        1: { leaderEpoch: 3, endOffset: toOffset(900) },
        3: { leaderEpoch: 4, endOffset: toOffset(10) },
      },
    })
    const register = (live: number[], end: { leaderEpoch: number; endOffset: Offset } | undefined) =>
      onBrokerRegistered(
        { state: offline, live: new Set(ids(...live)), uncleanLeaderElection: false, minIsr },
        toBrokerId(2),
        true,
        end,
      )
    assert.equal(
      register([1, 2, 3], { leaderEpoch: 4, endOffset: toOffset(5) })?.state.leader,
      3,
      'epoch 4 beats epoch 3',
    )
    const own = register([1, 2, 3], { leaderEpoch: 4, endOffset: toOffset(50) })
    assert.equal(own?.state.leader, -1, 'broker 2 has the longest log: it stays the last ISR member')
    assert.deepEqual(own?.state.isr, [2])
    assert.equal(
      register([1, 2], { leaderEpoch: 3, endOffset: toOffset(5) })?.state.leader,
      1,
      'broker 3 is not live',
    )
    assert.equal(
      register([2], { leaderEpoch: 0, endOffset: toOffset(0) })?.state.leader,
      -1,
      'no live candidate',
    )
    const clean = onBrokerRegistered(
      { state: offline, live: new Set(ids(1, 2, 3)), uncleanLeaderElection: false, minIsr },
      toBrokerId(2),
    )
    assert.equal(clean, null, 'a clean return keeps broker 2: it lost nothing')
  })

  test('the last ISR member back uncleanly while no ELR member is live: the partition waits offline for the ELR', () => {
    // The simulator's seed 101: broker 2 lost 255 committed records to a power loss; broker
    // 1, which held them, had left the ISR below min ISR (so it is in the ELR) and was down.
    const offline = state({ isr: ids(2), leader: toBrokerId(-1), elr: ids(1) })
    const back = onBrokerRegistered(
      { state: offline, live: new Set(ids(2, 3)), uncleanLeaderElection: false, minIsr },
      toBrokerId(2),
      true,
      { leaderEpoch: 0, endOffset: toOffset(0) },
    )
    assert.equal(back?.state.leader, -1)
    assert.deepEqual(back?.state.isr, [1], 'the ELR member holds every committed record')
    assert.deepEqual(back?.state.elr, [])
    assert.deepEqual(back?.state.lastKnownElr, [2])
    assert.equal(
      onBrokerChange({ state: back!.state, live: new Set(ids(2, 3)), uncleanLeaderElection: false, minIsr }),
      null,
      'nobody is elected while broker 1 is down',
    )
    const holderBack = onBrokerChange({
      state: back!.state,
      live: new Set(ids(1, 2, 3)),
      uncleanLeaderElection: false,
      minIsr,
    })
    assert.equal(holderBack?.state.leader, 1)
    const leading = onBrokerRegistered(
      {
        state: state({ isr: ids(2), leader: toBrokerId(2), elr: ids(1) }),
        live: new Set(ids(2)),
        uncleanLeaderElection: false,
        minIsr,
      },
      toBrokerId(2),
      true,
    )
    assert.equal(leading?.state.leader, -1, 'its previous incarnation stops leading')
    assert.equal(leading?.state.leaderEpoch, 6, 'in a new leader epoch')
  })

  test('an ELR member elected before it re-registers uncleanly gives way back to the longer log', () => {
    // The simulator's seed 545: broker 3, the last ISR member, came back from a process crash
    // with everything; broker 1, in the ELR, still had its previous registration while it
    // restarted after a power loss, so it was elected, then registered without 325 records.
    const s0 = state({ isr: ids(3), leader: toBrokerId(3), elr: ids(1), leaderEpoch: 4 })
    const third = onBrokerRegistered(
      { state: s0, live: new Set(ids(1, 2, 3)), uncleanLeaderElection: false, minIsr },
      toBrokerId(3),
      true,
      { leaderEpoch: 4, endOffset: toOffset(396) },
    )
    assert.equal(third?.state.leader, 1)
    assert.deepEqual(third?.state.lastKnownElr, [3])
    assert.deepEqual(third?.state.recoveryLogEnds, { 3: { leaderEpoch: 4, endOffset: toOffset(396) } })
    const first = onBrokerRegistered(
      { state: third!.state, live: new Set(ids(1, 2, 3)), uncleanLeaderElection: false, minIsr },
      toBrokerId(1),
      true,
      { leaderEpoch: 4, endOffset: toOffset(20) },
    )
    assert.equal(first?.state.leader, 3, 'broker 3 still has the records broker 1 lost')
    assert.deepEqual(first?.state.isr, [3])
  })
})

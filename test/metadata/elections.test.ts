import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import fc from 'fast-check'
import type { PartitionState } from '../../src/metadata/cluster-image.js'
import {
  electPreferred,
  onBrokerChange,
  onBrokerRegistered,
  onControlledShutdown,
  withIsr,
} from '../../src/metadata/elections.js'

function state(partial: Partial<PartitionState>): PartitionState {
  return {
    partition: 0,
    replicas: [1, 2, 3],
    isr: [1, 2, 3],
    leader: 1,
    leaderEpoch: 5,
    partitionEpoch: 1,
    ...partial,
  }
}

describe('onBrokerChange', () => {
  test('a live leader keeps leading; dead followers leave the ISR', () => {
    const result = onBrokerChange({ state: state({}), live: new Set([1, 3]), uncleanLeaderElection: false })
    assert.deepEqual(result?.state.isr, [1, 3])
    assert.equal(result?.state.leader, 1)
    assert.equal(result?.state.leaderEpoch, 5, 'no leader change, no epoch bump')
  })

  test('nothing changes when everyone is alive', () => {
    assert.equal(
      onBrokerChange({ state: state({}), live: new Set([1, 2, 3]), uncleanLeaderElection: false }),
      null,
    )
  })

  test('a dead leader is replaced by the first live ISR member in assignment order, epoch bumped', () => {
    const result = onBrokerChange({
      state: state({ replicas: [1, 3, 2], isr: [1, 2, 3] }),
      live: new Set([2, 3]),
      uncleanLeaderElection: false,
    })
    assert.equal(result?.state.leader, 3)
    assert.deepEqual(result?.state.isr, [2, 3])
    assert.equal(result?.state.leaderEpoch, 6)
    assert.equal(result?.unclean, false)
  })

  test('never elects outside the ISR when unclean election is disabled: the partition goes offline', () => {
    const result = onBrokerChange({
      state: state({ isr: [1] }),
      live: new Set([2, 3]),
      uncleanLeaderElection: false,
    })
    assert.equal(result?.state.leader, -1)
    assert.deepEqual(result?.state.isr, [1], 'the last ISR member is kept for its return')
    const again = onBrokerChange({
      state: result!.state,
      live: new Set([2, 3]),
      uncleanLeaderElection: false,
    })
    assert.equal(again, null, 'stays offline without churning the epoch')
    const back = onBrokerChange({
      state: result!.state,
      live: new Set([1, 2, 3]),
      uncleanLeaderElection: false,
    })
    assert.equal(back?.state.leader, 1, 'the returning ISR member leads')
  })

  test('unclean election picks a live replica outside the ISR and says so', () => {
    const result = onBrokerChange({
      state: state({ isr: [1] }),
      live: new Set([3, 2]),
      uncleanLeaderElection: true,
    })
    assert.equal(result?.state.leader, 2)
    assert.deepEqual(result?.state.isr, [2])
    assert.equal(result?.unclean, true)
  })

  test('property: a clean result leads from the old ISR, epochs never decrease, ISR never empty', () => {
    fc.assert(
      fc.property(
        fc.shuffledSubarray([1, 2, 3, 4, 5], { minLength: 1 }),
        fc.subarray([1, 2, 3, 4, 5]),
        fc.subarray([1, 2, 3, 4, 5]),
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
  const s = state({ leader: 2, replicas: [1, 2, 3], isr: [2, 3, 1] })
  assert.equal(
    electPreferred({ state: s, live: new Set([1, 2, 3]), uncleanLeaderElection: false })?.state.leader,
    1,
  )
  assert.equal(
    electPreferred({ state: { ...s, isr: [2, 3] }, live: new Set([1, 2, 3]), uncleanLeaderElection: false }),
    null,
  )
})

test('controlled shutdown hands leadership to another ISR member, or keeps it when alone', () => {
  const moved = onControlledShutdown(
    { state: state({}), live: new Set([1, 2, 3]), uncleanLeaderElection: false },
    1,
  )
  assert.equal(moved?.state.leader, 2)
  assert.ok(!moved?.state.isr.includes(1))
  const alone = onControlledShutdown(
    { state: state({ isr: [1] }), live: new Set([1, 2, 3]), uncleanLeaderElection: false },
    1,
  )
  assert.equal(alone, null)
})

describe('onBrokerRegistered (a new incarnation)', () => {
  test('leadership moves to another live ISR member and the new incarnation leaves the ISR', () => {
    const result = onBrokerRegistered(
      { state: state({}), live: new Set([1, 2, 3]), uncleanLeaderElection: false },
      1,
    )
    assert.equal(result?.state.leader, 2)
    assert.deepEqual(result?.state.isr, [2, 3])
    assert.equal(result?.state.leaderEpoch, 6)
  })

  test('as the last live ISR member and leader it keeps leading, in a new leader epoch', () => {
    const result = onBrokerRegistered(
      { state: state({ isr: [1] }), live: new Set([1, 2, 3]), uncleanLeaderElection: false },
      1,
    )
    assert.equal(result?.state.leader, 1)
    assert.deepEqual(result?.state.isr, [1])
    assert.equal(result?.state.leaderEpoch, 6, 'its previous incarnation is fenced out of epoch 5')
  })

  test('as the last live ISR member but not leader nothing changes', () => {
    const input = { state: state({ isr: [2], leader: 2 }), live: new Set([2]), uncleanLeaderElection: false }
    assert.equal(onBrokerRegistered(input, 3), null)
    assert.equal(
      onBrokerRegistered({ ...input, state: state({ isr: [2, 3], leader: -1 }), live: new Set([3]) }, 3),
      null,
    )
  })
})

describe('eligible leader replicas (KIP-966)', () => {
  const minIsr = 2

  test('a member leaving an ISR below min ISR joins the ELR; the ELR clears at min ISR again', () => {
    const dead2 = onBrokerChange({
      state: state({}),
      live: new Set([1, 3]),
      uncleanLeaderElection: false,
      minIsr,
    })
    assert.deepEqual(dead2?.state.isr, [1, 3])
    assert.equal(dead2?.state.elr, undefined, 'ISR 2 >= min ISR 2: no ELR')
    const dead3 = onBrokerChange({
      state: dead2!.state,
      live: new Set([1]),
      uncleanLeaderElection: false,
      minIsr,
    })
    assert.deepEqual(dead3?.state.isr, [1])
    assert.deepEqual(dead3?.state.elr, [3], '3 left an ISR below min ISR: it holds every committed record')
    assert.deepEqual(withIsr(dead3!.state, [1, 2], minIsr).elr, undefined)
  })

  test('with no live ISR member the first live ELR member is elected cleanly', () => {
    const offline = state({ isr: [1], elr: [3], leader: 1 })
    const result = onBrokerChange({
      state: offline,
      live: new Set([2, 3]),
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
    const s = state({ isr: [1], elr: [2, 3], leader: 1 })
    const cleanBack = onBrokerRegistered(
      { state: s, live: new Set([1, 2]), uncleanLeaderElection: false, minIsr },
      1,
    )
    assert.equal(cleanBack?.state.leader, 1, 'clean: what it holds is all there is')
    const uncleanBack = onBrokerRegistered(
      { state: s, live: new Set([1, 2]), uncleanLeaderElection: false, minIsr },
      1,
      true,
    )
    assert.equal(uncleanBack?.state.leader, 2, 'the live ELR member holds what broker 1 may have lost')
    assert.deepEqual(uncleanBack?.state.isr, [2])
    assert.deepEqual(uncleanBack?.state.elr, [3], 'not broker 1: it may lack committed records')
    assert.deepEqual(uncleanBack?.state.lastKnownElr, [1])
    const elrMember = onBrokerRegistered(
      { state: uncleanBack!.state, live: new Set([1, 2, 3]), uncleanLeaderElection: false, minIsr },
      3,
      true,
    )
    assert.deepEqual(elrMember?.state.elr, [])
    assert.deepEqual(elrMember?.state.lastKnownElr, [1, 3])
  })
})

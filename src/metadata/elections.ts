/**
 * Leader election and ISR fencing as pure functions of (partition state, live brokers,
 * settings) → next state, so the controller, controlled shutdown, ElectLeaders and the
 * deterministic simulation all share one set of rules:
 *
 * - a clean election picks the first replica, in assignment order, that is live and in the
 *   ISR (it holds every committed record);
 * - with unclean election enabled and no live ISR member, the first live replica leads and
 *   the ISR restarts with it alone: committed records it lacks are lost (logged, counted);
 * - otherwise the partition stays offline (leader -1) and keeps its last ISR member, so the
 *   broker holding the committed data is the one elected when it returns;
 * - dead brokers leave the ISR, never below one member;
 * - every leader change bumps the leader epoch; a state that does not change is null.
 */
import { type BrokerId, NO_LEADER, type PartitionState } from './cluster-image.js'

export interface ElectionInput {
  readonly state: PartitionState
  readonly live: ReadonlySet<BrokerId>
  readonly uncleanLeaderElection: boolean
}

export interface ElectionResult {
  readonly state: PartitionState
  /** True when the new leader came from outside the ISR. */
  readonly unclean: boolean
}

/** Reacts to broker liveness: fences dead ISR members and elects when the leader is gone. */
export function onBrokerChange(input: ElectionInput): ElectionResult | null {
  const { state, live } = input
  const liveIsr = state.isr.filter((id) => live.has(id))
  const leaderAlive = state.leader !== NO_LEADER && live.has(state.leader)
  if (leaderAlive) {
    if (liveIsr.length === state.isr.length) return null
    return { state: { ...state, isr: liveIsr }, unclean: false }
  }
  return elect(input)
}

/** Moves leadership to the preferred (first) replica when it is live and in the ISR. */
export function electPreferred(input: ElectionInput): ElectionResult | null {
  const preferred = input.state.replicas[0]
  if (input.state.leader === preferred) return null
  if (!input.live.has(preferred) || !input.state.isr.includes(preferred)) return null
  return { state: withLeader(input.state, preferred, input.state.isr), unclean: false }
}

/** Controlled shutdown of `leaving`: leadership moves to another live ISR member first. */
export function onControlledShutdown(input: ElectionInput, leaving: BrokerId): ElectionResult | null {
  const live = new Set([...input.live].filter((id) => id !== leaving))
  const { state } = input
  const others = state.isr.filter((id) => id !== leaving && live.has(id))
  if (state.leader !== leaving) {
    if (!state.isr.includes(leaving) || others.length === 0) return null
    return { state: { ...state, isr: state.isr.filter((id) => id !== leaving) }, unclean: false }
  }
  if (others.length === 0) return null // the only ISR member: stay, a clean stop loses nothing
  return elect({ ...input, live })
}

/**
 * `registered` just registered: to the metadata it is a new process. Its log may have lost
 * unflushed bytes (an unclean restart), and no controller may have seen it go (its old
 * registration expired while none was active), so it must not resume leading or count as
 * in sync: leadership moves to another live ISR member and it leaves every ISR that keeps
 * another live member, rejoining once caught up (Kafka fences a new broker epoch the same
 * way). As the last live ISR member it stays: what it holds is all there is; as its
 * leader it leads in a new leader epoch, so its previous incarnation (which may register
 * over a live predecessor, and may still be running) is fenced out of the old one.
 */
export function onBrokerRegistered(input: ElectionInput, registered: BrokerId): ElectionResult | null {
  const { state, live } = input
  if (!state.isr.includes(registered)) return null
  const others = state.isr.filter((id) => id !== registered && live.has(id))
  if (others.length === 0) {
    if (state.leader !== registered) return null
    return { state: withLeader(state, registered, state.isr), unclean: false }
  }
  if (state.leader !== registered) {
    return { state: { ...state, isr: state.isr.filter((id) => id !== registered) }, unclean: false }
  }
  const leader = state.replicas.find((id) => others.includes(id)) ?? others[0]
  return { state: withLeader(state, leader, others), unclean: false }
}

function elect(input: ElectionInput): ElectionResult | null {
  const { state, live } = input
  const clean = state.replicas.find((id) => live.has(id) && state.isr.includes(id))
  if (clean !== undefined) {
    const isr = state.isr.filter((id) => live.has(id))
    return { state: withLeader(state, clean, isr), unclean: false }
  }
  if (input.uncleanLeaderElection) {
    const any = state.replicas.find((id) => live.has(id))
    if (any !== undefined) return { state: withLeader(state, any, [any]), unclean: true }
  }
  if (state.leader === NO_LEADER) return null
  // Offline: keep the last ISR member (the one with every committed record) for its return.
  const lastIsr = state.isr.includes(state.leader) ? [state.leader] : state.isr.slice(0, 1)
  return {
    state: { ...state, leader: NO_LEADER, isr: lastIsr, leaderEpoch: state.leaderEpoch + 1 },
    unclean: false,
  }
}

function withLeader(state: PartitionState, leader: BrokerId, isr: readonly BrokerId[]): PartitionState {
  return {
    ...state,
    leader,
    isr: isr.includes(leader) ? isr : [leader, ...isr],
    leaderEpoch: state.leaderEpoch + 1,
  }
}

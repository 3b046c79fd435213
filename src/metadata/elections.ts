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
 * - KIP-966: a replica leaving an ISR below min.insync.replicas joins the eligible leader
 *   replicas (ELR; the high watermark does not advance below min ISR, so it holds every
 *   committed record); with no live ISR member the first live ELR member is elected
 *   cleanly; the ELR is cleared once the ISR is back at min ISR;
 * - KIP-966's unclean recovery: when the last ISR member comes back from an unclean
 *   shutdown and a last-known-ELR member (back uncleanly too) has a longer log, that one
 *   leads: the last ISR member may have lost unflushed committed records the other kept;
 * - every leader change bumps the leader epoch; a state that does not change is null.
 */
import {
  type BrokerId,
  type ClusterImage,
  type LogEnd,
  NO_LEADER,
  type PartitionState,
  type TopicImage,
} from './cluster-image.js'

export interface ElectionInput {
  readonly state: PartitionState
  readonly live: ReadonlySet<BrokerId>
  readonly uncleanLeaderElection: boolean
  /** The topic's min.insync.replicas; absent: 1 (no ISR is ever below it, so no ELR). */
  readonly minIsr?: number
}

/**
 * `state` with `isr` as its ISR and KIP-966's ELR kept: below `minIsr` the members that
 * left join the ELR; at or above it the ELR (and the last known ELR) is cleared.
 */
export function withIsr(state: PartitionState, isr: readonly BrokerId[], minIsr = 1): PartitionState {
  // A min ISR above the replication factor counts as the replication factor (as the HW rule).
  if (isr.length >= Math.min(minIsr, state.replicas.length)) {
    const { elr: _elr, lastKnownElr: _lastKnown, recoveryLogEnds: _ends, ...rest } = state
    return { ...rest, isr: [...isr] }
  }
  const left = state.isr.filter((id) => !isr.includes(id))
  const elr = [...new Set([...(state.elr ?? []), ...left])].filter((id) => !isr.includes(id))
  return { ...state, isr: [...isr], elr }
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
    return { state: withIsr(state, liveIsr, input.minIsr), unclean: false }
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
    return {
      state: withIsr(
        state,
        state.isr.filter((id) => id !== leaving),
        input.minIsr,
      ),
      unclean: false,
    }
  }
  if (others.length === 0) return null // the only ISR member: stay, a clean stop loses nothing
  return elect({ ...input, live })
}

/**
 * The controlled shutdown of `leaving` over the whole image (onControlledShutdown per
 * partition): one change, so ClusterMetadata.update writes every leadership move and ISR
 * shrink in as few store transactions as the store's limits allow, and every other broker
 * applies them in as few images. The image itself when nothing moves.
 */
export function movedAwayFrom(
  image: ClusterImage,
  leaving: BrokerId,
  minIsrOf: (topic: string) => number | undefined,
): ClusterImage {
  const live = new Set(image.brokers.keys())
  let topics: Map<string, TopicImage> | null = null
  for (const topic of image.topics.values()) {
    let partitions: PartitionState[] | null = null
    const minIsr = minIsrOf(topic.name)
    for (const state of topic.partitions) {
      const result = onControlledShutdown({ state, live, uncleanLeaderElection: false, minIsr }, leaving)
      if (!result) continue
      partitions ??= [...topic.partitions]
      partitions[state.partition] = result.state
    }
    if (partitions === null) continue
    topics ??= new Map(image.topics)
    topics.set(topic.name, { ...topic, partitions })
  }
  return topics === null ? image : { ...image, topics }
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
 *
 * After an `unclean` shutdown (it may have lost unflushed records) it also leaves the ELR
 * (for the last known ELR), and as the last ISR member it gives way to a live ELR member
 * when there is one (KIP-966): the ELR holds every committed record, it may not. With ELR
 * members none of which is live, the partition waits offline for the first of them (it
 * takes the ISR place). Failing those, it gives way to a live last-known-ELR member whose
 * reported log (`logEnd`, latest leader epoch then end offset) is longer than its own.
 */
export function onBrokerRegistered(
  input: ElectionInput,
  registered: BrokerId,
  unclean = false,
  logEnd?: LogEnd,
): ElectionResult | null {
  const { live } = input
  const state = unclean ? recordLogEnd(leaveElr(input.state, registered), registered, logEnd) : input.state
  const changed = state !== input.state
  if (!state.isr.includes(registered)) return changed ? { state, unclean: false } : null
  const others = state.isr.filter((id) => id !== registered && live.has(id))
  if (others.length === 0) {
    const elrLeader = unclean
      ? state.replicas.find((id) => live.has(id) && state.elr?.includes(id))
      : undefined
    if (elrLeader !== undefined) {
      const elected = electFromElr({ ...input, state }, elrLeader)
      // Reported again: the election cleared the log ends, but `registered` has followed
      // nobody since it reported, and the ELR member may yet come back uncleanly too.
      return { state: recordLogEnd(leaveElr(elected.state, registered), registered, logEnd), unclean: false }
    }
    if (unclean && (state.elr?.length ?? 0) > 0) return { state: awaitElr(state, registered), unclean: false }
    const longer = unclean ? longerLastKnownElr(state, registered, live) : undefined
    if (longer !== undefined) return { state: recoverFrom(state, longer, registered), unclean: false }
    if (state.leader !== registered) return changed ? { state, unclean: false } : null
    return { state: withLeader(state, registered, state.isr), unclean: false }
  }
  const isr = state.isr.filter((id) => id !== registered)
  // An unclean member lost what it did not flush: it may not join the ELR either.
  const after = unclean
    ? leaveElr(withIsr(state, isr, input.minIsr), registered)
    : withIsr(state, isr, input.minIsr)
  if (state.leader !== registered) return { state: after, unclean: false }
  const leader = state.replicas.find((id) => others.includes(id)) ?? others[0]
  return { state: withLeader(after, leader, others), unclean: false }
}

/** `id` leaves the ELR for the last known ELR (an unclean shutdown); `state` when not a member. */
function leaveElr(state: PartitionState, id: BrokerId): PartitionState {
  if (!state.elr?.includes(id)) return state
  return {
    ...state,
    elr: state.elr.filter((member) => member !== id),
    lastKnownElr: [...new Set([...(state.lastKnownElr ?? []), id])],
  }
}

/**
 * After an unclean shutdown `id` reports what its log holds, if it is a member whose log may
 * be compared later: in the ISR, the ELR or the last known ELR.
 */
function recordLogEnd(state: PartitionState, id: BrokerId, logEnd: LogEnd | undefined): PartitionState {
  const member = state.isr.includes(id) || state.elr?.includes(id) || state.lastKnownElr?.includes(id)
  if (!member || (logEnd === undefined && state.recoveryLogEnds?.[String(id)] === undefined)) return state
  const { [String(id)]: _previous, ...others } = state.recoveryLogEnds ?? {}
  const recoveryLogEnds = logEnd === undefined ? others : { ...others, [String(id)]: logEnd }
  return { ...state, recoveryLogEnds }
}

/** Latest leader epoch first, then end offset (as KIP-966's unclean recovery ranks replicas). */
function compareLogEnds(a: LogEnd | undefined, b: LogEnd | undefined): number {
  if (a === undefined || b === undefined) return a === b ? 0 : a === undefined ? -1 : 1
  return a.leaderEpoch !== b.leaderEpoch ? a.leaderEpoch - b.leaderEpoch : a.endOffset - b.endOffset
}

/** The live last-known-ELR member with the longest reported log, if longer than `than`'s. */
function longerLastKnownElr(
  state: PartitionState,
  than: BrokerId,
  live: ReadonlySet<BrokerId>,
): BrokerId | undefined {
  const ends = state.recoveryLogEnds ?? {}
  let best: BrokerId | undefined
  for (const id of state.lastKnownElr ?? []) {
    if (id === than || !live.has(id) || ends[String(id)] === undefined) continue
    if (best === undefined || compareLogEnds(ends[String(id)], ends[String(best)]) > 0) best = id
  }
  if (best === undefined || compareLogEnds(ends[String(best)], ends[String(than)]) <= 0) return undefined
  return best
}

/**
 * `registered`, the last ISR member, is back uncleanly while no ELR member is live: the first
 * ELR member (which holds every committed record) takes the ISR place and the partition
 * waits offline for it, as Kafka 4 elects only an unfenced ELR member. Electing the
 * returning broker would make followers truncate the committed records it lost.
 */
function awaitElr(state: PartitionState, registered: BrokerId): PartitionState {
  const elr = state.elr ?? []
  const holder = state.replicas.find((id) => elr.includes(id)) ?? elr[0]
  return {
    ...state,
    isr: [holder],
    elr: elr.filter((id) => id !== holder),
    lastKnownElr: [...new Set([...(state.lastKnownElr ?? []), registered])],
    leader: NO_LEADER,
    // Its previous incarnation may still lead in this epoch: a new one fences it out.
    leaderEpoch: state.leader === NO_LEADER ? state.leaderEpoch : state.leaderEpoch + 1,
  }
}

/** `leader` (a last-known-ELR member) leads alone; `replaced`, the last ISR member, takes its place there. */
function recoverFrom(state: PartitionState, leader: BrokerId, replaced: BrokerId): PartitionState {
  const lastKnownElr = [...(state.lastKnownElr ?? []).filter((id) => id !== leader), replaced]
  return withLeader({ ...state, isr: [leader], lastKnownElr }, leader, [leader])
}

/** A clean election from the ELR: `leader` leads alone; the ISR members it replaces join the ELR. */
function electFromElr(input: ElectionInput, leader: BrokerId): ElectionResult {
  const { state } = input
  const others = state.isr.filter((id) => id !== leader)
  const elr = [...new Set([...(state.elr ?? []), ...others])].filter((id) => id !== leader)
  return { state: withLeader({ ...state, isr: [leader], elr }, leader, [leader]), unclean: false }
}

function elect(input: ElectionInput): ElectionResult | null {
  const { state, live } = input
  const clean = state.replicas.find((id) => live.has(id) && state.isr.includes(id))
  if (clean !== undefined) {
    const isr = state.isr.filter((id) => live.has(id))
    return { state: withLeader(withIsr(state, isr, input.minIsr), clean, isr), unclean: false }
  }
  const elrLeader = state.replicas.find((id) => live.has(id) && state.elr?.includes(id))
  if (elrLeader !== undefined) return electFromElr(input, elrLeader)
  if (input.uncleanLeaderElection) {
    const any = state.replicas.find((id) => live.has(id))
    if (any !== undefined) {
      const { elr: _elr, lastKnownElr: _lastKnown, recoveryLogEnds: _ends, ...rest } = state
      return { state: withLeader(rest, any, [any]), unclean: true }
    }
  }
  if (state.leader === NO_LEADER) return null
  // Offline: keep the last ISR member (the one with every committed record) for its return.
  const lastIsr = state.isr.includes(state.leader) ? [state.leader] : state.isr.slice(0, 1)
  return {
    state: {
      ...withIsr(state, lastIsr, input.minIsr),
      leader: NO_LEADER,
      leaderEpoch: state.leaderEpoch + 1,
    },
    unclean: false,
  }
}

/**
 * A new leader in a new epoch. Reported log ends go: once a leader serves, followers truncate
 * and append, and what an offline replica had no longer says what it has.
 */
function withLeader(state: PartitionState, leader: BrokerId, isr: readonly BrokerId[]): PartitionState {
  const { recoveryLogEnds: _ends, ...rest } = state
  return {
    ...rest,
    leader,
    isr: isr.includes(leader) ? isr : [leader, ...isr],
    leaderEpoch: state.leaderEpoch + 1,
  }
}

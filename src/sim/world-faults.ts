/**
 * The safety phase's faults: a seeded schedule of crashes (with or without power loss),
 * network partitions and delays, store session expiries, store-link stalls, preferred-leader
 * elections and disk errors, at most one impaired broker at a time (two with
 * `twoImpairments`), and their recovery. Apart from world.ts so the fault model reads as
 * one piece; its random streams are the world's, drawn in the same order as before.
 */

import type { BrokerId } from '../common/types.js'
import { SimRandom } from './random.js'
import type { SimBroker } from './sim-broker.js'
import type { WorldInternals } from './world-internals.js'
import { TOPIC } from './world-view.js'

/** Store stalls (`storeStalls`): how long the link stalls, and the range of one trip then. */
const STALL_MS = [3000, 5000] as const
const STALL_TRIP_MS = [2000, 4000] as const
/** `scalePartitions`: the share of crash slots that are controlled shutdowns instead. */
const CONTROLLED_SHUTDOWN_SHARE = 0.35
/** A broker process that failed to start is started again after this (as a service manager would). */
const RESTART_DELAY_MS = 1000

export class FaultSchedule {
  /** Brokers crashed or cut off: at most one at a time (the single failure the design claims to survive). */
  readonly impaired = new Set<BrokerId>()
  /** Brokers with a disk error armed or fired: recovery disarms it and restarts a stopped process. */
  private readonly diskFailed = new Set<BrokerId>()
  private on = true
  /** `scalePartitions`: its own stream (crash or controlled shutdown), so the fault stream keeps its draws. */
  private readonly scaleRandom: SimRandom | null

  /** `diskErrorRandom`: disk errors' own stream (`diskErrors`), so the fault stream keeps its draws. */
  constructor(
    private readonly world: WorldInternals,
    private readonly random: SimRandom,
    private readonly diskErrorRandom: SimRandom,
  ) {
    this.scaleRandom =
      (world.options.scalePartitions ?? 0) > 0 ? new SimRandom(world.options.seed ^ 0x5d0f) : null
  }

  /** No new fault from now on (the liveness phase). */
  stop(): void {
    this.on = false
  }

  /** Starts the schedule: a fault every 0.3-2.5 s until `stop`. */
  start(): void {
    const next = (): void => {
      if (!this.on) return
      this.injectFault()
      this.world.scheduler.schedule(this.random.int(300, 2500), next)
    }
    this.world.scheduler.schedule(this.random.int(500, 1500), next)
  }

  private injectFault(): void {
    const r = this.random
    const choice = r.int(0, 9)
    const up = this.world.brokerIds.filter(
      (id) => this.world.brokers.get(id)?.isAlive && !this.impaired.has(id),
    )
    const maxImpaired = this.world.options.twoImpairments === true ? 2 : 1
    if (choice <= 2 && this.impaired.size < maxImpaired && up.length > 0) {
      const victim = r.pick(up)
      if (this.scaleRandom?.chance(CONTROLLED_SHUTDOWN_SHARE) === true && this.world.isUp(victim))
        this.controlledShutdown(victim)
      else this.crash(victim)
    } else if (choice === 3 && this.impaired.size === 0) {
      const victim = r.pick(up)
      const twoWay = r.chance(0.5)
      for (const other of this.world.brokerIds) {
        if (other === victim) continue
        this.world.network.cutLink(victim, other)
        if (twoWay) this.world.network.cutLink(other, victim)
      }
      this.impaired.add(victim)
      this.world.stats.partitions++
      this.world.log(
        `FAULT partition broker ${victim} from the others (${twoWay ? 'two-way' : 'outbound only'})`,
      )
    } else if (choice === 4) {
      const victim = r.pick(up)
      const broker = this.world.brokers.get(victim)!
      if (broker.lease) {
        this.world.stats.sessionExpiries++
        this.world.log(`FAULT expire the store session of broker ${victim}`)
        broker.expireSession().catch(() => undefined)
      }
    } else if (choice === 5) {
      const reset = r.chance(0.5) ? 0 : 0.02
      const slow = r.chance(0.3)
      this.world.network.faults = {
        delayMinMs: 1,
        delayMaxMs: slow ? r.int(50, 1500) : 5,
        resetProbability: reset,
      }
      this.world.log(
        `FAULT network delay 1-${this.world.network.faults.delayMaxMs} ms, reset probability ${reset}`,
      )
    } else if (choice === 6 && this.world.storeLatencyMaxMs > 0) {
      this.storeFault()
    } else if (this.impaired.size > 0 && choice >= 7) {
      this.recover([...this.impaired][0])
    } else if (this.world.options.storeStalls === true && r.chance(0.5)) {
      this.storeFault()
    } else if (
      this.world.options.diskErrors === true &&
      this.impaired.size === 0 &&
      this.diskErrorRandom.chance(0.3)
    ) {
      this.armDiskError(this.diskErrorRandom.pick(up))
    }
  }

  /** The next write or fsync on `id`'s disk fails with EIO; it is the impaired broker until restarted. */
  private armDiskError(id: BrokerId): void {
    const kind = this.diskErrorRandom.chance(0.5) ? 'write' : 'sync'
    const disk = this.world.disks.get(id)!
    disk.armedError = kind
    disk.onErrorFired = (what) => {
      this.world.stats.diskErrors++
      const led = (this.world.truth?.image().topics.get(TOPIC)?.partitions ?? []).filter(
        (s) => s.leader === id,
      )
      this.world.log(
        `DISK ERROR on broker ${id}: EIO on ${what}; leader in the store of ${led.map((s) => `p${s.partition}`).join(',') || 'nothing'}`,
      )
    }
    this.impaired.add(id)
    this.diskFailed.add(id)
    this.world.log(
      `FAULT disk of broker ${id}: its next ${kind === 'write' ? 'write' : 'fsync'} fails with EIO`,
    )
  }

  /**
   * Store latency mode: a preferred-leader election, or with stalls one of the stall faults.
   * A stalled broker is the one impaired broker until it recovers (the stall is lifted):
   * with another broker down meanwhile, a power loss of one ISR member and the session
   * loss of the other leave the power-lost one as the only registered ISR member, two
   * failures at once (seeds 140, 174, 197, 198 of the first stall schedule lost acknowledged writes so).
   */
  private storeFault(): void {
    const kind = this.world.options.storeStalls === true ? this.random.int(0, 2) : 0
    if (kind === 0 || this.impaired.size > 0) this.electPreferredLeaders()
    else if (kind === 1) this.stallLeaderThenMoveIt()
    else this.stallLeaderThenExpireIt()
  }

  private electPreferredLeaders(): void {
    const controller = [...this.world.brokers.values()].find((b) => b.isAlive && b.controller?.isActive)
    if (controller) {
      this.world.log(`ADMIN preferred leader election through controller ${controller.nodeId}`)
      controller.controller?.electPreferredLeaders().catch(() => undefined)
    }
  }

  /**
   * The broker's link to the store stalls (cut off from the store, not from the other
   * brokers): for 3-5 s every trip, watch events and answers included, takes 2-4 s, in order.
   * Its leases are kept alive by the store meanwhile; it learns of their end one trip late.
   */
  private stallStoreLink(victim: SimBroker, why: string): void {
    const r = this.random
    this.impaired.add(victim.nodeId)
    const durationMs = r.int(STALL_MS[0], STALL_MS[1])
    const maxMs = r.int(STALL_TRIP_MS[0], STALL_TRIP_MS[1])
    victim.store.stall = { untilMs: this.world.scheduler.now + durationMs, minMs: STALL_TRIP_MS[0], maxMs }
    this.world.log(
      `FAULT store link of broker ${victim.nodeId} stalls for ${durationMs} ms (trips ${STALL_TRIP_MS[0]}-${maxMs} ms), ${why}`,
    )
  }

  /**
   * A stalled leader loses its leadership to an admin action: the store link of a leader
   * that is not its partition's preferred replica stalls, then leaderships move to preferred
   * replicas. It acts on a leadership it lost, and its ISR proposals land after the newer
   * leadership (what the ISR compare-and-set is for).
   */
  private stallLeaderThenMoveIt(): void {
    const r = this.random
    const states = this.world.truth?.image().topics.get(TOPIC)?.partitions ?? []
    const movable = states.filter(
      (s) =>
        s.leader !== -1 &&
        s.leader !== s.replicas[0] &&
        this.world.isUp(s.leader) &&
        this.world.isUp(s.replicas[0]) &&
        s.isr.includes(s.replicas[0]),
    )
    if (movable.length === 0) {
      this.electPreferredLeaders()
      return
    }
    this.stallStoreLink(this.world.brokers.get(r.pick(movable).leader)!, 'then a preferred leader election')
    this.world.scheduler.schedule(r.int(10, 500), () => {
      if (this.on) this.electPreferredLeaders()
    })
  }

  /**
   * A zombie leader: the store link of a broker leading some partition stalls, then the store
   * ends its session (its keep-alives were lost). The controller moves its leaderships; it
   * learns of the lost session, and of the new leaders, only when its link recovers.
   */
  private stallLeaderThenExpireIt(): void {
    const r = this.random
    const states = this.world.truth?.image().topics.get(TOPIC)?.partitions ?? []
    const leaders = [...new Set(states.map((s) => s.leader))].filter((id) => this.world.isUp(id))
    if (leaders.length === 0) return
    const victim = this.world.brokers.get(r.pick(leaders))!
    this.stallStoreLink(victim, 'then its session expires')
    this.world.scheduler.schedule(r.int(10, 300), () => {
      if (!this.on || !victim.isAlive) return
      this.world.stats.sessionExpiries++
      this.world.log(`FAULT expire the store session of broker ${victim.nodeId}`)
      victim.expireSession().catch(() => undefined)
    })
  }

  /**
   * `scalePartitions`: broker `id` is asked to stop (SIGTERM): its own controlled shutdown
   * moves its leaderships to other ISR members, then its process exits. It is the impaired
   * broker until a recovery slot restarts it.
   */
  private controlledShutdown(id: BrokerId): void {
    const broker = this.world.brokers.get(id)!
    const led = [...(this.world.truth?.image().topics.values() ?? [])].reduce(
      (n, topic) => n + topic.partitions.filter((s) => s.leader === id).length,
      0,
    )
    this.impaired.add(id)
    this.world.stopsAsked.add(broker)
    this.world.log(`FAULT controlled shutdown of broker ${id}, leader in the store of ${led} partitions`)
    broker
      .stop()
      .catch((error: unknown) =>
        this.world.log(`broker ${id}'s controlled shutdown failed: ${String(error)}`),
      )
  }

  /**
   * Kills broker `id`. A power loss (its page cache gone) only when every partition whose
   * ISR it is in keeps another ISR member: losing the page cache of a whole ISR at once is
   * outside the fault model (see README). Otherwise a process crash: the page cache stays.
   */
  private crash(id: BrokerId): void {
    const broker = this.world.brokers.get(id)!
    const soleIsrOf = this.partitionsWithSoleIsrMember(id)
    const powerLoss = soleIsrOf.length === 0 && this.random.chance(0.7)
    this.world.stats.crashes++
    broker.kill()
    broker.suspendLeases()
    this.impaired.add(id)
    if (!powerLoss) {
      const why = soleIsrOf.length > 0 ? ` (sole ISR member of ${soleIsrOf.join(',')})` : ''
      this.world.log(`FAULT crash broker ${id}: process crash, page cache kept${why}`)
      return
    }
    this.world.disks.get(id)!.crash(0.5)
    const lost = this.world.disks.get(id)!.lastCrash
    this.world.log(
      `FAULT crash broker ${id} with power loss: ${lost.filesReverted} files lost unflushed bytes (${lost.bytesLost} bytes, ${lost.tornTails} torn tails)`,
    )
  }

  /**
   * Partitions whose ISR (as the store has it) holds `id` and no other healthy member: one
   * whose current process is up and registered (a member listed for a process that died,
   * or for one restarted and not registered yet, may have lost its page cache already).
   */
  private partitionsWithSoleIsrMember(id: BrokerId): string[] {
    // The store's own state: a broker's image lags it under store latency (seed 102 with
    // store stalls: a stalled broker's image still listed a second ISR member).
    const truth = this.world.truth?.image()
    if (!truth) return []
    // Registered too: a process whose session ended is out of the controller's live set
    // (the store ISR loses it) and its registration may lag its return.
    const healthy = (m: BrokerId): boolean => {
      const b = this.world.brokers.get(m)
      return b?.isAlive === true && b.started && b.lease !== null && truth.brokers.has(m)
    }
    // Every topic (with `groups`, __consumer_offsets too: its acknowledged commits).
    return [...truth.topics.values()].flatMap((topic) =>
      topic.partitions
        .filter((state) => state.isr.includes(id) && !state.isr.some((m) => m !== id && healthy(m)))
        .map((state) => `${topic.name === TOPIC ? '' : `${topic.name}-`}p${state.partition}`),
    )
  }

  /** Lifts the fault on impaired broker `id`: heals its links, its store link, its disk, or restarts it. */
  recover(id: BrokerId): void {
    this.impaired.delete(id)
    const broker = this.world.brokers.get(id)!
    if (this.diskFailed.delete(id)) {
      const disk = this.world.disks.get(id)!
      const fired = disk.armedError === null
      disk.armedError = null
      if (broker.isAlive) {
        // Its log dir offline, server/broker.ts stops the broker (the process then exits, and
        // the restart below follows as after a crash). Still alive here: the error never fired,
        // or fired on a broker-level checkpoint (only logged, the dir stays online), and the
        // broker carries on; or its controlled stop has not finished (its store calls hang):
        // the process is killed, as an operator would.
        const offline = (broker.broker?.logManager.offlineLogDirs.length ?? 0) > 0
        if (!offline) {
          this.world.log(
            `HEAL disk of broker ${id}: ${fired ? 'the error fired, log dir online' : 'the error never fired'}; it carries on`,
          )
          return
        }
        this.world.log(
          `HEAL disk of broker ${id}: log dir offline, its stop has not finished; the process is killed`,
        )
        broker.kill()
        broker.suspendLeases()
        this.restart(id)
        return
      }
      this.world.log(`HEAL disk of broker ${id}: it had stopped itself; restart`)
    }
    for (const other of this.world.brokerIds) {
      this.world.network.healLink(id, other)
      this.world.network.healLink(other, id)
    }
    if (broker.isAlive && broker.isStopping) {
      // A controlled shutdown still under way (its store calls stalled): killed, as an operator would.
      this.world.log(`HEAL broker ${id}: its controlled shutdown has not finished; the process is killed`)
      broker.kill()
      broker.suspendLeases()
      this.restart(id)
      return
    }
    if (broker.isAlive) {
      if (broker.store.stall !== null) {
        broker.store.stall = null
        this.world.log(`HEAL store link of broker ${id}`)
      }
      this.world.log(`HEAL network of broker ${id}`)
      return
    }
    this.restart(id)
  }

  /**
   * Starts a new incarnation of broker `id`. One that fails to start (its store calls timed
   * out, its old registration had not expired) exits, as `tidelog broker` does, and is
   * started again a second later, as a service manager would.
   */
  private restart(id: BrokerId): void {
    this.world.startBroker(id).catch((error: unknown) => {
      this.world.log(
        `broker ${id} failed to start: ${String(error)}; the process exits and restarts in ${RESTART_DELAY_MS} ms`,
      )
      const failed = this.world.brokers.get(id)
      if (failed?.isAlive) {
        failed.kill()
        failed.suspendLeases()
      }
      this.world.scheduler.schedule(RESTART_DELAY_MS, () => {
        if (this.world.brokers.get(id) === failed) this.restart(id)
      })
    })
  }
}

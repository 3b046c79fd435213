/**
 * What the world's own parts (world-faults.ts, world-workload.ts, world-liveness.ts, the
 * clients of consumer.ts and idempotent-producer.ts) see of it: more than the clients' WorldView, as an interface
 * that world.ts implements, so those parts import no world.ts and the imports stay one-way.
 */
import type { ClientOptions } from '../client/client.js'
import type { Random } from '../common/random.js'
import type { BrokerId } from '../common/types.js'
import type { SimDisk } from './disk.js'
import type { Invariants } from './invariants.js'
import type { ScaleInvariants } from './invariants-scale.js'
import { SimNetwork } from './network.js'
import type { SimBroker } from './sim-broker.js'
import type { SimOptions, SimResult } from './world-options.js'
import type { WorldView } from './world-view.js'

/** How long a producer of the workload waits for an append's answer. */
export const PRODUCE_TIMEOUT_MS = 3000

export interface WorldInternals extends WorldView {
  readonly options: SimOptions
  readonly stats: SimResult['stats']
  readonly disks: ReadonlyMap<number, SimDisk>
  readonly invariants: Invariants
  /** `scalePartitions`: their checks (invariants-scale.ts), null otherwise. */
  readonly scale: { readonly invariants: ScaleInvariants } | null
  /** Brokers a controlled shutdown fault asked to stop. */
  readonly stopsAsked: WeakSet<SimBroker>
  /** Broker `id` is up: its current process alive and started. */
  isUp(id: BrokerId): boolean
  /** Starts a new incarnation of broker `id` (it settles once the broker is registered). */
  startBroker(id: BrokerId): Promise<void>
  /** Runs events for `durationMs` of simulated time, checking the invariants after each. */
  runFor(durationMs: number): Promise<void>
  /** Runs an invariant check from inside a callback: its violation ends the run after the event. */
  checkInCallback(check: () => void): void
}

/**
 * What tidelog's client (Producer, Consumer) needs to run in the world: the brokers, the
 * simulated network as process `node` (never cut off), the scheduler as its clock and for its
 * deferred work (the producer's drain runs as an event at the same instant, not on Node's
 * event loop), and `random`, a fork of the seed; `beforeWrite` sees what it sends.
 */
export function simClientOptions(
  world: WorldInternals,
  node: number,
  random: Random,
  beforeWrite?: (to: number, chunks: readonly Buffer[]) => void,
): Required<Pick<ClientOptions, 'bootstrapServers' | 'clock' | 'random' | 'connector' | 'defer'>> {
  return {
    bootstrapServers: world.brokerIds.map((id) => `${SimNetwork.hostOf(id)}:9092`),
    clock: world.scheduler,
    random,
    connector: world.network.clientConnector(node, undefined, beforeWrite),
    defer: (callback) => {
      world.scheduler.schedule(0, callback)
    },
  }
}

/**
 * What the simulator's clients and checkers (consumer.ts, group-member.ts, invariants.ts) see
 * of the run: a view that world.ts implements, so those modules need nothing of world.ts
 * itself and the imports stay one-way.
 */
import type { BrokerId } from '../common/types.js'
import type { ClusterMetadata } from '../metadata/cluster-metadata.js'
import type { Mutation } from './mutations.js'
import type { SimNetwork } from './network.js'
import type { SimScheduler } from './scheduler.js'
import type { SimBroker } from './sim-broker.js'

/** The topic every run writes. */
export { TOPIC } from './topic.js'

/** One record a read_committed consumer's poll() returned (txn-checker.ts checks them). */
export interface DeliveredRecord {
  readonly offset: number
  readonly value: string
}

/** An invariant that does not hold: ends the run with the trace. */
export class Violation extends Error {}

/**
 * Per partition of the topic, as an OffsetFetch is sent: the highest acknowledged commit and
 * the highest committed offset an earlier OffsetFetch answer returned. Only what completed
 * before the fetch was sent binds its answer; a fetch still in flight may be overtaken.
 */
export interface OffsetsBeforeFetch {
  readonly acked: ReadonlyMap<number, number>
  readonly fetched: ReadonlyMap<number, number>
}

/** The group checks the offset verifier (group-member.ts) reports to (Invariants implements them). */
export interface GroupChecks {
  onCommitAcked(partition: number, offset: number, member: number): void
  /** Taken as an OffsetFetch is sent: what its answer is held to. */
  offsetsBeforeFetch(): OffsetsBeforeFetch
  onOffsetsFetched(
    from: BrokerId,
    offsetsPartition: number,
    fetched: ReadonlyMap<number, number>,
    before: OffsetsBeforeFetch,
  ): boolean
  onGroupAssignment(generation: number, memberId: string, index: number, partitions: readonly number[]): void
  /** A KIP-848 heartbeat answered NONE with this member epoch. */
  onMemberEpoch(memberId: string, index: number, epoch: number): void
}

export interface WorldView {
  readonly scheduler: SimScheduler
  readonly network: SimNetwork
  readonly brokers: ReadonlyMap<BrokerId, SimBroker>
  readonly brokerIds: readonly BrokerId[]
  readonly partitionCount: number
  /** The topic's min.insync.replicas (the run's option, 2 by default). */
  readonly minInsyncReplicas: number
  /** The store's own state, followed without latency: the ground truth invariants read. */
  readonly truth: ClusterMetadata | null
  /** The largest one-way trip to the store (0: in-process), stalls included in the mode. */
  readonly storeLatencyMaxMs: number
  readonly options: {
    readonly mutation?: Mutation
    readonly consumers?: boolean
    readonly transactions?: boolean
    readonly transactionVersion?: 1 | 2
  }
  readonly invariants: GroupChecks
  log(message: string): void
  /** A group client's failure (an invariant it reported, or a bug in the client): ends the run. */
  groupFailure(error: unknown): void
  /** Any other client's failure (a bug in the client, an invariant it reported): ends the run. */
  clientFailure(error: unknown): void
  /** A read_committed consumer returned these records of `partition` (transactions' checks). */
  onTxnDelivered(partition: number, records: readonly DeliveredRecord[]): void
}

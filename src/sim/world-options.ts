/**
 * What a simulation run is asked to do (SimOptions) and what it reports (SimResult), and
 * the broker properties each option turns on: the run's inputs and outputs, apart from the
 * world that drives it (world.ts), so the CLI and the tests read them without the world.
 */
import type { Mutation } from './mutations.js'

export interface SimOptions {
  readonly seed: number
  /** Simulated milliseconds of the safety phase (faults on). */
  readonly ticks?: number
  readonly brokers?: number
  readonly partitions?: number
  /**
   * The topic's replication factor, 1..3 (default 3). RF 1 makes every partition an ISR of
   * its leader alone: a leader restarted within its session leads again in the same epoch
   * with nothing but a produce to raise its high watermark (issue 41).
   */
  readonly replicationFactor?: number
  /**
   * The topic's min.insync.replicas, 1..RF (default 2, capped at the RF). With 1 an ISR of
   * the leader alone raises the high watermark (below min ISR it stays, KIP-966).
   */
  readonly minInsyncReplicas?: number
  readonly mutation?: Mutation
  /**
   * Random one-way latency to the metadata store, 0..this ms (default 0: in-process). With
   * it, the fault schedule also moves leaders to their preferred replica (an admin action)
   * so a leader can act on a leadership it already lost.
   */
  readonly storeLatencyMaxMs?: number
  /**
   * With store latency (20 ms if not given): the fault schedule also stalls a leader's link
   * to the store and then moves its leadership (preferred election) or ends its session (a
   * zombie leader), and store faults take some of the idle fault slots. A process learns
   * its lease ended one trip late. Off by default.
   */
  readonly storeStalls?: boolean
  /**
   * Two impairments at once: a broker may crash (power loss included, under the same rule)
   * while another is impaired (stalled store link, cut off, crashed). With store stalls this
   * is the schedule where a power-lost broker could be left the last registered ISR member
   * (seeds 140, 174, 197, 198 of the first stall schedule lost acknowledged writes so before
   * KIP-966's ELR). Off by default.
   */
  readonly twoImpairments?: boolean
  /**
   * Adds one idempotent producer per partition (acks=all, one batch in flight, retries of
   * the same bytes on errors and on answers lost with their leader, a new epoch after
   * OUT_OF_ORDER_SEQUENCE_NUMBER): no batch of it may be committed twice. Off by default.
   */
  readonly idempotentProducers?: boolean
  /**
   * Adds one consumer per partition (consumer.ts): Fetch over the simulated network to the
   * leader its metadata names, read_uncommitted; it must receive committed batches only, each
   * equal to the batch committed at its offset, and catch up with the log after healing.
   * Off by default.
   */
  readonly consumers?: boolean
  /**
   * Disk errors: some idle fault slots arm an EIO on one broker's next write (a prefix may
   * reach the page cache) or next fsync. The broker reacts as server/broker.ts does (its
   * log dir goes offline and, with none left, it stops itself, controlled); it is the one
   * impaired broker until a later recovery slot restarts it, as after a crash. Off by
   * default.
   */
  readonly diskErrors?: boolean
  /**
   * Half of the acks=1 writes become acks=0 produces sent over the simulated network to the
   * real Produce handler (no answer; a failure closes the connection). No survival claim,
   * only the invariants. Off by default.
   */
  readonly acksZero?: boolean
  /**
   * The brokers host __consumer_offsets (3 partitions, RF 3) and the real GroupCoordinator;
   * three group members (group-member.ts: tidelog's Consumer subscribed in group mode)
   * consume the topic and commit what they consumed, a verifier reads the commits back.
   * Off by default.
   */
  readonly groups?: boolean
  /**
   * With `groups`: the members use KIP-848's consumer protocol (groupProtocol 'consumer':
   * ConsumerGroupHeartbeat, OffsetCommit v9 with member epochs) instead of the classic one.
   */
  readonly consumerProtocol?: boolean
  /**
   * Transactions: __transaction_state (3 partitions, RF 3), the real coordinator, tidelog's
   * transactional producers (txn-producer.ts; `transactionVersion`, the cluster's finalized
   * transaction.version: 1 by default, 2: KIP-890 part 2), a read_committed consumer per
   * partition (consumer.ts, READ_COMMITTED_CONSUMER); txn-checker.ts holds the checks. Off by default.
   */
  readonly transactions?: boolean
  readonly transactionVersion?: 1 | 2
  /**
   * With `groups` or `transactions`: __consumer_offsets and __transaction_state get 4 KiB
   * segments and the log cleaner a 500 ms backoff, so their logs are compacted while faults
   * truncate and restart replicas; the invariants then check every log's cleaner checkpoint
   * against its log end. Off by default (it changes the seeds' event order).
   */
  readonly compaction?: boolean
  /**
   * Scale: this many partitions more (thousands), RF 3, created during the safety phase by
   * two CreateTopics requests sent at once (one topic of half of them, 20-partition topics
   * for the rest: scale-admin.ts), nothing produced to them, while the faults run; some
   * crashes become controlled shutdowns. invariants-scale.ts checks failover within the
   * session plus 2 s, atomic creation and images converging to the store's. Off (0) by
   * default.
   */
  readonly scalePartitions?: number
  /**
   * A share group (share-workload.ts): tidelog's own idempotent Producer and three
   * ShareConsumers over the simulated network; invariants-share.ts checks that an ACCEPTed
   * record is never delivered again, no delivery count exceeds the limit (3 here) and no
   * acknowledged record is lost. The brokers host __consumer_offsets and __share_group_state
   * (3 partitions each). Off by default.
   */
  readonly share?: boolean
  /** Keep the broker logs in the trace (debug aid; the trace gets long). */
  readonly verbose?: boolean
}

export interface SimResult {
  readonly seed: number
  readonly ok: boolean
  readonly violation: string | null
  readonly trace: readonly string[]
  readonly stats: {
    simulatedMs: number
    events: number
    produced: number
    ackedAll: number
    ackedOne: number
    crashes: number
    sessionExpiries: number
    partitions: number
    diskErrors: number
    /** The most logs of one broker process that held a cleaner checkpoint at a check. */
    cleanerCheckpoints: number
    /** `scalePartitions`: the longest wait for a possible failover (invariants-scale.ts). */
    failoverMaxMs: number
  }
}

/** `groups`: few __consumer_offsets partitions, a short first-rebalance delay, small segments. */
const GROUP_PROPERTIES: readonly [string, string][] = [
  ['offsets.topic.num.partitions', '3'],
  ['offsets.topic.replication.factor', '3'],
  ['group.initial.rebalance.delay.ms', '300'],
  ['group.min.session.timeout.ms', '1000'],
  ['offsets.topic.segment.bytes', String(1024 * 1024)],
  // KIP-848 members (`consumerProtocol`): sessions as short as the classic members' (3 s).
  ['group.consumer.session.timeout.ms', '3000'],
  ['group.consumer.heartbeat.interval.ms', '300'],
]
/**
 * `transactions`: few __transaction_state partitions (Kafka's 50 would be most of the
 * simulated work), small segments, and timed-out transactions aborted within a second
 * (Kafka's cleanup interval is 10 s; the producers ask for a 5 s transaction timeout).
 */
const TXN_PROPERTIES: readonly [string, string][] = [
  ['transaction.state.log.num.partitions', '3'],
  ['transaction.state.log.replication.factor', '3'],
  ['transaction.state.log.min.isr', '2'],
  ['transaction.state.log.segment.bytes', String(1024 * 1024)],
  ['transaction.abort.timed.out.transaction.cleanup.interval.ms', '1000'],
]
/**
 * `share`: a low delivery count limit and short locks and sessions so that a 20 s run sees
 * records archived at the limit and locks expire, new share-partitions starting at the log
 * start (the producer starts with the consumers), few __share_group_state partitions and
 * frequent snapshots among its updates.
 */
const SHARE_PROPERTIES: readonly [string, string][] = [
  ['group.share.delivery.count.limit', '3'],
  ['group.share.record.lock.duration.ms', '2000'],
  ['group.share.heartbeat.interval.ms', '500'],
  ['group.share.session.timeout.ms', '3000'],
  ['tidelog.share.auto.offset.reset', 'earliest'],
  ['share.coordinator.state.topic.num.partitions', '3'],
  ['share.coordinator.state.topic.replication.factor', '3'],
  ['share.coordinator.state.topic.min.isr', '2'],
  ['share.coordinator.snapshot.update.records.per.snapshot', '10'],
]
/** `compaction`: segments small enough for the cleaner to have work in a 20 s run. */
const COMPACTION_PROPERTIES: readonly [string, string][] = [
  ['offsets.topic.segment.bytes', '4096'],
  ['transaction.state.log.segment.bytes', '4096'],
  ['log.cleaner.backoff.ms', '500'],
]
/**
 * Every broker's properties (the real Broker reads them as `tidelog broker` does): short
 * timeouts and small fetches so that a 20 s run sees many rounds, and the leader imbalance
 * check every 5 s so that auto leader rebalance (on by default) runs too.
 */
const BROKER_PROPERTIES: readonly [string, string][] = [
  ['broker.session.timeout.ms', '3000'],
  ['replica.lag.time.max.ms', '2000'],
  ['replica.fetch.max.bytes', String(64 * 1024)],
  ['replica.fetch.response.max.bytes', String(256 * 1024)],
  ['replica.fetch.wait.max.ms', '200'],
  ['replica.fetch.backoff.ms', '100'],
  ['replica.socket.timeout.ms', '1000'],
  ['leader.imbalance.check.interval.seconds', '5'],
  // The disk is memory: Kafka's 10 MiB index preallocation is 20 MiB a replica, 18 GiB for
  // 300 partitions at RF 3. 64 KiB still holds thousands of entries (a run writes hundreds).
  ['log.index.size.max.bytes', String(64 * 1024)],
]

/**
 * `scalePartitions`: 4 KiB indexes (512 offset entries: 2 MiB of log at the 4 KiB index
 * interval, more than a run writes to a partition). At 64 KiB, creating 3,000 partitions on
 * 3 brokers allocated and zeroed over a GiB of simulated index files, the largest cost of a run.
 */
const SCALE_PROPERTIES: readonly [string, string][] = [['log.index.size.max.bytes', '4096']]

/** The properties every broker process of a run starts with, by its options. */
export function brokerProperties(options: SimOptions): Map<string, string> {
  return new Map([
    ...BROKER_PROPERTIES,
    ...(options.groups === true || options.transactions === true || options.share === true
      ? GROUP_PROPERTIES
      : []),
    ...(options.share === true ? SHARE_PROPERTIES : []),
    ...(options.transactions === true ? TXN_PROPERTIES : []),
    ...(options.compaction === true ? COMPACTION_PROPERTIES : []),
    ...((options.scalePartitions ?? 0) > 0 ? SCALE_PROPERTIES : []),
  ])
}

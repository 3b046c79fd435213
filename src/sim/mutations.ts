/**
 * Mutation checks: planted bugs the simulator must catch (README, "Mutation check"). They
 * live here, not behind switches in production code: a mutation replaces one method of a
 * real class for the length of one run (`plant` returns the undo), so the broker code under
 * test is the shipped code with exactly one rule broken.
 */
import { rangeAssignor } from '../client/group/assignors.js'
import { partitionKey, type SequencedBatch, TransactionManager } from '../client/transaction-manager.js'
import type { BrokerId, Offset } from '../common/types.js'
import type { Effects } from '../coordinator/effects.js'
import type { Group } from '../coordinator/group.js'
import { GroupCoordinator } from '../coordinator/group-coordinator.js'
import { GroupCoordinatorShard } from '../coordinator/group-coordinator-shard.js'
import { TransactionMarkerSender } from '../coordinator/transaction/transaction-marker-sender.js'
import { CoordinatorTransactionVerifier } from '../coordinator/transaction/transaction-verifier.js'
import type { ClusterImage, PartitionState } from '../metadata/cluster-image.js'
import { ClusterMetadata, type ImageDiff } from '../metadata/cluster-metadata.js'
import type { MetadataStore, StoreOp, VersionCompare, WatchEvent } from '../metadata/store/metadata-store.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { AlterPartitionManager } from '../replication/alter-partition-manager.js'
import type { BrokerClient } from '../replication/broker-client.js'
import { type IsolationLevel, type IsrProposal, Partition } from '../replication/partition.js'
import { LeaderFetcher } from '../replication/replica-fetcher.js'
import { ReplicaManager } from '../replication/replica-manager.js'
import { type FetchSession, FetchSessionCache, type SessionPartition } from '../server/fetch-session-cache.js'
import { LogSegment } from '../storage/log-segment.js'
import {
  plantShareAckAnsweredUnwritten,
  plantShareReadBeforeDroppedWrite,
  plantShareReleaseIgnoresLimit,
  plantShareStateOpsUnordered,
} from './mutations-share.js'
import { TOPIC } from './topic.js'

export type Mutation =
  | 'none'
  /** The topic allows unclean leader election (a replica outside the ISR may lead). */
  | 'unclean-election'
  /** The ISR write skips its compare-and-set on leader and epochs. */
  | 'isr-without-cas'
  /** Followers truncate to their high watermark instead of asking where their epoch ends (pre-KIP-101). */
  | 'hw-truncation'
  /** With `consumers`: a read_uncommitted fetch of topic sim is served up to the log end, as a follower's. */
  | 'consumer-reads-log-end'
  /** A leader adds a caught-up follower to the ISR even when it is not registered (KIP-841 undone). */
  | 'isr-readds-unregistered'
  /** A follower's truncation is not fsynced before what it writes next (seeds 5 and 91's bug). */
  | 'truncation-not-fsynced'
  /** With `transactions`: a leader appends a transactional batch that opens a transaction without asking the coordinator (KIP-890 part 1 undone). */
  | 'txn-skips-verification'
  /** With `transactions`: tidelog's client aborts after a failed batch without KIP-360's epoch bump and reuses the batch's sequence. */
  | 'txn-client-skips-epoch-bump'
  /** With `transactions`: the coordinator's marker sender leaves out the last partition of the topic a transaction spans. */
  | 'txn-marker-skips-partition'
  /** With `transactions`: the group coordinator makes a transaction's pending offsets visible on its ABORT marker too. */
  | 'txn-offsets-on-abort'
  /** read_committed consumers are served as read_uncommitted: up to the HW, past open transactions, no aborted list. */
  | 'read-committed-ignores-transactions'
  /** With `groups` (classic): the leader's range assignor also hands the first member's partitions to the last. */
  | 'range-assigns-twice'
  /** With `consumerProtocol`: a consumer-group write refused before reaching the log is kept in memory (seed 109's bug). */
  | 'consumer-write-not-undone'
  /** A metadata change goes to the store as one transaction, whatever the store's limits (issue 39's bug). */
  | 'metadata-writes-unsplit'
  /** A new topic's record is written before its partitions, so a topic can be seen in part (issue 38's check). */
  | 'topic-creation-unstaged'
  /** With `scalePartitions`: a broker's view of the store misses some ISR updates of scale-big's partitions. */
  | 'image-drops-updates'
  /** A leader whose ISR change is refused waits for the next fetch or produce to raise its HW (seed 5 of `--scale 1000`'s bug). */
  | 'hw-kept-after-isr-refusal'
  /** A broker whose store session starts does not raise the HWs of the partitions it leads (issue 41's bug). */
  | 'hw-not-raised-on-session'
  /** A broker process's first registration keeps its predecessor's leaderships and ISR places (seed 36's bug). */
  | 'registration-keeps-leaderships'
  /** A leader's fetch session leaves out partitions of topic ids it does not know yet (seed 11's bug). */
  | 'fetch-session-drops-unknown-topic'
  /** Any image change drops a leader's ISR change in flight, so the HW stops counting a member being added (seed 33's bug). */
  | 'pending-isr-dropped-on-image-change'
  /** With `share`: an acknowledgement is answered without writing the share-partition's state. */
  | 'share-ack-answered-unwritten'
  /** With `share`: a record released at the delivery count limit is made available again. */
  | 'share-release-ignores-limit'
  /** With `share`: the share coordinator runs a key's operations at once, each on the committed state (seed 7's bug). */
  | 'share-state-ops-unordered'
  /** With `share`: a share-partition made again reads its state before the dropped one's last write lands (seed 202's bug). */
  | 'share-read-before-dropped-write'

export const MUTATIONS: readonly Mutation[] = [
  'none',
  'unclean-election',
  'isr-without-cas',
  'hw-truncation',
  'consumer-reads-log-end',
  'isr-readds-unregistered',
  'truncation-not-fsynced',
  'txn-skips-verification',
  'txn-client-skips-epoch-bump',
  'txn-marker-skips-partition',
  'txn-offsets-on-abort',
  'read-committed-ignores-transactions',
  'range-assigns-twice',
  'consumer-write-not-undone',
  'metadata-writes-unsplit',
  'topic-creation-unstaged',
  'hw-kept-after-isr-refusal',
  'image-drops-updates',
  'hw-not-raised-on-session',
  'registration-keeps-leaderships',
  'fetch-session-drops-unknown-topic',
  'pending-isr-dropped-on-image-change',
  'share-ack-answered-unwritten',
  'share-release-ignores-limit',
  'share-state-ops-unordered',
  'share-read-before-dropped-write',
]

/** A Fetch from a consumer, not a replica. */
export function isConsumerFetch(replicaId: number): boolean {
  return replicaId < 0
}

/** Plants `mutation` in the real classes; the returned function restores them. */
export function plant(mutation: Mutation, log: (message: string) => void): () => void {
  // unclean-election is a topic setting (world.ts).
  const planter = PLANTERS[mutation]
  return planter === undefined ? () => undefined : planter(log)
}

/** How each mutation is planted: replaces one method, returns the undo. */
const PLANTERS: Partial<Record<Mutation, (log: (message: string) => void) => () => void>> = {
  'isr-without-cas': plantIsrWithoutCas,
  'hw-truncation': plantHwTruncation,
  'isr-readds-unregistered': plantIsrReaddsUnregistered,
  'truncation-not-fsynced': plantTruncationNotFsynced,
  'txn-skips-verification': plantTxnSkipsVerification,
  'txn-client-skips-epoch-bump': plantTxnClientSkipsEpochBump,
  'txn-marker-skips-partition': plantTxnMarkerSkipsPartition,
  'txn-offsets-on-abort': plantTxnOffsetsOnAbort,
  'read-committed-ignores-transactions': plantReadCommittedIgnoresTransactions,
  'consumer-reads-log-end': plantConsumerReadsLogEnd,
  'range-assigns-twice': plantRangeAssignsTwice,
  'consumer-write-not-undone': plantConsumerWriteNotUndone,
  'metadata-writes-unsplit': plantMetadataWritesUnsplit,
  'topic-creation-unstaged': plantTopicCreationUnstaged,
  'hw-kept-after-isr-refusal': plantHwKeptAfterIsrRefusal,
  'image-drops-updates': plantImageDropsUpdates,
  'hw-not-raised-on-session': plantHwNotRaisedOnSession,
  'registration-keeps-leaderships': plantRegistrationKeepsLeaderships,
  'fetch-session-drops-unknown-topic': plantFetchSessionDropsUnknownTopic,
  'pending-isr-dropped-on-image-change': plantPendingIsrDroppedOnImageChange,
  'share-ack-answered-unwritten': plantShareAckAnsweredUnwritten,
  'share-release-ignores-limit': plantShareReleaseIgnoresLimit,
  'share-state-ops-unordered': plantShareStateOpsUnordered,
  'share-read-before-dropped-write': plantShareReadBeforeDroppedWrite,
}

function plantIsrWithoutCas(log: (message: string) => void): () => void {
  const undoEpochs = replace(
    AlterPartitionManager.prototype,
    'proposalApplies',
    (original) =>
      function (this: AlterPartitionManager, state: PartitionState, proposal: IsrProposal): boolean {
        if (!original.call(this, state, proposal))
          log(`MUTATION: stale ISR proposal for p${proposal.partition} written without compare-and-set`)
        return true
      },
  )
  // The broker epochs are part of the same compare (a fenced incarnation's proposal).
  const undoBrokerEpochs = replace(
    AlterPartitionManager.prototype,
    'brokerEpochsRefusal',
    (original) =>
      function (this: AlterPartitionManager, image: ClusterImage, proposal: IsrProposal): string | null {
        const refusal = original.call(this, image, proposal)
        if (refusal !== null)
          log(`MUTATION: ISR proposal for p${proposal.partition} written despite ${refusal}`)
        return null
      },
  )
  return () => {
    undoBrokerEpochs()
    undoEpochs()
  }
}

function plantHwTruncation(_log: (message: string) => void): () => void {
  return replace(
    LeaderFetcher.prototype as unknown as TruncatingFetcher,
    'truncatePending',
    () =>
      async function (this: TruncatingFetcher, _client: BrokerClient): Promise<void> {
        for (const followed of this.partitions.values()) {
          if (followed.truncated) continue
          await followed.partition.log.truncateTo(followed.partition.highWatermark)
          followed.truncated = true
        }
      },
  )
}

function plantIsrReaddsUnregistered(log: (message: string) => void): () => void {
  // The store-side half of the rule (INELIGIBLE_REPLICA for an unregistered member) goes too.
  const undoStoreCheck = replace(
    AlterPartitionManager.prototype,
    'brokerEpochsRefusal',
    (original) =>
      function (this: AlterPartitionManager, image: ClusterImage, proposal: IsrProposal): string | null {
        const addedMembers = proposal.addedMembers.filter((m) => image.brokers.has(m.brokerId))
        return original.call(this, image, { ...proposal, addedMembers })
      },
  )
  const undoLeaderCheck = replace(
    Partition.prototype as unknown as ExpandingPartition,
    'maybeExpandIsr',
    () =>
      function (
        this: ExpandingPartition,
        replicaId: BrokerId,
        follower: { logEndOffset: number; brokerEpoch: number },
      ): void {
        if (this.maybeResendIsr() || this.state.isr.includes(replicaId)) return
        if (follower.logEndOffset < Math.max(this.log.highWatermark, this.leaderEpochStartOffset)) return
        // Partition.maybeExpandIsr as shipped but for its registration check
        // (context.isRegistered), which is what this mutation leaves out; KIP-903's
        // incarnation check stays (an unregistered broker has no epoch to compare).
        const registered = this.context.brokerEpochOf?.(replicaId) ?? -1
        if (registered >= 0 && follower.brokerEpoch >= 0 && follower.brokerEpoch !== registered) return
        if (this.context.isRegistered?.(replicaId) === false)
          log(`MUTATION: unregistered broker ${replicaId} proposed into the ISR`)
        this.propose([...this.state.isr, replicaId])
      },
  )
  return () => {
    undoLeaderCheck()
    undoStoreCheck()
  }
}

function plantTruncationNotFsynced(_log: (message: string) => void): () => void {
  // The flush that follows a segment's truncation (UnifiedLog's truncateTo) is skipped.
  const segment = LogSegment.prototype as unknown as FlushingSegment
  const undoTruncate = replace(
    segment,
    'truncateTo',
    (original) =>
      async function (this: FlushingSegment, offset: number) {
        const result = await original.call(this, offset)
        this.skipNextFlush = true
        return result
      },
  )
  const undoFlush = replace(
    segment,
    'flush',
    (original) =>
      async function (this: FlushingSegment): Promise<void> {
        if (this.skipNextFlush === true) {
          this.skipNextFlush = false
          return
        }
        return original.call(this)
      },
  )
  return () => {
    undoFlush()
    undoTruncate()
  }
}

function plantTxnSkipsVerification(_log: (message: string) => void): () => void {
  return replace(
    CoordinatorTransactionVerifier.prototype,
    'verify',
    () =>
      async function (this: CoordinatorTransactionVerifier): Promise<number> {
        return ErrorCode.NONE
      },
  )
}

/**
 * The client before KIP-360 (Java before 2.5, its adjustSequencesDueToFailedBatch): a
 * transactional batch that failed for good needs no epoch bump, and the next batch of its
 * partition takes its sequence, as if it had never been written. At transaction version 1
 * the batch may have landed in the aborted transaction: the next one is then answered
 * DUPLICATE_SEQUENCE_NUMBER, which the client takes as written (a lost write).
 */
function plantTxnClientSkipsEpochBump(log: (message: string) => void): () => void {
  return replace(
    TransactionManager.prototype,
    'handleFailedBatch',
    (original) =>
      function (this: TransactionManager, batch: SequencedBatch, expiredAfterSend: boolean) {
        if (!this.isTransactional || !batch.hasSequence) return original.call(this, batch, expiredAfterSend)
        const sequences = (
          this as unknown as { sequences: Map<string, { next: number; producerEpoch: number }> }
        ).sequences
        const state = sequences.get(partitionKey(batch.topic, batch.partition))
        if (state?.producerEpoch === batch.producerEpoch) state.next = batch.baseSequence
        log(
          `MUTATION: no epoch bump after the failed batch ${batch.topic}-${batch.partition} sequence ${batch.baseSequence} of producer ${batch.producerId} epoch ${batch.producerEpoch}`,
        )
      },
  )
}

function plantTxnMarkerSkipsPartition(log: (message: string) => void): () => void {
  return replace(
    TransactionMarkerSender.prototype,
    'send',
    (original) =>
      function (this: TransactionMarkerSender, job: Parameters<TransactionMarkerSender['send']>[0]) {
        const partitions = [...(job.pending.partitions.get(TOPIC) ?? [])]
        if (partitions.length > 1) {
          const skipped = Math.max(...partitions)
          job.pending.removePartition(TOPIC, skipped)
          log(`MUTATION: ${job.result} marker of producer ${job.producerId} for ${TOPIC}-${skipped} not sent`)
        }
        return original.call(this, job)
      },
  )
}

function plantTxnOffsetsOnAbort(_log: (message: string) => void): () => void {
  return replace(
    GroupCoordinator.prototype,
    'onTransactionMarker',
    (original) =>
      function (this: GroupCoordinator, topic: string, partition: number, producerId: bigint) {
        return original.call(this, topic, partition, producerId, 'commit')
      },
  )
}

function plantReadCommittedIgnoresTransactions(log: (message: string) => void): () => void {
  let logged = false
  return replace(
    Partition.prototype,
    'read',
    (original) =>
      async function (
        this: Partition,
        fetchOffset: Offset,
        maxBytes: number,
        isolation: IsolationLevel,
        minOneMessage: boolean,
      ) {
        if (isolation !== 'read_committed')
          return original.call(this, fetchOffset, maxBytes, isolation, minOneMessage)
        if (!logged)
          log('MUTATION: a read_committed fetch is served up to the high watermark, aborted list empty')
        logged = true
        const read = await original.call(this, fetchOffset, maxBytes, 'read_uncommitted', minOneMessage)
        return { ...read, abortedTransactions: [] }
      },
  )
}

function plantConsumerReadsLogEnd(log: (message: string) => void): () => void {
  let logged = false
  return replace(
    Partition.prototype,
    'read',
    (original) =>
      async function (
        this: Partition,
        fetchOffset: Offset,
        maxBytes: number,
        isolation: IsolationLevel,
        minOneMessage: boolean,
      ) {
        if (isolation !== 'read_uncommitted' || this.topic !== TOPIC)
          return original.call(this, fetchOffset, maxBytes, isolation, minOneMessage)
        if (!logged) log('MUTATION: a consumer fetch is served up to the log end')
        logged = true
        return { info: await this.readForFollower(fetchOffset, maxBytes), abortedTransactions: undefined }
      },
  )
}

/** Planted in tidelog's client: the group leader's assignment, which the coordinator passes on as is. */
function plantRangeAssignsTwice(log: (message: string) => void): () => void {
  return replace(
    rangeAssignor,
    'assign',
    (original) =>
      function (this: typeof rangeAssignor, ...args: Parameters<typeof rangeAssignor.assign>) {
        const assignment = original.apply(this, args)
        const owners = [...assignment.values()]
        const first = owners[0]
        const last = owners[owners.length - 1]
        if (owners.length > 1 && first.length > 0) {
          log("MUTATION: the range assignor hands the first member's partitions to the last too")
          last.push(...first)
        }
        return assignment
      },
  )
}

function plantConsumerWriteNotUndone(log: (message: string) => void): () => void {
  return replace(
    GroupCoordinatorShard.prototype,
    'undoIfRefused',
    (original) =>
      function (this: GroupCoordinatorShard, group: Group, effects: Effects) {
        return original.call(this, group, effects, () =>
          log('MUTATION: a refused consumer-group write stays in memory'),
        )
      },
  )
}

function plantMetadataWritesUnsplit(log: (message: string) => void): () => void {
  // Topic creation (setup) stays staged; elections, ISR changes and registrations go
  // out as one transaction each, as before issue 39.
  const target = ClusterMetadata.prototype as unknown as UnsplitCommit
  return replace(
    target,
    'commit',
    (original) =>
      async function (this: UnsplitCommit, diff: ImageDiff, shared: readonly VersionCompare[], last = []) {
        if (diff.staged.size > 0) return original.call(this, diff, shared, last)
        const whole = diffImagesOf(diff)
        const compares = [...whole.compares, ...shared]
        const ops = [...whole.ops, ...last]
        if (ops.length > this.store.limits.txnOpsMax)
          log(`MUTATION: one metadata transaction of ${ops.length} ops`)
        const result = await this.store.txn(compares, ops)
        return {
          revision: result.succeeded ? result.revision : null,
          committed: result.succeeded ? 1 : 0,
        }
      },
  )
}

function plantTopicCreationUnstaged(log: (message: string) => void): () => void {
  // A change too large for one transaction is written in batches, in order: with the new
  // partitions moved behind the visible parts (the topics' records), records come first.
  const target = ClusterMetadata.prototype as unknown as UnsplitCommit
  return replace(
    target,
    'commit',
    (original) =>
      function (this: UnsplitCommit, diff: ImageDiff, shared: readonly VersionCompare[], last = []) {
        if (diff.staged.size === 0) return original.call(this, diff, shared, last)
        log(`MUTATION: ${diff.staged.size} new topics written records first, partitions after`)
        const unstaged: ImageDiff = {
          staged: new Map(),
          topicIds: diff.topicIds,
          parts: [...diff.parts, ...[...diff.staged.values()].flat()],
        }
        return original.call(this, unstaged, shared, last)
      },
  )
}

function plantHwKeptAfterIsrRefusal(log: (message: string) => void): () => void {
  // As before: the change in flight is dropped, the HW left where the maximal ISR held it.
  const target = Partition.prototype as unknown as { onProposalRefused(): void }
  return replace(
    target,
    'onProposalRefused',
    () =>
      function (this: Partition): void {
        log(`MUTATION: ${this.topic}-${this.partition} ISR change refused, HW not recomputed`)
        ;(this as unknown as { pendingIsr: unknown }).pendingIsr = null
      },
  )
}

interface FollowingView {
  readonly clock: unknown
  readonly kvs: ReadonlyMap<string, unknown>
  onEvents(events: readonly WatchEvent[], revision: number): void
}

function plantImageDropsUpdates(log: (message: string) => void): () => void {
  // Brokers' views only (they have a clock; the world's ground truth has none): every third
  // ISR-only update of a scale-big partition state is lost, so images drift from the store.
  const target = ClusterMetadata.prototype as unknown as FollowingView
  let seen = 0
  return replace(
    target,
    'onEvents',
    (original) =>
      function (this: FollowingView, events: readonly WatchEvent[], revision: number): void {
        if (this.clock === null) {
          original.call(this, events, revision)
          return
        }
        const leaderOf = (value: string): unknown => (JSON.parse(value) as { leader?: unknown }).leader
        const kept = events.filter((event) => {
          const before = this.kvs.get(event.kv.key) as { value: string } | undefined
          // ISR changes only (the leader stays): the replicas carry on, only the image is wrong.
          const update =
            event.type === 'put' &&
            event.kv.key.startsWith('partitions/scale-big/') &&
            before !== undefined &&
            leaderOf(before.value) === leaderOf(event.kv.value)
          if (!update || ++seen % 3 !== 0) return true
          log(`MUTATION: a view misses the update of ${event.kv.key} at revision ${revision}`)
          return false
        })
        original.call(this, kept, revision)
      },
  )
}

function plantHwNotRaisedOnSession(log: (message: string) => void): () => void {
  // The broker calls it as soon as its lease is set (d7a6978); before that, its own
  // registration image, applied while fenced, left the HW at the checkpoint.
  return replace(
    ReplicaManager.prototype,
    'onLeadershipRegained',
    () =>
      function (this: ReplicaManager): void {
        log('MUTATION: high watermarks not raised as the store session starts')
      },
  )
}

function plantRegistrationKeepsLeaderships(log: (message: string) => void): () => void {
  // As before b80ff54: the first registration of a process is treated as a re-registration
  // after a lost session, so it leaves the leaderships and ISR places of its predecessor
  // (whose log may have lost its unflushed tail) where they were.
  return replace(
    ClusterMetadata.prototype as unknown as RegisteringMetadata,
    'register',
    (original) =>
      function (this: RegisteringMetadata, ...args: unknown[]) {
        if (!this.registeredOnce) log('MUTATION: a first registration keeps its leaderships and ISR places')
        this.registeredOnce = true
        return original.apply(this, args)
      },
  )
}

function plantFetchSessionDropsUnknownTopic(log: (message: string) => void): () => void {
  // As before cea862a: a partition whose topic id the leader does not know yet is answered
  // UNKNOWN_TOPIC_ID but not kept in the session (its session partition has no name).
  return replace(
    FetchSessionCache.prototype as unknown as SessionCreator,
    'create',
    (original) =>
      function (this: SessionCreator, ...args: unknown[]) {
        const session = original.apply(this, args)
        if (session === null) return session
        const partitions = session.partitions
        const set = partitions.set.bind(partitions)
        partitions.set = (key: string, partition: SessionPartition) => {
          if (partition.topic !== '') return set(key, partition)
          log(`MUTATION: p${partition.partition} of unknown topic id left out of fetch session ${session.id}`)
          return partitions
        }
        return session
      },
  )
}

function plantPendingIsrDroppedOnImageChange(log: (message: string) => void): () => void {
  // As before b805249: every image change reached Partition.updateState, which forgot the
  // ISR change in flight and recomputed the HW over the committed ISR alone. Partitions
  // whose state changed still go through updateState (which ends their change anyway);
  // since ReplicaManager applies only changed states, the unchanged ones are dropped here.
  return replace(
    ReplicaManager.prototype as unknown as ImageApplier,
    'doApplyImage',
    (original) =>
      async function (this: ImageApplier, image: ClusterImage) {
        await original.call(this, image)
        for (const partition of this.hostedPartitions) {
          const inFlight = partition as unknown as PendingIsrPartition
          const state = image.topics.get(partition.topic)?.partitions[partition.partition]
          const pending = inFlight.pendingIsr
          if (pending === null || state === undefined) continue
          if (state.leaderEpoch !== pending.leaderEpoch || state.partitionEpoch !== pending.partitionEpoch)
            continue
          log(
            `MUTATION: ISR change in flight for p${partition.partition} dropped by an unrelated image change`,
          )
          inFlight.pendingIsr = null
          partition.maybeIncrementHighWatermark()
        }
      },
  )
}

/** What metadata-writes-unsplit replaces inside ClusterMetadata (private there). */
interface UnsplitCommit {
  readonly store: MetadataStore
  commit(
    diff: ImageDiff,
    shared: readonly VersionCompare[],
    last?: readonly StoreOp[],
  ): Promise<{ revision: number | null; committed: number }>
}

/** The whole diff as the one transaction it was before issue 39. */
function diffImagesOf(diff: ImageDiff): { compares: VersionCompare[]; ops: StoreOp[] } {
  const parts = [...[...diff.staged.values()].flat(), ...diff.parts]
  return { compares: parts.flatMap((p) => p.compares), ops: parts.flatMap((p) => p.ops) }
}

/** What isr-readds-unregistered reaches inside a Partition (private there). */
interface ExpandingPartition {
  readonly state: PartitionState
  readonly log: { readonly highWatermark: number }
  readonly leaderEpochStartOffset: number
  readonly context: {
    isRegistered?(brokerId: BrokerId): boolean
    brokerEpochOf?(brokerId: BrokerId): number
  }
  maybeResendIsr(): boolean
  propose(isr: readonly BrokerId[]): void
  maybeExpandIsr(replicaId: BrokerId, follower: { logEndOffset: number; brokerEpoch: number }): void
}

/** What registration-keeps-leaderships reaches inside ClusterMetadata (private there). */
interface RegisteringMetadata {
  registeredOnce: boolean
  register(...args: unknown[]): Promise<number | null>
}

/** What fetch-session-drops-unknown-topic reaches inside the FetchSessionCache (private there). */
interface SessionCreator {
  create(...args: unknown[]): FetchSession | null
}

/** What pending-isr-dropped-on-image-change reaches inside a Partition (private there). */
interface PendingIsrPartition {
  pendingIsr: { readonly leaderEpoch: number; readonly partitionEpoch: number } | null
}

/** What pending-isr-dropped-on-image-change reaches inside a ReplicaManager (private there). */
interface ImageApplier {
  readonly hostedPartitions: IterableIterator<Partition>
  doApplyImage(image: ClusterImage): Promise<void>
}

/** What truncation-not-fsynced reaches of a LogSegment. */
interface FlushingSegment {
  skipNextFlush?: boolean
  truncateTo(offset: number): Promise<unknown>
  flush(): Promise<void>
}

/** What the hw-truncation mutation reaches inside a LeaderFetcher (private there). */
interface TruncatingFetcher {
  readonly partitions: Map<string, { readonly partition: Partition; truncated: boolean }>
  truncatePending(client: BrokerClient): Promise<void>
}

function replace<T extends object, K extends keyof T>(
  target: T,
  method: K,
  mutate: (original: T[K]) => T[K],
): () => void {
  const original = target[method]
  target[method] = mutate(original)
  return () => {
    target[method] = original
  }
}

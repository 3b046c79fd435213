/**
 * Simulated transactional producers (`transactions`): the Kafka wire protocol over the
 * simulated network to the real handlers, as the Java producer with a transactional.id
 * drives them: FindCoordinator (v4, key type TRANSACTION) at a random live broker,
 * InitProducerId (v4) with the transactional id, then per transaction AddPartitionsToTxn
 * (v3, the client versions) before the first batch to each partition, transactional Produce
 * (v9, acks=all, one batch in flight per partition, sequences per partition) to the leader
 * a random live broker names, and EndTxn (v3): commit (70%) or abort. Transaction version 2
 * (KIP-890 part 2): no AddPartitionsToTxn nor AddOffsetsToTxn (Produce v12, TxnOffsetCommit
 * v5 add), and the epoch EndTxn v5 bumps is the next transaction's, sequences from 0.
 *
 * Errors, as the Java producer treats them:
 * - NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, no answer or a broken connection: find the
 *   coordinator again; COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS: retry after a
 *   backoff.
 * - PRODUCER_FENCED, INVALID_PRODUCER_EPOCH: fenced; the instance is done and a new one
 *   (InitProducerId without producer id) takes over, as an application would.
 * - A batch not acknowledged within the delivery timeout, OUT_OF_ORDER_SEQUENCE_NUMBER,
 *   INVALID_TXN_STATE, TRANSACTION_ABORTABLE, UNKNOWN_PRODUCER_ID: abortable; EndTxn(abort),
 *   then an epoch bump with the current producer id and epoch (KIP-360), since a batch's
 *   fate is unknown and the sequences must restart.
 * - EndTxn(commit) never answered (gave up, or the instance was fenced meanwhile): outcome
 *   unknown.
 *
 * Two client faults the simulated network does not inject by itself, so that late and
 * zombie writes happen (what KIP-890 and epoch fencing are for): a produce attempt may be
 * held in the network until past its batch's delivery timeout (the client expires the batch
 * in flight and aborts the transaction; the request still lands later, like a TCP segment
 * stuck in retransmission), and an instance may pause mid-transaction
 * (a GC pause) while a new instance with the same transactional id takes over; the paused
 * one then resumes as a zombie and carries on with its old epoch.
 *
 * A request timeout abandons the request, not its bytes: the connection is set aside and
 * closed a few seconds later, so what was sent still reaches the broker (SimNetwork drops
 * what a closed connection still had in flight).
 */
import { ErrorCode } from '../protocol/error-codes.js'
import {
  type AddOffsetsToTxnResponse,
  type AddPartitionsToTxnResponse,
  ApiKey,
  type EndTxnResponse,
  type InitProducerIdResponse,
  type OffsetFetchResponse,
  type ProduceResponse,
  type TxnOffsetCommitResponse,
} from '../protocol/generated/index.js'
import { encodeRecordBatchSync } from '../protocol/record-batch.js'
import type { SimRandom } from './random.js'
import { type BookedTxn, type TransactionBook, txnIdOf, txnRecordValue } from './txn-checker.js'
import {
  Connections,
  findCoordinatorOf,
  liveBrokers,
  NoAnswer,
  REQUEST_TIMEOUT_MS,
} from './txn-connections.js'
import { TOPIC, type WorldView } from './world-view.js'

/** Transactional producers' network ids: 400 + 10 × producer + instance (mod 10). */
export const TXN_PRODUCER_NODE_BASE = 400
export const TRANSACTION_TIMEOUT_MS = 5000
/** The acks=all wait a produce asks of the leader. */
const PRODUCE_TIMEOUT_MS = 2000
/**
 * A batch not acknowledged within this makes the transaction abortable (delivery.timeout.ms).
 * Shorter than the transaction timeout, so the client aborts before the coordinator does
 * (which would bump the epoch and fence the late write by epoch alone, not by KIP-890).
 */
const DELIVERY_TIMEOUT_MS = 3000
/** EndTxn retried for this long; then the outcome stays unknown. */
const END_TXN_GIVE_UP_MS = 20_000
const COMMIT_PROBABILITY = 0.7
/** Produce attempts held in the network past their batch's delivery timeout. */
const SLOW_REQUEST_PROBABILITY = 0.02
const TAKEOVER_PROBABILITY = 0.04
/** Transactions that also commit a group offset (AddOffsetsToTxn, TxnOffsetCommit). */
const OFFSETS_PROBABILITY = 0.5
/** Offset readers' network ids: 450 + producer. */
const OFFSET_READER_NODE_BASE = 450

/** The consumer group whose offsets producer `index` commits in its transactions. */
export function txnGroupId(index: number): string {
  return `sim-txn-group-${index}`
}

/** One instance's identity: what a zombie keeps when a new instance takes over. */
interface Session {
  readonly instance: number
  readonly conns: Connections
  readonly producerId: bigint
  readonly epoch: number
  /** Next sequence per partition (this producer id and epoch). */
  readonly sequences: Map<number, number>
  coordinator: number | null
  zombie: boolean
}

type BatchResult = 'acked' | 'fenced' | 'abortable' | 'stopped'

/** The transactional producers' shared counters (the run's final line). */
export class TxnWorkload {
  readonly errorCodes = new Map<string, number>()
  inits = 0
  bumps = 0
  fenced = 0
  takeovers = 0
  slowRequests = 0
  lateEndTxn = 0

  countError(api: string, code: number): void {
    const key = `${api} ${code}`
    this.errorCodes.set(key, (this.errorCodes.get(key) ?? 0) + 1)
  }
}

export class SimTxnProducer {
  readonly transactionalId: string
  private instance = 0
  private session: Session | null = null
  /** The next init: a new instance (no producer id), or a KIP-360 bump of the current one. */
  private nextInit: 'fresh' | 'bump' = 'fresh'
  private bumpFrom: { producerId: bigint; epoch: number } | null = null
  private nextTxn = 0
  private stopping = false
  private running = false
  /** Zombies still running. */
  private zombies = 0

  constructor(
    private readonly world: WorldView,
    readonly index: number,
    private readonly random: SimRandom,
    private readonly book: TransactionBook,
    private readonly workload: TxnWorkload,
  ) {
    this.transactionalId = `sim-txn-${index}`
  }

  /** 2: KIP-890 part 2 (Produce v12 adds the partition, EndTxn v5 bumps the epoch). */
  private get transactionVersion(): 1 | 2 {
    return this.world.options.transactionVersion ?? 1
  }

  /** Neither a transaction nor a zombie under way. */
  get idle(): boolean {
    return !this.running && this.zombies === 0
  }

  start(): void {
    this.running = true
    this.world.scheduler.schedule(this.random.int(10, 200), () => {
      this.loop().catch((error: unknown) => this.world.clientFailure(error))
    })
  }

  /** No new transaction starts; the one under way ends (commit or abort, retried until given up). */
  stopStarting(): void {
    this.stopping = true
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.world.scheduler.schedule(ms, resolve))
  }

  private log(message: string): void {
    this.world.log(`txn producer ${this.index}: ${message}`)
  }

  private async loop(): Promise<void> {
    try {
      while (!this.stopping) {
        if (this.session === null) {
          this.session = await this.init()
          if (this.session === null) break
        }
        await this.transaction(this.session)
        await this.sleep(this.random.int(20, 200))
      }
    } finally {
      this.running = false
      if (this.zombies === 0) this.session?.conns.close()
    }
  }

  // ---- coordinator --------------------------------------------------------------------------

  /** FindCoordinator v4 (batched keys, key type TRANSACTION) at a random live broker. */
  private findCoordinator(session: {
    conns: Connections
    coordinator: number | null
  }): Promise<number | null> {
    return findCoordinatorOf(this.world, this.random, this.workload, session, this.transactionalId, 1)
  }

  /**
   * One request to the transaction coordinator, found again as needed; null when no answer
   * came (the caller retries). Coordinator errors in the answer forget the coordinator.
   */
  private async toCoordinator<T extends { errorCode: number }>(
    session: { conns: Connections; coordinator: number | null },
    api: string,
    apiKey: number,
    version: number,
    body: unknown,
  ): Promise<T | null> {
    if (session.coordinator === null && (await this.findCoordinator(session)) === null) {
      await this.sleep(this.random.int(50, 200))
      return null
    }
    const to = session.coordinator!
    try {
      const answer = await session.conns.request<T>(to, apiKey, version, body, REQUEST_TIMEOUT_MS)
      if (
        answer.errorCode === ErrorCode.NOT_COORDINATOR ||
        answer.errorCode === ErrorCode.COORDINATOR_NOT_AVAILABLE
      ) {
        this.workload.countError(api, answer.errorCode)
        session.coordinator = null
        await this.sleep(this.random.int(20, 150))
        return null
      }
      if (
        answer.errorCode === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS ||
        answer.errorCode === ErrorCode.CONCURRENT_TRANSACTIONS
      ) {
        this.workload.countError(api, answer.errorCode)
        await this.sleep(this.random.int(20, 100))
        return null
      }
      return answer
    } catch (error) {
      if (!(error instanceof NoAnswer)) throw error
      session.coordinator = null
      await this.sleep(this.random.int(50, 200))
      return null
    }
  }

  /** InitProducerId until it succeeds (a new instance, or a KIP-360 bump); null once stopping. */
  private async init(): Promise<Session | null> {
    const instance = this.instance
    const conns = new Connections(
      this.world,
      `${this.transactionalId}-${instance}`,
      TXN_PRODUCER_NODE_BASE + 10 * this.index + (instance % 10),
    )
    const pending = { conns, coordinator: null as number | null }
    for (;;) {
      if (this.stopping) {
        conns.close()
        return null
      }
      const bump = this.nextInit === 'bump' ? this.bumpFrom : null
      const answer = await this.toCoordinator<InitProducerIdResponse>(
        pending,
        'InitProducerId',
        ApiKey.InitProducerId,
        4,
        {
          transactionalId: this.transactionalId,
          transactionTimeoutMs: TRANSACTION_TIMEOUT_MS,
          producerId: bump?.producerId ?? -1n,
          producerEpoch: bump?.epoch ?? -1,
        },
      )
      if (answer === null) continue
      if (answer.errorCode === ErrorCode.NONE) {
        const now = this.world.scheduler.now
        this.book.onInitProducerId(this.transactionalId, answer.producerId, answer.producerEpoch, now)
        if (bump) this.workload.bumps++
        else this.workload.inits++
        this.log(
          `instance ${instance} InitProducerId${bump ? ` (bump of ${bump.producerId} epoch ${bump.epoch})` : ''}: producer ${answer.producerId} epoch ${answer.producerEpoch} from coordinator broker ${pending.coordinator}`,
        )
        return {
          instance,
          conns,
          producerId: answer.producerId,
          epoch: answer.producerEpoch,
          sequences: new Map(),
          coordinator: pending.coordinator,
          zombie: false,
        }
      }
      this.workload.countError('InitProducerId', answer.errorCode)
      if (
        bump &&
        (answer.errorCode === ErrorCode.PRODUCER_FENCED ||
          answer.errorCode === ErrorCode.INVALID_PRODUCER_EPOCH ||
          answer.errorCode === ErrorCode.INVALID_TXN_STATE)
      ) {
        // Another instance bumped meanwhile (or the id expired): a new instance, as an application would.
        this.log(
          `instance ${instance} InitProducerId bump refused (error ${answer.errorCode}); a new instance`,
        )
        this.nextInit = 'fresh'
        this.bumpFrom = null
        continue
      }
      this.log(`instance ${instance} InitProducerId error ${answer.errorCode}; retrying`)
      await this.sleep(this.random.int(50, 200))
    }
  }

  /** The instance is fenced (or paused and replaced): the next init starts a new instance. */
  private retire(session: Session, why: string): void {
    if (this.session === session) {
      this.session = null
      this.instance++
      this.nextInit = 'fresh'
      this.bumpFrom = null
    }
    this.log(`instance ${session.instance} (producer ${session.producerId} epoch ${session.epoch}) ${why}`)
    if (!session.zombie) session.conns.close()
  }

  // ---- one transaction ----------------------------------------------------------------------

  private async transaction(session: Session): Promise<void> {
    const r = this.random
    const n = this.nextTxn++
    const txnId = txnIdOf(this.index, n)
    const partitions =
      this.world.partitionCount > 1 && r.chance(0.75)
        ? Array.from({ length: this.world.partitionCount }, (_, p) => p)
        : [r.int(0, this.world.partitionCount - 1)]
    if (r.chance(0.5)) partitions.reverse()
    const txn = this.book.begin({
      txnId,
      txnNumber: n,
      transactionalId: this.transactionalId,
      producerId: session.producerId,
      producerEpoch: session.epoch,
      partitions,
      beganAtMs: this.world.scheduler.now,
    })
    this.log(
      `txn ${txnId} begins: producer ${session.producerId} epoch ${session.epoch}, partitions ${partitions.join(',')}, coordinator broker ${session.coordinator ?? 'unknown'}`,
    )
    const takeover = r.chance(TAKEOVER_PROBABILITY) ? r.int(0, partitions.length - 1) : -1
    const plan = partitions.map((p) => ({ partition: p, batches: r.int(1, 3) }))
    for (let i = 0; i < plan.length; i++) {
      if (i === takeover && !session.zombie) {
        // A GC pause: a new instance takes over; this one carries on later as a zombie.
        this.workload.takeovers++
        const pauseMs = r.int(300, 3000)
        // A zombie keeps its connections: what it sends later must reach the brokers.
        session.zombie = true
        this.retire(session, `pauses for ${pauseMs} ms mid-transaction ${txnId}; a new instance takes over`)
        this.zombies++
        this.sleep(pauseMs)
          .then(() => this.continueTransaction(session, txn, plan.slice(i)))
          .then(
            () => {
              this.zombies--
              session.conns.close()
            },
            (error: unknown) => this.world.clientFailure(error),
          )
        return
      }
      const result = await this.writePartition(session, txn, plan[i].partition, plan[i].batches)
      if (result !== 'acked') return this.endAfterFailure(session, txn, result)
    }
    if (r.chance(OFFSETS_PROBABILITY)) {
      const result = await this.commitOffsets(session, txn)
      if (result !== 'acked') return this.endAfterFailure(session, txn, result)
    }
    await this.end(session, txn, r.chance(COMMIT_PROBABILITY))
  }

  /**
   * The group offset of this transaction (partition 0 of the producer's group: its
   * transaction number + 1, so that a fetched offset names its transaction):
   * AddOffsetsToTxn v3 to the transaction coordinator, then TxnOffsetCommit v3 (no group
   * metadata: generation -1) to the group coordinator, as sendOffsetsToTransaction does.
   */
  private async commitOffsets(session: Session, txn: BookedTxn): Promise<BatchResult> {
    const r = this.random
    const groupId = txnGroupId(this.index)
    const started = this.world.scheduler.now
    const expired = (): boolean => this.world.scheduler.now - started > DELIVERY_TIMEOUT_MS
    // Version 2: TxnOffsetCommit v5 adds the group to the transaction itself.
    const added =
      this.transactionVersion === 2 ? 'acked' : await this.addOffsets(session, txn, groupId, expired)
    if (added !== 'acked') return added
    const offset = txn.txnNumber + 1
    txn.offsetSent = offset
    const group = { conns: session.conns, coordinator: null as number | null }
    for (;;) {
      if (expired()) return 'abortable'
      if (group.coordinator === null) {
        await findCoordinatorOf(this.world, r, this.workload, group, groupId, 0)
        if (group.coordinator === null) {
          await this.sleep(r.int(50, 200))
          continue
        }
      }
      let code: number
      try {
        const answer = await session.conns.request<TxnOffsetCommitResponse>(
          group.coordinator,
          ApiKey.TxnOffsetCommit,
          this.transactionVersion === 2 ? 5 : 3,
          {
            transactionalId: this.transactionalId,
            groupId,
            producerId: session.producerId,
            producerEpoch: session.epoch,
            generationIdOrMemberEpoch: -1,
            memberId: '',
            groupInstanceId: null,
            topics: [
              {
                name: TOPIC,
                partitions: [
                  {
                    partitionIndex: 0,
                    committedOffset: BigInt(offset),
                    committedLeaderEpoch: -1,
                    committedMetadata: null,
                  },
                ],
              },
            ],
          },
          REQUEST_TIMEOUT_MS,
        )
        code = answer.topics[0]?.partitions[0]?.errorCode ?? ErrorCode.UNKNOWN_SERVER_ERROR
      } catch (error) {
        if (!(error instanceof NoAnswer)) throw error
        group.coordinator = null
        await this.sleep(r.int(50, 200))
        continue
      }
      if (code === ErrorCode.NONE) {
        this.log(`txn ${txn.txnId}: offset ${offset} of ${groupId} sent (TxnOffsetCommit)`)
        return 'acked'
      }
      this.workload.countError('TxnOffsetCommit', code)
      if (code === ErrorCode.PRODUCER_FENCED || code === ErrorCode.INVALID_PRODUCER_EPOCH) return 'fenced'
      if (
        code === ErrorCode.NOT_COORDINATOR ||
        code === ErrorCode.COORDINATOR_NOT_AVAILABLE ||
        code === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
      ) {
        group.coordinator = null
        await this.sleep(r.int(20, 150))
        continue
      }
      if (
        code === ErrorCode.UNKNOWN_TOPIC_OR_PARTITION ||
        code === ErrorCode.CONCURRENT_TRANSACTIONS ||
        code === ErrorCode.REQUEST_TIMED_OUT ||
        code === ErrorCode.NOT_ENOUGH_REPLICAS
      ) {
        await this.sleep(r.int(20, 150))
        continue
      }
      this.log(`txn ${txn.txnId}: TxnOffsetCommit error ${code}; abortable`)
      return 'abortable'
    }
  }

  /** AddOffsetsToTxn v3 (transaction version 1): the group's offsets partition joins the transaction. */
  private async addOffsets(
    session: Session,
    txn: BookedTxn,
    groupId: string,
    expired: () => boolean,
  ): Promise<BatchResult> {
    for (;;) {
      if (expired()) return 'abortable'
      const answer = await this.toCoordinator<AddOffsetsToTxnResponse>(
        session,
        'AddOffsetsToTxn',
        ApiKey.AddOffsetsToTxn,
        3,
        {
          transactionalId: this.transactionalId,
          producerId: session.producerId,
          producerEpoch: session.epoch,
          groupId,
        },
      )
      if (answer === null) continue
      if (answer.errorCode === ErrorCode.NONE) return 'acked'
      this.workload.countError('AddOffsetsToTxn', answer.errorCode)
      if (
        answer.errorCode === ErrorCode.PRODUCER_FENCED ||
        answer.errorCode === ErrorCode.INVALID_PRODUCER_EPOCH
      )
        return 'fenced'
      this.log(`txn ${txn.txnId}: AddOffsetsToTxn error ${answer.errorCode}`)
      return 'abortable'
    }
  }

  /** A zombie resumes: the rest of its transaction with its old epoch, then a commit. */
  private async continueTransaction(
    session: Session,
    txn: BookedTxn,
    rest: readonly { partition: number; batches: number }[],
  ): Promise<void> {
    this.log(
      `zombie instance ${session.instance} (producer ${session.producerId} epoch ${session.epoch}) resumes txn ${txn.txnId}`,
    )
    for (const step of rest) {
      const result = await this.writePartition(session, txn, step.partition, step.batches)
      if (result !== 'acked') return this.endAfterFailure(session, txn, result)
    }
    await this.end(session, txn, true)
  }

  /** AddPartitionsToTxn for `partition`, then its batches one at a time. */
  private async writePartition(
    session: Session,
    txn: BookedTxn,
    partition: number,
    batches: number,
  ): Promise<BatchResult> {
    // Version 2: the first Produce v12 adds the partition (the leader asks the coordinator).
    const added = this.transactionVersion === 2 ? 'acked' : await this.addPartition(session, txn, partition)
    if (added !== 'acked') return added
    for (let b = 0; b < batches; b++) {
      const result = await this.produce(session, txn, partition)
      if (result !== 'acked') return result
    }
    return 'acked'
  }

  private async addPartition(session: Session, txn: BookedTxn, partition: number): Promise<BatchResult> {
    const started = this.world.scheduler.now
    for (;;) {
      if (this.world.scheduler.now - started > DELIVERY_TIMEOUT_MS) return 'abortable'
      const answer = await this.toCoordinator<AddPartitionsToTxnResponse & { errorCode: number }>(
        session,
        'AddPartitionsToTxn',
        ApiKey.AddPartitionsToTxn,
        3,
        {
          transactions: [],
          v3AndBelowTransactionalId: this.transactionalId,
          v3AndBelowProducerId: session.producerId,
          v3AndBelowProducerEpoch: session.epoch,
          v3AndBelowTopics: [{ name: TOPIC, partitions: [partition] }],
        },
      ).then((a) => (a === null ? null : { ...a, errorCode: partitionError(a, partition) }))
      if (answer === null) continue
      const code = answer.errorCode
      if (code === ErrorCode.NONE) return 'acked'
      this.workload.countError('AddPartitionsToTxn', code)
      if (code === ErrorCode.PRODUCER_FENCED || code === ErrorCode.INVALID_PRODUCER_EPOCH) return 'fenced'
      if (code === ErrorCode.NOT_COORDINATOR || code === ErrorCode.COORDINATOR_NOT_AVAILABLE) {
        session.coordinator = null
        continue
      }
      if (
        code === ErrorCode.CONCURRENT_TRANSACTIONS ||
        code === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS ||
        code === ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
      ) {
        await this.sleep(this.random.int(20, 100))
        continue
      }
      this.log(`txn ${txn.txnId}: AddPartitionsToTxn p${partition} error ${code}`)
      return 'abortable'
    }
  }

  /** One transactional batch, retried (same bytes) until acknowledged or the delivery timeout. */
  private async produce(session: Session, txn: BookedTxn, partition: number): Promise<BatchResult> {
    const r = this.random
    const sequence = session.sequences.get(partition) ?? 0
    const done = txn.ackedRecords.get(partition) ?? 0
    const count = r.int(1, 3)
    const batch = encodeRecordBatchSync({
      records: Array.from({ length: count }, (_, i) => ({
        value: Buffer.from(txnRecordValue(this.index, txn.txnNumber, partition, done + i)),
      })),
      defaultTimestamp: this.world.scheduler.nowMs(),
      producerId: session.producerId,
      producerEpoch: session.epoch,
      baseSequence: sequence,
      isTransactional: true,
    })
    const started = this.world.scheduler.now
    txn.unackedRecords.set(partition, (txn.unackedRecords.get(partition) ?? 0) + count)
    const settle = (result: BatchResult): BatchResult => {
      txn.unackedRecords.set(
        partition,
        (txn.unackedRecords.get(partition) ?? 0) - (result === 'acked' ? count : 0),
      )
      if (result === 'acked') {
        txn.ackedRecords.set(partition, done + count)
        session.sequences.set(partition, sequence + count)
      }
      return result
    }
    for (;;) {
      if (this.world.scheduler.now - started > DELIVERY_TIMEOUT_MS) {
        this.log(
          `txn ${txn.txnId}: batch p${partition} seq ${sequence} not acknowledged within ${DELIVERY_TIMEOUT_MS} ms`,
        )
        return settle('abortable')
      }
      const live = liveBrokers(this.world)
      const leaderId =
        live.length > 0
          ? (this.world.brokers.get(r.pick(live))?.metadata.image().topics.get(TOPIC)?.partitions[partition]
              ?.leader ?? -1)
          : -1
      if (leaderId < 0) {
        await this.sleep(r.int(50, 150))
        continue
      }
      // Java expires a batch still in flight at its delivery timeout: the attempt's timeout is
      // what remains of it. A held request outlives it, so it lands after the client gave up
      // on it (and aborted its transaction): a late write.
      const remainingMs = started + DELIVERY_TIMEOUT_MS - this.world.scheduler.now
      const slow = r.chance(SLOW_REQUEST_PROBABILITY)
      // Half land just after the client's abort (before its next epoch writes anywhere: only
      // KIP-890 refuses them then), half up to 3 s later.
      const holdMs = slow ? remainingMs + (r.chance(0.5) ? r.int(20, 300) : r.int(300, 3000)) : 0
      if (slow) {
        this.workload.slowRequests++
        this.log(
          `txn ${txn.txnId}: produce p${partition} seq ${sequence} to broker ${leaderId} held ${holdMs} ms in the network, past its delivery timeout`,
        )
      }
      let code: number
      let baseOffset = -1n
      try {
        const answer = await session.conns.request<ProduceResponse>(
          leaderId,
          ApiKey.Produce,
          this.transactionVersion === 2 ? 12 : 9,
          {
            transactionalId: this.transactionalId,
            acks: -1,
            timeoutMs: PRODUCE_TIMEOUT_MS,
            topicData: [{ name: TOPIC, partitionData: [{ index: partition, records: batch }] }],
          },
          // Java's request.timeout.ms (30 s) is far longer than this one: a held attempt waits out the delivery timeout.
          slow ? remainingMs : Math.min(REQUEST_TIMEOUT_MS, remainingMs),
          holdMs,
          (late) => {
            const p = late.responses.find((t) => t.name === TOPIC)?.partitionResponses[0]
            this.log(
              `late answer to txn ${txn.txnId}'s produce p${partition} seq ${sequence} (producer ${session.producerId} epoch ${session.epoch}) from broker ${leaderId}: ${p?.errorCode === ErrorCode.NONE ? `appended @${p.baseOffset}` : `error ${p?.errorCode}`}`,
            )
          },
        )
        const p = answer.responses
          .find((t) => t.name === TOPIC)
          ?.partitionResponses.find((x) => x.index === partition)
        code = p?.errorCode ?? ErrorCode.UNKNOWN_SERVER_ERROR
        baseOffset = p?.baseOffset ?? -1n
      } catch (error) {
        if (!(error instanceof NoAnswer)) throw error
        await this.sleep(r.int(20, 200))
        continue
      }
      if (code === ErrorCode.NONE || code === ErrorCode.DUPLICATE_SEQUENCE_NUMBER) {
        this.world.log(
          `txn ${txn.txnId}: ack p${partition} @${baseOffset} seq ${sequence} (${count} records) from broker ${leaderId}${session.zombie ? ' (zombie)' : ''}`,
        )
        return settle('acked')
      }
      this.workload.countError('Produce', code)
      if (code === ErrorCode.PRODUCER_FENCED || code === ErrorCode.INVALID_PRODUCER_EPOCH)
        return settle('fenced')
      if (
        code === ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER ||
        code === ErrorCode.INVALID_TXN_STATE ||
        code === ErrorCode.TRANSACTION_ABORTABLE ||
        code === ErrorCode.UNKNOWN_PRODUCER_ID ||
        code === ErrorCode.INVALID_RECORD
      ) {
        this.log(
          `txn ${txn.txnId}: produce p${partition} seq ${sequence} error ${code} from broker ${leaderId}; abortable`,
        )
        return settle('abortable')
      }
      // NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, the
      // verification's retriable answers (NOT_COORDINATOR, CONCURRENT_TRANSACTIONS, ...): again.
      await this.sleep(r.int(20, 200))
    }
  }

  /** After a failed step: fenced ends the instance; abortable aborts, then bumps the epoch. */
  private async endAfterFailure(session: Session, txn: BookedTxn, result: BatchResult): Promise<void> {
    if (result === 'fenced' || result === 'stopped') {
      this.workload.fenced++
      txn.status = 'aborted'
      this.log(`txn ${txn.txnId} ends without commit: fenced`)
      this.retire(session, 'fenced')
      return
    }
    await this.end(session, txn, false)
    // The mutation: a client without KIP-360's bump (Java before 2.5); see mutations.ts.
    if (this.session === session && this.world.options.mutation !== 'txn-client-skips-epoch-bump') {
      // KIP-360: a batch's fate is unknown, its sequences with it: bump the epoch.
      this.session = null
      this.nextInit = 'bump'
      this.bumpFrom = { producerId: session.producerId, epoch: session.epoch }
      session.conns.close()
    }
  }

  /**
   * Version 2: EndTxn v5 bumped the epoch (or gave a new producer id on overflow); the next
   * transaction uses it, every partition from sequence 0. The old epoch is fenced as by an
   * InitProducerId bump, so the book hears it as one. A zombie's session is retired already.
   */
  private onEpochBumped(session: Session, producerId: bigint, epoch: number): void {
    this.book.onInitProducerId(this.transactionalId, producerId, epoch, this.world.scheduler.now)
    if (this.session !== session) return
    this.session = { ...session, producerId, epoch, sequences: new Map() }
  }

  /** EndTxn v3 (v5 at version 2), retried until answered or given up; the outcome goes to the book. */
  private async end(session: Session, txn: BookedTxn, commit: boolean): Promise<void> {
    txn.status = commit ? 'committing' : 'aborting'
    if (commit) txn.commitSent = true
    const started = this.world.scheduler.now
    for (;;) {
      if (this.world.scheduler.now - started > END_TXN_GIVE_UP_MS) {
        this.workload.lateEndTxn++
        txn.status = commit ? 'unknown' : 'aborted'
        this.log(
          `txn ${txn.txnId}: EndTxn(${commit ? 'commit' : 'abort'}) given up after ${END_TXN_GIVE_UP_MS} ms`,
        )
        this.retire(session, 'gave up on EndTxn')
        return
      }
      const version = this.transactionVersion === 2 ? 5 : 3
      const answer = await this.toCoordinator<EndTxnResponse>(session, 'EndTxn', ApiKey.EndTxn, version, {
        transactionalId: this.transactionalId,
        producerId: session.producerId,
        producerEpoch: session.epoch,
        committed: commit,
      })
      if (answer === null) continue
      const code = answer.errorCode
      if (code === ErrorCode.NONE) {
        txn.status = commit ? 'committed' : 'aborted'
        this.log(`txn ${txn.txnId} ${commit ? 'committed' : 'aborted'}${session.zombie ? ' (zombie)' : ''}`)
        if (answer.producerId >= 0n) this.onEpochBumped(session, answer.producerId, answer.producerEpoch)
        return
      }
      this.workload.countError('EndTxn', code)
      // Fenced, or the transaction is not the one this epoch had (the coordinator aborted it
      // on timeout and bumped the epoch): a commit's fate is unknown to the client.
      txn.status = commit ? 'unknown' : 'aborted'
      this.log(
        `txn ${txn.txnId}: EndTxn(${commit ? 'commit' : 'abort'}) error ${code}; outcome ${txn.status}`,
      )
      if (code === ErrorCode.PRODUCER_FENCED || code === ErrorCode.INVALID_PRODUCER_EPOCH) {
        this.workload.fenced++
        this.retire(session, 'fenced at EndTxn')
      } else if (this.session === session) {
        this.session = null
        this.nextInit = 'bump'
        this.bumpFrom = { producerId: session.producerId, epoch: session.epoch }
        session.conns.close()
      }
      return
    }
  }
}

/** AddPartitionsToTxn v3's error for `partition` (per partition in those versions). */
function partitionError(answer: AddPartitionsToTxnResponse, partition: number): number {
  const result = answer.resultsByTopicV3AndBelow
    .find((t) => t.name === TOPIC)
    ?.resultsByPartition.find((p) => p.partitionIndex === partition)
  return result?.partitionErrorCode ?? ErrorCode.UNKNOWN_SERVER_ERROR
}

/**
 * Reads a transactional producer's group offset (OffsetFetch v7, require_stable, from the
 * group coordinator FindCoordinator names) every 300-800 ms; each answer goes to the check
 * that no offset of an aborted or open transaction becomes visible.
 */
export class TxnOffsetReader {
  private readonly conns: Connections
  private readonly session = { conns: null as unknown as Connections, coordinator: null as number | null }
  private stopped = false
  private busy = false

  constructor(
    private readonly world: WorldView,
    readonly producer: number,
    private readonly random: SimRandom,
    private readonly workload: TxnWorkload,
    private readonly onFetched: (offset: number, from: number) => void,
  ) {
    this.conns = new Connections(
      world,
      `sim-txn-offset-reader-${producer}`,
      OFFSET_READER_NODE_BASE + producer,
    )
    this.session.conns = this.conns
  }

  get idle(): boolean {
    return !this.busy
  }

  start(): void {
    const next = (): void => {
      if (this.stopped) return
      this.fetchOnce().then(
        () => this.world.scheduler.schedule(this.random.int(300, 800), next),
        (error: unknown) => this.world.clientFailure(error),
      )
    }
    this.world.scheduler.schedule(this.random.int(100, 500), next)
  }

  stop(): void {
    this.stopped = true
  }

  close(): void {
    this.stopped = true
    this.conns.close()
  }

  /** One OffsetFetch; the committed offset (-1: none), or null if no stable answer came. */
  async fetchOnce(): Promise<number | null> {
    this.busy = true
    try {
      const groupId = txnGroupId(this.producer)
      if (this.session.coordinator === null)
        await findCoordinatorOf(this.world, this.random, this.workload, this.session, groupId, 0)
      const to = this.session.coordinator
      if (to === null) return null
      let answer: OffsetFetchResponse
      try {
        answer = await this.conns.request<OffsetFetchResponse>(
          to,
          ApiKey.OffsetFetch,
          7,
          { groupId, topics: [{ name: TOPIC, partitionIndexes: [0] }], groups: [], requireStable: true },
          REQUEST_TIMEOUT_MS,
        )
      } catch (error) {
        if (!(error instanceof NoAnswer)) throw error
        this.session.coordinator = null
        return null
      }
      const p = answer.topics.find((t) => t.name === TOPIC)?.partitions.find((x) => x.partitionIndex === 0)
      const code = answer.errorCode !== ErrorCode.NONE ? answer.errorCode : (p?.errorCode ?? ErrorCode.NONE)
      if (code !== ErrorCode.NONE) {
        this.workload.countError('OffsetFetch', code)
        if (code !== ErrorCode.UNSTABLE_OFFSET_COMMIT) this.session.coordinator = null
        return null
      }
      const offset = Number(p?.committedOffset ?? -1n)
      this.onFetched(offset, to)
      return offset
    } finally {
      this.busy = false
    }
  }
}

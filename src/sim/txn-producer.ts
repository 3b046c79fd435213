/**
 * The transactional workload (`transactions`): two transactional ids (`sim-txn-0`,
 * `sim-txn-1`), each driven through tidelog's own `Producer` with a `transactionalId` over
 * the simulated network (`SimNetwork.clientConnector`, the scheduler as clock and deferral, a
 * fork of the seed as random), as an application would: initTransactions, then transactions
 * over one or (75%) both partitions of the topic, 1-3 sends of 1-3 records per partition (each
 * send awaited: one batch in flight per partition; record values
 * `x<producer>.<txn>.p<partition>.<index>`), in half of them sendOffsetsToTransaction (the
 * group `sim-txn-group-<producer>`, partition 0 at the transaction's number + 1, so that an
 * offset names its transaction), then commitTransaction (70%) or abortTransaction. The
 * client chooses the transaction version from the cluster's finalized `transaction.version`
 * (world.ts finalizes the run's `transactionVersion`), and does the rest itself: coordinator
 * lookups and retries, AddPartitionsToTxn (version 1), the KIP-360 epoch bump after an
 * abort with a batch of unknown fate (version 1), EndTxn v5's bump (version 2).
 *
 * The application's rules: a send or sendOffsetsToTransaction that fails ends the
 * transaction with abortTransaction; a fenced producer (ProducerFencedError, or any other
 * failure that leaves the client in FATAL_ERROR) is closed and a new instance with the same
 * transactional id takes over; a commit or abort that times out (BlockTimeoutError) is
 * called again, up to END_TXN_GIVE_UP_MS, after which the outcome stays unknown and the
 * instance is replaced.
 *
 * What goes into the book (`TransactionBook`) is what the application sees: the producer id
 * and epoch the client reports (`producerIdentity`) after initTransactions and after each
 * commit or abort, the sends acknowledged, and each transaction's outcome as its
 * commitTransaction or abortTransaction call ended: committed, aborted (also: the client
 * refused to commit, TransactionAbortableError, and the abort succeeded, or it ended
 * without the application ever calling commit), or unknown.
 *
 * Two faults a client cannot make itself, kept here: the link from a producer to a
 * partition's leader stalls past the batch's delivery timeout (`SimNetwork.stallLink`), so
 * the client gives the batch up and aborts while its bytes still travel, and land after (a
 * late write, what KIP-890 is for); and an application pauses mid-transaction (a GC pause)
 * while a new instance with the same transactional id takes over, then resumes as a zombie
 * with its old epoch.
 */
import { Admin } from '../client/admin.js'
import {
  BlockTimeoutError,
  KafkaClientError,
  KafkaProtocolError,
  TransactionAbortableError,
} from '../client/errors.js'
import { Producer } from '../client/producer.js'
import { CLIENT_TIMEOUT_MARGIN_MS } from '../client/producer-options.js'
import {
  BASE_SEQUENCE_OFFSET,
  PRODUCER_EPOCH_OFFSET,
  PRODUCER_ID_OFFSET,
  RECORD_BATCH_OVERHEAD,
} from '../protocol/batch-header.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { ApiKey, type ProduceRequest, type ProduceResponse } from '../protocol/generated/index.js'
import type { RequestTap } from '../server/connection.js'
import type { RequestContext } from '../server/request-context.js'
import { recordsBytes } from './invariants-consumer.js'
import type { SimRandom } from './random.js'
import type { SimBroker } from './sim-broker.js'
import { type BookedTxn, type TransactionBook, txnIdOf, txnRecordValue } from './txn-checker.js'
import { simClientOptions, type WorldInternals } from './world-internals.js'
import { TOPIC } from './world-view.js'

/** Transactional producers' network ids: 400 + 10 × producer + instance (mod 10). */
export const TXN_PRODUCER_NODE_BASE = 400
export const TRANSACTION_TIMEOUT_MS = 5000
const REQUEST_TIMEOUT_MS = 1500
/**
 * A batch not acknowledged within this fails and the transaction aborts. Shorter than the
 * transaction timeout, so the client aborts before the coordinator does (which would bump
 * the epoch and fence the late write by epoch alone, not by KIP-890).
 */
const DELIVERY_TIMEOUT_MS = 3000
/** How long initTransactions, sendOffsetsToTransaction, commit and abort retry (max.block.ms). */
const MAX_BLOCK_MS = 5000
/** A commit or abort timing out is called again for this long; then the outcome stays unknown. */
const END_TXN_GIVE_UP_MS = 20_000
const COMMIT_PROBABILITY = 0.7
/** Sends whose link to the leader stalls past the batch's delivery timeout. */
const STALL_PROBABILITY = 0.02
const TAKEOVER_PROBABILITY = 0.04
/** Transactions that also commit a group offset (sendOffsetsToTransaction). */
const OFFSETS_PROBABILITY = 0.5
/** Offset readers' network ids: 450 + producer. */
const OFFSET_READER_NODE_BASE = 450

/** The consumer group whose offsets producer `index` commits in its transactions. */
export function txnGroupId(index: number): string {
  return `sim-txn-group-${index}`
}

/** One application instance: its own Producer (and client), the same transactional id. */
interface Instance {
  readonly number: number
  readonly node: number
  readonly producer: Producer
  /** Paused and replaced: it carries on with its old epoch when it resumes. */
  zombie: boolean
  /** A stall armed for the instance's next Produce to this broker (`stallLinkToLeader`). */
  stall: { broker: number; holdMs: number; what: string } | null
}

/** One partition of a transaction's plan: how many sends go to it. */
interface Step {
  readonly partition: number
  readonly sends: number
}

/** The transactional producers' shared counters (the run's final line). */
export class TxnWorkload {
  readonly errorCodes = new Map<string, number>()
  inits = 0
  bumps = 0
  fenced = 0
  takeovers = 0
  stalls = 0
  lateEndTxn = 0

  /** A client call failed: counted by the call and the error's code. */
  countError(call: string, error: unknown): void {
    const key = `${call} ${errorName(error)}`
    this.errorCodes.set(key, (this.errorCodes.get(key) ?? 0) + 1)
  }
}

/** An error as the trace names it: a Kafka error code, or the client error's code. */
function errorName(error: unknown): string {
  if (error instanceof KafkaProtocolError) return String(error.errorCode)
  if (error instanceof KafkaClientError) return error.code
  return String(error)
}

export class SimTxnProducer {
  readonly transactionalId: string
  private instances = 0
  private current: Instance | null = null
  private nextTxn = 0
  private stopping = false
  private running = false
  /** Zombies still running. */
  private zombies = 0
  /** The producer id and epoch last booked for this transactional id. */
  private booked: { producerId: bigint; producerEpoch: number } | null = null

  constructor(
    private readonly world: WorldInternals,
    readonly index: number,
    private readonly random: SimRandom,
    private readonly book: TransactionBook,
    private readonly workload: TxnWorkload,
  ) {
    this.transactionalId = `sim-txn-${index}`
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
        this.current ??= await this.init()
        if (this.current === null) break
        await this.transaction(this.current)
        await this.sleep(this.random.int(20, 200))
      }
    } finally {
      const last = this.current
      this.current = null
      if (last !== null) await this.close(last)
      this.running = false
    }
  }

  /** A new instance: a Producer with the transactional id, initTransactions until it answers; null once stopping. */
  private async init(): Promise<Instance | null> {
    while (!this.stopping) {
      const number = this.instances++
      const node = TXN_PRODUCER_NODE_BASE + 10 * this.index + (number % 10)
      let instance: Instance | null = null
      const producer = new Producer({
        ...simClientOptions(this.world, node, this.random.fork(), (to, chunks) => {
          if (instance !== null) this.maybeStall(instance, to, chunks)
        }),
        clientId: `${this.transactionalId}-${number}`,
        transactionalId: this.transactionalId,
        transactionTimeoutMs: TRANSACTION_TIMEOUT_MS,
        acks: 'all',
        lingerMs: 0,
        requestTimeoutMs: REQUEST_TIMEOUT_MS,
        deliveryTimeoutMs: DELIVERY_TIMEOUT_MS,
        maxBlockMs: MAX_BLOCK_MS,
        metadataMaxAgeMs: 5000,
      })
      instance = { number, node, producer, zombie: false, stall: null }
      if (await this.initTransactions(instance)) return instance
      await this.close(instance)
      await this.sleep(this.random.int(50, 200))
    }
    return null
  }

  /** initTransactions, called again while it times out; false when the instance cannot go on. */
  private async initTransactions(instance: Instance): Promise<boolean> {
    for (;;) {
      try {
        await instance.producer.initTransactions()
        break
      } catch (error) {
        this.workload.countError('initTransactions', error)
        if (error instanceof BlockTimeoutError && !this.stopping) continue
        this.log(`instance ${instance.number} initTransactions failed (${errorName(error)})`)
        return false
      }
    }
    this.workload.inits++
    const identity = this.noteIdentity(instance)
    this.log(
      `instance ${instance.number} InitProducerId: producer ${identity.producerId} epoch ${identity.producerEpoch}, transaction version ${instance.producer.transactionVersion}`,
    )
    return true
  }

  /**
   * The producer id and epoch the client reports now; a new one goes into the book as the
   * moment its client learnt that the older ones are fenced (InitProducerId, the KIP-360
   * bump after an abort, EndTxn v5's bump).
   */
  private noteIdentity(instance: Instance): { producerId: bigint; producerEpoch: number } {
    const identity = instance.producer.producerIdentity
    if (identity === null) throw new Error(`${this.transactionalId}: no producer id after InitProducerId`)
    const known = this.booked
    if (known?.producerId !== identity.producerId || known.producerEpoch !== identity.producerEpoch) {
      this.booked = identity
      this.book.onInitProducerId(
        this.transactionalId,
        identity.producerId,
        identity.producerEpoch,
        this.world.scheduler.now,
      )
    }
    return identity
  }

  /** The instance is done (fenced, given up, or paused and replaced): the next transaction needs a new one. */
  private async retire(instance: Instance, why: string): Promise<void> {
    if (this.current === instance) this.current = null
    const identity = instance.producer.producerIdentity
    this.log(
      `instance ${instance.number} (producer ${identity?.producerId} epoch ${identity?.producerEpoch}) ${why}`,
    )
    if (!instance.zombie) await this.close(instance)
  }

  private async close(instance: Instance): Promise<void> {
    await instance.producer.close()
  }

  // ---- one transaction ----------------------------------------------------------------------

  private async transaction(instance: Instance): Promise<void> {
    const r = this.random
    const n = this.nextTxn++
    const txnId = txnIdOf(this.index, n)
    const partitions =
      this.world.partitionCount > 1 && r.chance(0.75)
        ? Array.from({ length: this.world.partitionCount }, (_, p) => p)
        : [r.int(0, this.world.partitionCount - 1)]
    if (r.chance(0.5)) partitions.reverse()
    try {
      instance.producer.beginTransaction()
    } catch (error) {
      this.workload.countError('beginTransaction', error)
      await this.retire(instance, `cannot begin a transaction (${errorName(error)})`)
      return
    }
    const identity = this.noteIdentity(instance)
    const txn = this.book.begin({
      txnId,
      txnNumber: n,
      transactionalId: this.transactionalId,
      producerId: identity.producerId,
      producerEpoch: identity.producerEpoch,
      partitions,
      beganAtMs: this.world.scheduler.now,
    })
    this.log(
      `txn ${txnId} begins: producer ${identity.producerId} epoch ${identity.producerEpoch}, partitions ${partitions.join(',')}, instance ${instance.number}`,
    )
    const takeover = r.chance(TAKEOVER_PROBABILITY) ? r.int(0, partitions.length - 1) : -1
    const plan: Step[] = partitions.map((partition) => ({ partition, sends: r.int(1, 3) }))
    await this.run(instance, txn, plan, takeover)
  }

  /** The plan's sends from step 0 (pausing at `pauseAt`), the offsets, then commit or abort. */
  private async run(
    instance: Instance,
    txn: BookedTxn,
    plan: readonly Step[],
    pauseAt: number,
  ): Promise<void> {
    const r = this.random
    for (let i = 0; i < plan.length; i++) {
      if (i === pauseAt) return this.pause(instance, txn, plan.slice(i))
      const failure = await this.writePartition(instance, txn, plan[i])
      if (failure !== null) return this.endAfterFailure(instance, txn, failure)
    }
    // A zombie resumes with its sends and commits: its offsets would say nothing more.
    if (!instance.zombie && r.chance(OFFSETS_PROBABILITY)) {
      const failure = await this.sendOffsets(instance, txn)
      if (failure !== null) return this.endAfterFailure(instance, txn, failure)
    }
    await this.end(instance, txn, instance.zombie || r.chance(COMMIT_PROBABILITY))
  }

  /** A GC pause: a new instance takes over now; this one resumes later as a zombie. */
  private pause(instance: Instance, txn: BookedTxn, rest: readonly Step[]): void {
    this.workload.takeovers++
    const pauseMs = this.random.int(300, 3000)
    instance.zombie = true
    this.zombies++
    this.retire(instance, `pauses for ${pauseMs} ms mid-transaction ${txn.txnId}; a new instance takes over`)
      .then(() => this.sleep(pauseMs))
      .then(() => {
        const identity = instance.producer.producerIdentity
        this.log(
          `zombie instance ${instance.number} (producer ${identity?.producerId} epoch ${identity?.producerEpoch}) resumes txn ${txn.txnId}`,
        )
        return this.run(instance, txn, rest, -1)
      })
      .then(() => this.close(instance))
      .then(
        () => {
          this.zombies--
        },
        (error: unknown) => this.world.clientFailure(error),
      )
  }

  /** The step's sends to its partition, each awaited; the error that failed one, or null. */
  private async writePartition(instance: Instance, txn: BookedTxn, step: Step): Promise<unknown> {
    const r = this.random
    for (let s = 0; s < step.sends; s++) {
      const count = r.int(1, 3)
      if (r.chance(STALL_PROBABILITY)) this.stallLinkToLeader(instance, txn, step.partition)
      const done = txn.ackedRecords.get(step.partition) ?? 0
      const sends = Array.from({ length: count }, (_, i) =>
        instance.producer.send({
          topic: TOPIC,
          partition: step.partition,
          value: txnRecordValue(this.index, txn.txnNumber, step.partition, done + i),
        }),
      )
      const results = await Promise.allSettled(sends)
      const failed = results.findIndex((result) => result.status === 'rejected')
      const acked = failed < 0 ? count : failed
      txn.ackedRecords.set(step.partition, done + acked)
      if (failed >= 0) {
        const error = (results[failed] as PromiseRejectedResult).reason
        this.workload.countError('send', error)
        this.log(`txn ${txn.txnId}: send to p${step.partition} failed (${errorName(error)})`)
        return error
      }
      const first = (results[0] as PromiseFulfilledResult<{ offset: number }>).value.offset
      this.world.log(
        `txn ${txn.txnId}: ack p${step.partition} @${first} (${count} records)${instance.zombie ? ' (zombie)' : ''}`,
      )
    }
    return null
  }

  /**
   * Arms a stall of the link from this instance to the partition's leader (as its client
   * knows it), from the instance's next Produce to it: the link holds what it sends until
   * after the client gave that request up (it times out past the batch's delivery timeout)
   * and aborted; the bytes land afterwards.
   */
  private stallLinkToLeader(instance: Instance, txn: BookedTxn, partition: number): void {
    const leader = instance.producer.client.metadata.leaderOf(TOPIC, partition)
    if (leader === undefined) return
    const r = this.random
    const givenUpMs = Math.max(DELIVERY_TIMEOUT_MS, REQUEST_TIMEOUT_MS + CLIENT_TIMEOUT_MARGIN_MS)
    // Half land just after the client's abort (before its next epoch writes anywhere: only
    // KIP-890 refuses them then), half up to 3 s later.
    const holdMs = givenUpMs + (r.chance(0.5) ? r.int(20, 300) : r.int(300, 3000))
    instance.stall = { broker: leader.nodeId, holdMs, what: `txn ${txn.txnId} (p${partition})` }
  }

  /** Before the instance writes to broker `to`: an armed stall starts with a Produce. */
  private maybeStall(instance: Instance, to: number, chunks: readonly Buffer[]): void {
    const stall = instance.stall
    // The frame: size (int32), then the request header's api key (int16).
    if (
      stall === null ||
      stall.broker !== to ||
      chunks[0].length < 6 ||
      chunks[0].readInt16BE(4) !== ApiKey.Produce
    )
      return
    instance.stall = null
    this.workload.stalls++
    this.world.network.stallLink(instance.node, to, this.world.scheduler.now + stall.holdMs)
    this.log(
      `${stall.what}: link of instance ${instance.number} to broker ${to} holds its bytes ${stall.holdMs} ms from this produce, until after the client gave up`,
    )
  }

  /** sendOffsetsToTransaction; the error that failed it, or null. */
  private async sendOffsets(instance: Instance, txn: BookedTxn): Promise<unknown> {
    const groupId = txnGroupId(this.index)
    const offset = txn.txnNumber + 1
    txn.offsetSent = offset
    try {
      await instance.producer.sendOffsetsToTransaction([{ topic: TOPIC, partition: 0, offset }], groupId)
    } catch (error) {
      this.workload.countError('sendOffsetsToTransaction', error)
      this.log(`txn ${txn.txnId}: sendOffsetsToTransaction failed (${errorName(error)})`)
      return error
    }
    this.log(`txn ${txn.txnId}: offset ${offset} of ${groupId} sent (sendOffsetsToTransaction)`)
    return null
  }

  /** After a failed send or offsets: a fenced client ends the instance; otherwise abort. */
  private async endAfterFailure(instance: Instance, txn: BookedTxn, _failure: unknown): Promise<void> {
    if (instance.producer.transactionState === 'FATAL_ERROR') {
      this.workload.fenced++
      txn.status = 'aborted'
      this.log(`txn ${txn.txnId} ends without commit: fenced`)
      await this.retire(instance, 'fenced')
      return
    }
    await this.end(instance, txn, false)
  }

  /** commitTransaction or abortTransaction, called again while it times out; the outcome goes to the book. */
  private async end(instance: Instance, txn: BookedTxn, commit: boolean): Promise<void> {
    const call = commit ? 'commitTransaction' : 'abortTransaction'
    txn.status = commit ? 'committing' : 'aborting'
    if (commit) txn.commitSent = true
    const started = this.world.scheduler.now
    for (;;) {
      try {
        if (commit) await instance.producer.commitTransaction()
        else await instance.producer.abortTransaction()
      } catch (error) {
        this.workload.countError(call, error)
        if (error instanceof BlockTimeoutError && this.world.scheduler.now - started < END_TXN_GIVE_UP_MS)
          continue
        return this.endFailed(instance, txn, commit, error)
      }
      txn.status = commit ? 'committed' : 'aborted'
      this.log(`txn ${txn.txnId} ${commit ? 'committed' : 'aborted'}${instance.zombie ? ' (zombie)' : ''}`)
      const before = this.booked
      const after = this.noteIdentity(instance)
      if (before?.producerId !== after.producerId || before.producerEpoch !== after.producerEpoch)
        this.workload.bumps++
      return
    }
  }

  /**
   * A commit or abort that failed for good. The client refusing to commit
   * (TransactionAbortableError: EndTxn(commit) was not sent) leaves the abort to do; a
   * refused commit that was sent, a fencing or a timeout leave a commit's outcome unknown,
   * and the instance is replaced. An abort that fails ends a transaction never asked to commit.
   */
  private async endFailed(
    instance: Instance,
    txn: BookedTxn,
    commit: boolean,
    error: unknown,
  ): Promise<void> {
    const state = instance.producer.transactionState
    if (commit && error instanceof TransactionAbortableError) {
      txn.commitSent = false
      this.log(`txn ${txn.txnId}: commit refused by the client (${error.message}); aborting`)
      return this.end(instance, txn, false)
    }
    const fenced = state === 'FATAL_ERROR'
    if (fenced) this.workload.fenced++
    if (error instanceof BlockTimeoutError) this.workload.lateEndTxn++
    txn.status = commit ? 'unknown' : 'aborted'
    this.log(
      commit
        ? `txn ${txn.txnId}: commitTransaction failed (${errorName(error)}${fenced ? ', fenced' : ''}); outcome unknown`
        : `txn ${txn.txnId} ends without commit: ${fenced ? 'fenced' : `abortTransaction failed (${errorName(error)})`}`,
    )
    await this.retire(instance, fenced ? 'fenced' : `gave up (${state})`)
  }
}

/**
 * Reads a transactional producer's group offset every 300-800 ms through tidelog's Admin
 * (listGroupOffsets with requireStable: OffsetFetch waits out offsets pending in an open
 * transaction); each answer goes to the check that no offset of an aborted or open
 * transaction becomes visible.
 */
export class TxnOffsetReader {
  private readonly admin: Admin
  private stopped = false
  private busy = false

  constructor(
    private readonly world: WorldInternals,
    readonly producer: number,
    private readonly random: SimRandom,
    private readonly workload: TxnWorkload,
    private readonly onFetched: (offset: number) => void,
  ) {
    this.admin = new Admin({
      ...simClientOptions(world, OFFSET_READER_NODE_BASE + producer, random.fork()),
      clientId: `sim-txn-offset-reader-${producer}`,
      requestTimeoutMs: 2500,
      operationTimeoutMs: 5000,
      metadataMaxAgeMs: 5000,
    })
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
    this.admin.close()
  }

  /** One stable read of the committed offset (-1: none), or null if the client gave up. */
  async fetchOnce(): Promise<number | null> {
    this.busy = true
    try {
      const offsets = await this.admin.listGroupOffsets(txnGroupId(this.producer), [TOPIC], {
        requireStable: true,
      })
      const offset = offsets.find((o) => o.topic === TOPIC && o.partition === 0)?.offset ?? -1
      this.onFetched(offset)
      return offset
    } catch (error) {
      if (!(error instanceof KafkaClientError)) throw error
      this.workload.countError('listGroupOffsets', error)
      return null
    } finally {
      this.busy = false
    }
  }
}

/**
 * The world's tap on a transactional Produce that reaches a broker after its client closed
 * the connection (a stalled link's late write): its outcome goes in the trace.
 */
export function lateProduceTap(
  broker: SimBroker,
  context: RequestContext,
  request: ProduceRequest,
  log: (message: string) => void,
): ReturnType<RequestTap> {
  const sent: string[] = []
  for (const topic of request.topicData)
    for (const p of topic.partitionData) {
      const batch = recordsBytes(p.records)
      if (batch.length < RECORD_BATCH_OVERHEAD) continue
      sent.push(
        `p${p.index} producer ${batch.readBigInt64BE(PRODUCER_ID_OFFSET)} epoch ${batch.readInt16BE(PRODUCER_EPOCH_OFFSET)} seq ${batch.readInt32BE(BASE_SEQUENCE_OFFSET)}`,
      )
    }
  const who = `late produce of ${context.header.clientId} (${sent.join(', ')}) to broker ${broker.nodeId}`
  log(`${who} arrives after its client gave up on it`)
  return (outcome) => {
    if (!('response' in outcome) || outcome.response === null) return
    for (const topic of (outcome.response as ProduceResponse).responses)
      for (const p of topic.partitionResponses)
        log(
          `${who}: p${p.index} ${p.errorCode === ErrorCode.NONE ? `appended @${p.baseOffset}` : `error ${p.errorCode}`}`,
        )
  }
}

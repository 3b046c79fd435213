/**
 * The liveness phase: once every fault has healed, every partition gets a leader and every
 * replica converges within LIVENESS_MS_MAX; then the whole-run checks: acknowledged writes
 * survived, consumers caught up, acknowledged group commits are read back, and every
 * transaction is decided and read as decided. Apart from world.ts so the end of a run
 * reads as one piece.
 */
import type { Partition } from '../replication/partition.js'
import { OffsetVerifier } from './group-member.js'
import { SimRandom } from './random.js'
import {
  checkFinalOffsets,
  checkFinalTransactions,
  type DecidedRecord,
  decideLog,
  decodeBatches,
} from './txn-checker.js'
import { TRANSACTION_TIMEOUT_MS } from './txn-producer.js'
import type { WorldInternals } from './world-internals.js'
import { TOPIC, Violation } from './world-view.js'
import type { Workload } from './world-workload.js'

const LIVENESS_MS_MAX = 60_000

export class LivenessPhase {
  constructor(
    private readonly world: WorldInternals,
    private readonly workload: Workload,
  ) {}

  async run(): Promise<void> {
    const start = this.world.scheduler.now
    this.world.log(`liveness phase: up to ${LIVENESS_MS_MAX} ms for leaders and converged replicas`)
    for (;;) {
      await this.world.runFor(500)
      const problem =
        (await this.world.invariants.convergenceProblem()) ??
        this.world.scale?.invariants.convergenceProblem(
          [...this.world.brokers.values()].filter((b) => b.isAlive && b.started),
        ) ??
        null
      if (problem === null) break
      if (this.world.scheduler.now - start > LIVENESS_MS_MAX)
        throw new Violation(`liveness: not converged ${LIVENESS_MS_MAX} ms after healing: ${problem}`)
      if (this.world.scheduler.peekTime() === undefined)
        throw new Violation(`liveness: no events left: ${problem}`)
    }
    this.world.log(`converged after ${this.world.scheduler.now - start} ms`)
    const scale = this.world.scale?.invariants
    if (scale)
      this.world.log(
        `scale: ${scale.waitsEnded} waits for a failover ended, the longest ${scale.failoverMaxMs} ms (${scale.failoverMaxAt || '-'}); every image equals the store's`,
      )
    if (this.workload.acksZeroValues.length > 0) {
      const committed = this.world.invariants.committedFirstValues()
      const landed = this.workload.acksZeroValues.filter((v) => committed.has(`${v}.0`)).length
      this.world.log(
        `acks=0: ${landed} of ${this.workload.acksZeroValues.length} writes committed (no survival claim)`,
      )
    }
    if (this.workload.idempotentProducer) await this.idempotentProducerSettles(start)
    await this.world.invariants.checkAckedSurvived()
    if (this.workload.consumers.length > 0) await this.consumersCatchUp(start)
    if (this.workload.groupWorkload) await this.groupOffsetsSurvived(start)
    if (this.world.options.transactions === true) await this.transactionsSettled(start)
    if (this.workload.share) await this.workload.share.settle()
  }

  /**
   * `transactions` at the end: the producers finish the transaction under way, every
   * partition's transactions get decided (the coordinator aborts the expired ones), the
   * read_committed consumers reach the high watermark, then the whole-run checks on the
   * final logs (txn-checker.ts checkFinalTransactions).
   */
  private async transactionsSettled(start: number): Promise<void> {
    const budgetMs = LIVENESS_MS_MAX + TRANSACTION_TIMEOUT_MS
    const waitFor = async (what: string, done: () => Promise<string | null>): Promise<void> => {
      for (;;) {
        const problem = await done()
        if (problem === null) return
        if (this.world.scheduler.now - start > budgetMs)
          throw new Violation(`liveness: ${what} ${budgetMs} ms after healing: ${problem}`)
        await this.world.runFor(200)
      }
    }
    await waitFor('transactional producers still busy', async () => {
      const busy = this.workload.txnProducers.filter((p) => !p.idle)
      return busy.length === 0 ? null : busy.map((p) => p.transactionalId).join(', ')
    })
    let logs = new Map<number, DecidedRecord[]>()
    await waitFor('transactions still open', async () => {
      logs = await this.finalTransactionLogs()
      for (const [partition, records] of logs) {
        const open = records.find((r) => r.decision === 'open')
        if (open)
          return `p${partition}: ${open.value} at offset ${open.offset} (producer ${open.producerId}) in an undecided transaction`
      }
      return this.lsoProblem()
    })
    await waitFor('read_committed consumers behind', async () => {
      const behind = this.workload.readCommittedConsumers.filter(
        (c) => c.position !== this.leaderPartition(c.partition)?.highWatermark,
      )
      return behind.length === 0 ? null : behind.map((c) => `p${c.partition} at ${c.position}`).join(', ')
    })
    for (const consumer of this.workload.readCommittedConsumers) consumer.stop()
    logs = await this.finalTransactionLogs()
    const txn = this.world.invariants.txn!
    const problem = checkFinalTransactions(txn.book, logs, txn.delivered)
    if (problem !== null) throw new Violation(problem)
    // The group offsets, from the (loaded) group coordinator once no reader is mid-request.
    for (const reader of this.workload.txnOffsetReaders) reader.stop()
    const finalOffsets: number[] = []
    for (const reader of this.workload.txnOffsetReaders) {
      let fetched: number | null = null
      await waitFor(`no stable OffsetFetch answer for txn producer ${reader.producer}'s group`, async () => {
        if (fetched !== null) return null
        if (!reader.idle) return 'a fetch in flight'
        reader.fetchOnce().then(
          (offset) => {
            fetched = offset
          },
          (error: unknown) => this.world.clientFailure(error),
        )
        return 'no answer yet'
      })
      reader.close()
      const offsetProblem = checkFinalOffsets(txn.book, reader.producer, fetched!, logs)
      if (offsetProblem !== null) throw new Violation(offsetProblem)
      finalOffsets.push(fetched!)
    }
    const c = txn.book.counts()
    const w = this.workload.txnWorkload
    const inLog = [...logs.values()].reduce(
      (n, records) => n + records.filter((r) => r.decision === 'commit').length,
      0,
    )
    this.world.log(
      `transactions: ${txn.book.txns.size} begun, ${c.committed} committed, ${c.aborted} aborted, ${c.unknown} unknown; ${w.inits} inits, ${w.bumps} epoch bumps, ${w.fenced} fenced, ${w.takeovers} takeovers by a new instance, ${w.stalls} stalled links, ${w.lateEndTxn} commits or aborts given up; errors ${[...w.errorCodes].map(([k, n]) => `${k}: ${n}`).join(', ') || 'none'}; ${inLog} committed records in the logs; read_committed consumers ${this.workload.readCommittedConsumers.map((r) => `p${r.partition} returned ${r.records} records`).join(', ')}; ${txn.stats.lsoChecks} LSO checks (${txn.stats.followerLsoChecks} on followers, ${txn.stats.lsoBehindHw} behind the HW), ${txn.stats.leaderAppendsChecked} leader appends checked for fenced epochs (${txn.stats.deposedFencedAppends} by deposed leaders, never committed); group offsets ${finalOffsets.join(', ')} (${txn.stats.offsetFetches} fetches checked)`,
    )
  }

  private leaderPartition(partition: number): Partition | undefined {
    const state = this.world.truth?.image().topics.get(TOPIC)?.partitions[partition]
    const leader = state ? this.world.brokers.get(state.leader) : undefined
    if (!leader?.isAlive || !leader.broker) return undefined
    return leader.replicaManager.getPartition(TOPIC, partition) ?? undefined
  }

  /** A leader whose last stable offset is behind its high watermark once every transaction is decided. */
  private lsoProblem(): string | null {
    for (let partition = 0; partition < this.world.partitionCount; partition++) {
      const p = this.leaderPartition(partition)
      if (!p?.isLeader) return `p${partition} has no acting leader`
      if (p.lastStableOffset !== p.highWatermark)
        return `p${partition} last stable offset ${p.lastStableOffset}, high watermark ${p.highWatermark}`
    }
    return null
  }

  /** Every partition's transactional records in its leader's log, each with its transaction's outcome there. */
  private async finalTransactionLogs(): Promise<Map<number, DecidedRecord[]>> {
    const logs = new Map<number, DecidedRecord[]>()
    for (let partition = 0; partition < this.world.partitionCount; partition++) {
      const p = this.leaderPartition(partition)
      if (!p) continue
      const chunks: Buffer[] = []
      let from = p.log.logStartOffset
      const end = p.log.logEndOffset
      while (from < end) {
        const read = await p.log.read(from, { maxBytes: 1 << 20, minOneMessage: true })
        if (read.sizeInBytes === 0) break
        chunks.push(...read.records)
        from = read.nextOffset
      }
      logs.set(partition, decideLog(decodeBatches(chunks)))
    }
    return logs
  }

  /**
   * (a) at the end: the members stop (their requests in flight answered or timed out), then
   * the coordinator, once loaded, returns at least every acknowledged commit.
   */
  private async groupOffsetsSurvived(start: number): Promise<void> {
    for (const member of this.workload.groupMembers) member.stop()
    while (this.workload.groupMembers.some((m) => !m.idle)) await this.world.runFor(100)
    this.workload.offsetVerifier?.stop()
    const verifier = new OffsetVerifier(
      this.world,
      new SimRandom(this.world.options.seed ^ 0x6710),
      this.workload.groupWorkload!,
      998,
    )
    let fetched = false
    verifier.fetchOnce().then(
      (ok) => {
        fetched = ok
      },
      (error: unknown) => this.world.groupFailure(error),
    )
    for (;;) {
      await this.world.runFor(100)
      if (fetched) break
      if (this.world.scheduler.now - start > LIVENESS_MS_MAX)
        throw new Violation(
          `liveness: no OffsetFetch answer from the group coordinator ${LIVENESS_MS_MAX} ms after healing`,
        )
      if (verifier.idle)
        verifier.fetchOnce().then(
          (ok) => {
            fetched = ok
          },
          (error: unknown) => this.world.groupFailure(error),
        )
    }
    verifier.stop()
    const w = this.workload.groupWorkload!
    const g = this.world.invariants.group.counts
    this.world.log(
      `group: ${w.rebalances} assignments, ${w.commits} commits (${w.ackedCommits} partition commits acknowledged), ${w.fetches} offset fetches (${g.fetches} checked, ${g.staleFetches} from a deposed coordinator, ${g.staleBehind} of those behind an acknowledged commit, ${g.overtaken} partition offsets overtaken by a later fetch's answer), ${g.coordinatorAnswers} coordinator answers, ${g.memberEpochs} member epochs checked; errors ${[...w.errorCodes].map(([code, n]) => `${code}: ${n}`).join(', ') || 'none'}; acknowledged commits found by the final OffsetFetch`,
    )
  }

  /** Every record the idempotent producer was given is acknowledged or failed (its delivery timeout). */
  private async idempotentProducerSettles(start: number): Promise<void> {
    const producer = this.workload.idempotentProducer!
    while (producer.pending > 0) {
      if (this.world.scheduler.now - start > LIVENESS_MS_MAX)
        throw new Violation(
          `liveness: the idempotent producer holds ${producer.pending} records ${LIVENESS_MS_MAX} ms after healing`,
        )
      await this.world.runFor(200)
    }
    this.world.log(producer.summary())
  }

  /**
   * After convergence every consumer reaches its partition's high watermark (all committed by
   * then), and has read back every acknowledged acks=all record at its offset.
   */
  private async consumersCatchUp(start: number): Promise<void> {
    const highWatermark = (partition: number): number => {
      const image = this.world.truth?.image().topics.get(TOPIC)?.partitions[partition]
      const leader = image ? this.world.brokers.get(image.leader) : undefined
      return leader?.broker?.replicaManager.getPartition(TOPIC, partition)?.highWatermark ?? -1
    }
    for (;;) {
      const behind = this.workload.consumers.filter((c) => c.position !== highWatermark(c.partition))
      if (behind.length === 0) break
      if (this.world.scheduler.now - start > LIVENESS_MS_MAX)
        throw new Violation(
          `liveness: consumers behind ${LIVENESS_MS_MAX} ms after healing: ${behind.map((c) => `p${c.partition} at ${c.position}`).join(', ')}`,
        )
      await this.world.runFor(200)
    }
    const consumers = this.world.invariants.consumer
    for (const consumer of this.workload.consumers) {
      consumers.onFinalPosition(consumer.partition, consumer.position)
      consumer.stop()
    }
    consumers.checkConsumedCommitted()
    this.world.invariants.checkAckedReadBack()
    this.world.log(
      `consumers caught up: ${this.workload.consumers.map((c) => `p${c.partition} at ${c.position} (${c.polls} polls, ${c.records} records, ${c.errors} errors${[...c.errorCodes].map(([code, n]) => `, ${code}: ${n}`).join('')})`).join(', ')}; ${consumers.recordsConsumed} records checked; every acknowledged acks=all record read back at its offset`,
    )
  }
}

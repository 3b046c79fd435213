/**
 * `--workload jepsen` (issue 35 item 2): Jepsen's Kafka workload on the netfault cluster.
 * Transactional producers (tidelog's client, transaction version 1 and 2 side by side:
 * tx1 and tx3 keep version 1, tx2 and the consume-transform-produce loop use KIP-890 part
 * 2, which the cluster finalizes) write records to several partitions per transaction and
 * commit or abort at random; read_committed consumers in consumer groups (classic, and KIP-848's protocol)
 * poll while members join, leave and crash (a crashed member's partitions come back after
 * the coordinator expires it, and every committed record must reach each group). Everything the clients see goes to a history file in
 * `tidelog verify`'s format (docs/history-format.md) as it happens; at the end a
 * read_committed reader reads every partition to its high watermark and the checker
 * (src/verify) judges the history.
 */
import { createWriteStream, type WriteStream } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  Admin,
  Consumer,
  type ConsumerRecord,
  Producer,
  type TopicPartition,
} from '../../src/client/index.js'
import { checkHistory, type VerifyReport } from '../../src/verify/checker.js'
import { readHistoryFile } from '../../src/verify/history-file.js'

export interface JepsenOptions {
  readonly bootstrap: string
  readonly topic: string
  readonly partitions: number
  readonly historyPath: string
  readonly random: () => number
  readonly log: (line: string) => void
}

export interface JepsenSummary {
  readonly historyPath: string
  readonly committed: number
  readonly aborted: number
  readonly undecided: number
  /** Transactions committed and aborted by the producers of each transaction version. */
  readonly byTransactionVersion: Readonly<Record<1 | 2, { committed: number; aborted: number }>>
  /** Records the transactional producers sent. */
  readonly sends: number
  /** Records the non-transactional idempotent producer sent. */
  readonly idempotentSends: number
  readonly reads: number
  /** Reads of the consume-transform-produce loop, each part of its transaction. */
  readonly ctpReads: number
  readonly consumersStarted: number
  /**
   * Group members that crashed (no commit, no leave), per group protocol; `...Owning`: those
   * that held partitions then (a crash before the first assignment moves nothing).
   */
  readonly crashes: {
    readonly classic: number
    readonly consumer: number
    readonly classicOwning: number
    readonly consumerOwning: number
  }
  /** Committed records a group never read (after catching up): lost to the group. */
  readonly groupUnread: readonly string[]
  /** `tidelog verify`'s anomalies plus the groups' unread partitions. */
  readonly anomalies: number
  readonly report: VerifyReport
}

const PRODUCERS = 3
/** The transaction version producer `tx<i>` uses (the consume-transform-produce loop: 2). */
const transactionVersionOf = (index: number): 1 | 2 => (index % 2 === 0 ? 2 : 1)
const CONSUMERS = 3
/** Short, so a transaction its producer left open (killed broker, lost commit) is aborted before the final read. */
const TRANSACTION_TIMEOUT_MS = 10000
const CLIENT_TIMEOUTS = { requestTimeoutMs: 5000, maxBlockMs: 15000, deliveryTimeoutMs: 30000 }
/**
 * How long the groups get, once the writers stopped, to read every committed record: a
 * member that crashed just before is expired after its session timeout (10 s, classic and
 * the brokers' group.consumer.session.timeout.ms), then its partitions move.
 */
const GROUP_CATCH_UP_MS = 60000

/** Per partition, the offsets a group's members read (crashed members' reads included). */
type GroupReads = Map<number, Set<number>>

type Fields = Record<string, string | number | boolean | null>

/** Appends history lines in the order things happened (one process, so write order is event order). */
class HistoryLog {
  private readonly stream: WriteStream
  constructor(path: string) {
    this.stream = createWriteStream(path, { encoding: 'utf8' })
    this.add('header', { format: 'tidelog-history', version: 1 })
  }
  add(type: string, fields: Fields): void {
    const time = type === 'header' ? {} : { time: Date.now() }
    this.stream.write(`${JSON.stringify({ type, ...time, ...fields })}\n`)
  }
  async close(): Promise<void> {
    await new Promise<void>((resolve, reject) =>
      this.stream.end((error?: Error | null) => (error ? reject(error) : resolve())),
    )
  }
}

const describe = (error: unknown): string =>
  error instanceof Error ? `${error.name}: ${error.message}` : String(error)

/** One transactional producer's loop; a new client (same transactional id) after any doubt. */
class TxnWriter {
  seq = 0
  txnNumber = 0
  committed = 0
  aborted = 0
  undecided = 0
  private producer: Producer | null = null

  constructor(
    readonly name: string,
    protected readonly o: JepsenOptions,
    protected readonly history: HistoryLog,
    /** transactionVersionMax: 2 uses version 2 when the cluster finalized it (initTransactions checks). */
    readonly transactionVersion: 1 | 2,
  ) {
    history.add('producer', { producer: name, idempotent: true, transactionalId: `jepsen-${name}` })
  }

  async run(stopping: () => boolean): Promise<void> {
    while (!stopping()) {
      try {
        if (!this.producer) this.producer = await this.newProducer()
        await this.transaction(this.producer)
      } catch (error) {
        this.o.log(`jepsen ${this.name}: ${describe(error)}; new producer`)
        await this.dropProducer()
        await sleep(500)
      }
    }
    await this.dropProducer()
  }

  private async newProducer(): Promise<Producer> {
    const producer = new Producer({
      bootstrapServers: this.o.bootstrap,
      clientId: `jepsen-${this.name}`,
      transactionalId: `jepsen-${this.name}`,
      transactionTimeoutMs: TRANSACTION_TIMEOUT_MS,
      transactionVersionMax: this.transactionVersion,
      ...CLIENT_TIMEOUTS,
    })
    try {
      await producer.initTransactions()
      // The netfault cluster finalizes transaction.version 2: a producer asking for it gets it.
      if (producer.transactionVersion !== this.transactionVersion)
        throw new Error(`transaction version ${producer.transactionVersion}, not ${this.transactionVersion}`)
    } catch (error) {
      await producer.close().catch(() => {})
      throw error
    }
    return producer
  }

  protected async dropProducer(): Promise<void> {
    const producer = this.producer
    this.producer = null
    await producer?.close().catch(() => {})
  }

  /** Sends to 2..4 partitions, then commits (3 in 4) or aborts; throws when the outcome is in doubt. */
  private async transaction(producer: Producer): Promise<void> {
    const txn = `t${++this.txnNumber}`
    const base = { producer: this.name, txn }
    producer.beginTransaction()
    this.history.add('begin', base)
    const partitions = await this.partitionsToWrite(producer, txn)
    // One record per partition: with more, a read_committed poll may end inside a committed
    // transaction's records below the LSO (Kafka allows it), which the consume-transform-
    // produce loop's reads would show as G1b on a correct cluster.
    // The first record is acknowledged before the others are sent: a read of it before their
    // send lines shows the transaction was open when read (the uncommitted-read check).
    const [first, ...rest] = partitions
    const firstAcked = await this.send(producer, txn, first)
    const sends = rest.map((partition) => this.send(producer, txn, partition))
    const allAcked = firstAcked && (await Promise.all(sends)).every(Boolean)
    const offsetsSent = allAcked && (await this.beforeCommit(producer, txn))
    if (offsetsSent && this.o.random() < 0.75) {
      try {
        await producer.commitTransaction()
      } catch (error) {
        // EndTxn may have reached the coordinator: the outcome is unknown, the line left out.
        this.undecided++
        throw error
      }
      this.history.add('commit', base)
      this.committed++
      return
    }
    // Never asked to commit, so it cannot commit: aborted whatever the abort call answers
    // (a new producer's InitProducerId or the transaction timeout aborts it otherwise).
    this.history.add('abort', base)
    this.aborted++
    await producer.abortTransaction()
  }

  /** Consume-transform-produce's hook: false aborts the transaction. */
  protected async beforeCommit(_producer: Producer, _txn: string): Promise<boolean> {
    return true
  }

  protected async send(producer: Producer, txn: string, partition: number): Promise<boolean> {
    const seq = this.seq++
    const value = `${this.name}-${seq}`
    const topic = this.o.topic
    this.history.add('send', { producer: this.name, seq, topic, partition, value, txn })
    try {
      const meta = await producer.send({ topic, partition, value })
      this.history.add('ack', {
        producer: this.name,
        seq,
        topic,
        partition: meta.partition,
        offset: meta.offset,
      })
      return true
    } catch (error) {
      this.history.add('fail', { producer: this.name, seq, error: describe(error) })
      return false
    }
  }

  protected async partitionsToWrite(_producer: Producer, _txn: string): Promise<number[]> {
    return this.pickPartitions(2 + Math.floor(this.o.random() * 3))
  }

  protected pickPartitions(n: number): number[] {
    const all = Array.from({ length: this.o.partitions }, (_, i) => i)
    for (let i = all.length - 1; i > 0; i--) {
      const j = Math.floor(this.o.random() * (i + 1))
      ;[all[i], all[j]] = [all[j], all[i]]
    }
    return all.slice(0, Math.min(n, all.length)).sort((a, b) => a - b)
  }
}

/**
 * A non-transactional idempotent producer in the same topic: 10 records in flight at a time
 * to random partitions, each send/ack/fail a line. Its records must be read exactly once,
 * in its order, at their acknowledged offsets.
 */
class IdempotentWriter {
  seq = 0

  constructor(
    readonly name: string,
    private readonly o: JepsenOptions,
    private readonly history: HistoryLog,
  ) {
    history.add('producer', { producer: name, idempotent: true })
  }

  async run(stopping: () => boolean): Promise<void> {
    const producer = new Producer({
      bootstrapServers: this.o.bootstrap,
      clientId: `jepsen-${this.name}`,
      enableIdempotence: true,
      ...CLIENT_TIMEOUTS,
    })
    try {
      while (!stopping()) {
        await Promise.all(Array.from({ length: 10 }, () => this.send(producer)))
        await sleep(50)
      }
    } finally {
      await producer.close().catch(() => {})
    }
  }

  private async send(producer: Producer): Promise<void> {
    const seq = this.seq++
    const value = `${this.name}-${seq}`
    const topic = this.o.topic
    const partition = Math.floor(this.o.random() * this.o.partitions)
    this.history.add('send', { producer: this.name, seq, topic, partition, value })
    try {
      const meta = await producer.send({ topic, partition, value })
      this.history.add('ack', {
        producer: this.name,
        seq,
        topic,
        partition: meta.partition,
        offset: meta.offset,
      })
    } catch (error) {
      this.history.add('fail', { producer: this.name, seq, error: describe(error) })
    }
  }
}

/**
 * Consume-transform-produce: polls the topic (read_committed, its own group, no auto-commit),
 * writes one record to each partition it read from (two others when it read nothing) and
 * sends the positions with the transaction. Its reads name the transaction (`producer` +
 * `txn`), so G1b and G1c are judged. After an abort or any doubt a new consumer incarnation
 * starts from the group's committed offsets (the old one's position is past records whose
 * offsets were never committed).
 */
class CtpWriter extends TxnWriter {
  private consumer: Consumer | null = null
  private incarnation = 0
  private poll = 0
  private errored = false
  reads = 0

  private get consumerName(): string {
    return `${this.name}.c${this.incarnation}`
  }

  private newConsumer(): Consumer {
    this.incarnation++
    const consumer = new Consumer({
      bootstrapServers: this.o.bootstrap,
      clientId: `jepsen-${this.name}-${this.incarnation}`,
      groupId: 'jepsen-ctp',
      isolationLevel: 'read_committed',
      autoOffsetReset: 'earliest',
      enableAutoCommit: false,
      requestTimeoutMs: 5000,
      sessionTimeoutMs: 10000,
      heartbeatIntervalMs: 1000,
      onPartitionsAssigned: (tps: TopicPartition[]) => {
        for (const tp of tps)
          this.history.add('assign', {
            consumer: this.consumerName,
            topic: tp.topic,
            partition: tp.partition,
          })
      },
    })
    consumer.subscribe([this.o.topic])
    return consumer
  }

  protected override async partitionsToWrite(_producer: Producer, txn: string): Promise<number[]> {
    this.consumer ??= this.newConsumer()
    const records = await this.consumer.poll(500)
    const poll = ++this.poll
    for (const r of records) {
      this.reads++
      this.history.add('read', { ...readFields(this.consumerName, poll, r), producer: this.name, txn })
    }
    const read = [...new Set(records.map((r) => r.partition))].sort((a, b) => a - b)
    return read.length > 0 ? read : this.pickPartitions(2)
  }

  protected override async beforeCommit(producer: Producer, _txn: string): Promise<boolean> {
    const consumer = this.consumer!
    const offsets = consumer.assignment().flatMap((tp) => {
      const position = consumer.position(tp)
      return position === null ? [] : [{ ...tp, offset: position }]
    })
    try {
      await producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata())
      return true
    } catch (error) {
      this.o.log(`jepsen ${this.name}: sendOffsetsToTransaction: ${describe(error)}; aborting`)
      return false
    }
  }

  override async run(stopping: () => boolean): Promise<void> {
    let decided = this.aborted + this.undecided
    await super.run(() => {
      // A new incarnation after an abort or an error (run() makes a new producer then too).
      if (this.aborted + this.undecided !== decided || this.errored) {
        decided = this.aborted + this.undecided
        this.errored = false
        const old = this.consumer
        this.consumer = null
        void old?.close().catch(() => {})
      }
      return stopping()
    })
    await this.consumer?.close().catch(() => {})
  }

  protected override async dropProducer(): Promise<void> {
    this.errored = true
    await super.dropProducer()
  }
}

function readFields(consumer: string, poll: number, r: ConsumerRecord): Fields {
  return {
    consumer,
    poll,
    isolation: 'read_committed',
    topic: r.topic,
    partition: r.partition,
    offset: r.offset,
    value: r.value?.toString() ?? '',
  }
}

/**
 * A read_committed group member; each incarnation is a new consumer name in the history.
 * When it departs it either leaves (close: commit, LeaveGroup) or crashes: its connections
 * close with no commit and no leave, and the coordinator must expire it.
 */
class GroupReader {
  reads = 0
  crashed = false
  /** Partitions it held when it crashed. */
  crashedOwning = 0
  private poll = 0

  constructor(
    readonly name: string,
    readonly protocol: 'classic' | 'consumer',
    private readonly o: JepsenOptions,
    private readonly history: HistoryLog,
    private readonly groupReads: GroupReads,
  ) {}

  async run(stopping: () => boolean, departing: () => boolean, crash: boolean): Promise<void> {
    const tidelogTopic = this.o.topic
    const consumer = new Consumer({
      bootstrapServers: this.o.bootstrap,
      clientId: `jepsen-${this.name}`,
      groupId: `jepsen-${this.protocol}`,
      groupProtocol: this.protocol,
      isolationLevel: 'read_committed',
      autoOffsetReset: 'earliest',
      requestTimeoutMs: 5000,
      ...(this.protocol === 'classic' ? { sessionTimeoutMs: 10000, heartbeatIntervalMs: 1000 } : {}),
      // A rebalance (or a reset after one) may move the position: the next read need not follow the last.
      onPartitionsAssigned: (tps: TopicPartition[]) => {
        for (const tp of tps)
          this.history.add('assign', { consumer: this.name, topic: tp.topic, partition: tp.partition })
      },
    })
    this.history.add('consumer', { consumer: this.name, group: `jepsen-${this.protocol}` })
    consumer.subscribe([tidelogTopic])
    try {
      // A member that is to crash waits for partitions first: a crash then must move them.
      while (!stopping() && (!departing() || (crash && consumer.assignment().length === 0))) {
        let records: ConsumerRecord[]
        try {
          records = await consumer.poll(1000)
        } catch (error) {
          this.o.log(`jepsen ${this.name}: poll: ${describe(error)}`)
          await sleep(500)
          continue
        }
        if (records.length > 0) this.record(records)
      }
    } finally {
      this.crashed = crash && !stopping()
      if (this.crashed) {
        this.crashedOwning = consumer.assignment().length
        this.history.add('crash', { consumer: this.name, group: `jepsen-${this.protocol}` })
      }
      await consumer.close({ abandon: this.crashed }).catch(() => {})
    }
  }

  private record(records: readonly ConsumerRecord[]): void {
    const poll = ++this.poll
    for (const r of records) {
      this.reads++
      this.history.add('read', readFields(this.name, poll, r))
      const offsets = this.groupReads.get(r.partition) ?? new Set<number>()
      this.groupReads.set(r.partition, offsets.add(r.offset))
    }
  }
}

export class JepsenWorkload {
  private readonly history: HistoryLog
  private readonly writers: TxnWriter[] = []
  private readonly readers: GroupReader[] = []
  private readonly idempotent: IdempotentWriter
  private readonly running: Promise<void>[] = []
  private readonly readerSlots: Promise<void>[] = []
  private readonly groupReads = new Map<'classic' | 'consumer', GroupReads>([
    ['classic', new Map()],
    ['consumer', new Map()],
  ])
  /** The writers stop first; the readers go on until the groups caught up (check()). */
  private writersStopped = false
  private stopped = false

  constructor(private readonly o: JepsenOptions) {
    this.history = new HistoryLog(o.historyPath)
    for (let i = 1; i <= PRODUCERS; i++)
      this.writers.push(new TxnWriter(`tx${i}`, o, this.history, transactionVersionOf(i)))
    this.writers.push(new CtpWriter('ctp', o, this.history, 2))
    this.idempotent = new IdempotentWriter('idem1', o, this.history)
  }

  start(): void {
    const stopping = () => this.writersStopped
    for (const w of this.writers) this.running.push(w.run(stopping))
    this.running.push(this.idempotent.run(stopping))
    for (let slot = 1; slot <= CONSUMERS; slot++) this.readerSlots.push(this.readerSlot(slot))
  }

  /**
   * A slot's members one after another: each stays 5-25 s, then departs and the next joins.
   * Every other departure is a crash (each slot's first or second), so both protocols'
   * groups see crashes in a short run; no departures once the writers stopped.
   */
  private async readerSlot(slot: number): Promise<void> {
    // The last slot speaks KIP-848's protocol, in a group of its own (a group has one protocol).
    const protocol = slot === CONSUMERS ? 'consumer' : 'classic'
    for (let n = 1; !this.stopped; n++) {
      const reader = new GroupReader(
        `c${slot}.${n}`,
        protocol,
        this.o,
        this.history,
        this.groupReads.get(protocol)!,
      )
      this.readers.push(reader)
      const departAtMs = Date.now() + 5000 + this.o.random() * 20000
      const departing = () => !this.writersStopped && Date.now() >= departAtMs
      await reader.run(() => this.stopped, departing, (n + slot) % 2 === 0)
    }
  }

  /** Ends every loop without waiting (a run that failed before check()): nothing polls on. */
  halt(): void {
    this.writersStopped = true
    this.stopped = true
  }

  /** Stops the writers; the group members poll on until check() has seen them catch up. */
  async stop(): Promise<void> {
    this.writersStopped = true
    await Promise.all(this.running)
  }

  /** Reads every partition to its high watermark with read_committed, then checks the history. */
  async check(): Promise<JepsenSummary> {
    const highWatermarks = await this.settledHighWatermarks()
    const committedOffsets = await this.finalRead(highWatermarks)
    const groupUnread = await this.groupsCaughtUp(committedOffsets)
    this.stopped = true
    await Promise.all(this.readerSlots)
    await this.recordGroupOffsets(highWatermarks)
    await this.history.close()
    const report = checkHistory(await readHistoryFile(this.o.historyPath))
    const sum = (f: (w: TxnWriter) => number, version?: 1 | 2) =>
      this.writers.reduce(
        (n, w) => n + (version === undefined || w.transactionVersion === version ? f(w) : 0),
        0,
      )
    const byVersion = (version: 1 | 2) => ({
      committed: sum((w) => w.committed, version),
      aborted: sum((w) => w.aborted, version),
    })
    const crashed = (protocol: string) => this.readers.filter((r) => r.crashed && r.protocol === protocol)
    return {
      historyPath: this.o.historyPath,
      committed: sum((w) => w.committed),
      aborted: sum((w) => w.aborted),
      undecided: sum((w) => w.undecided),
      byTransactionVersion: { 1: byVersion(1), 2: byVersion(2) },
      sends: sum((w) => w.seq),
      idempotentSends: this.idempotent.seq,
      reads: this.readers.reduce((n, r) => n + r.reads, 0),
      ctpReads: this.writers.reduce((n, w) => n + (w instanceof CtpWriter ? w.reads : 0), 0),
      consumersStarted: this.readers.length,
      crashes: {
        classic: crashed('classic').length,
        consumer: crashed('consumer').length,
        classicOwning: crashed('classic').filter((r) => r.crashedOwning > 0).length,
        consumerOwning: crashed('consumer').filter((r) => r.crashedOwning > 0).length,
      },
      groupUnread,
      anomalies: report.counts.anomalies + groupUnread.length,
      report,
    }
  }

  /**
   * The high watermarks once no transaction is open (LSO = HW everywhere): a transaction its
   * producer left open is aborted by the coordinator after its timeout. Before that a
   * read_committed reader stops at the LSO, and a `covered` line to the HW would call the
   * records after it lost (librdkafka's watermarks are its LSO: read_committed by default).
   */
  private async settledHighWatermarks(): Promise<number[]> {
    const topic = this.o.topic
    const tps = Array.from({ length: this.o.partitions }, (_, partition) => ({ topic, partition }))
    const reader = (isolationLevel: 'read_committed' | 'read_uncommitted') =>
      new Consumer({
        bootstrapServers: this.o.bootstrap,
        clientId: `jepsen-${isolationLevel}`,
        isolationLevel,
      })
    const [uncommitted, committed] = [reader('read_uncommitted'), reader('read_committed')]
    try {
      const deadline = Date.now() + 3 * TRANSACTION_TIMEOUT_MS + 30000
      for (;;) {
        const hw = await uncommitted.endOffsets(tps)
        const lso = await committed.endOffsets(tps)
        const ends = tps.map((tp) => hw.get(`${topic}/${tp.partition}`) ?? -1)
        if (tps.every((tp, i) => lso.get(`${topic}/${tp.partition}`) === ends[i] && ends[i] >= 0)) return ends
        if (Date.now() > deadline)
          throw new Error(`open transactions never ended: HW ${[...hw]}, LSO ${[...lso]}`)
        await sleep(500)
      }
    } finally {
      await Promise.all([uncommitted.close(), committed.close()])
    }
  }

  /**
   * Each group's committed offsets once its members stopped, as `group-offset` lines with
   * the settled end, so that `tidelog verify` judges the groups too (group skips, stalls).
   */
  private async recordGroupOffsets(highWatermarks: readonly number[]): Promise<void> {
    const admin = new Admin({ bootstrapServers: this.o.bootstrap, clientId: 'jepsen-group-offsets' })
    try {
      for (const protocol of this.groupReads.keys()) {
        const group = `jepsen-${protocol}`
        if (!this.readers.some((r) => r.protocol === protocol)) continue
        const committed = await admin.listGroupOffsets(group, [this.o.topic])
        for (const [partition, endOffset] of highWatermarks.entries()) {
          const offset = committed.find((c) => c.partition === partition)?.offset ?? -1
          const topic = this.o.topic
          this.history.add('group-offset', {
            group,
            topic,
            partition,
            offset: Math.max(offset, 0),
            endOffset,
          })
        }
      }
    } finally {
      await admin.close()
    }
  }

  /**
   * Waits until each group has read every committed record (at least once, by any member,
   * a crashed one included); returns, per group and partition, what it never read. A
   * coordinator that never expires a crashed member, or a new owner that starts past the
   * committed offset, leaves records here.
   */
  private async groupsCaughtUp(committed: ReadonlyMap<number, readonly number[]>): Promise<string[]> {
    const unread = () =>
      [...this.groupReads].flatMap(([protocol, reads]) =>
        [...committed].flatMap(([partition, offsets]) => {
          const missing = offsets.filter((offset) => !reads.get(partition)?.has(offset))
          return missing.length === 0
            ? []
            : [
                `group jepsen-${protocol} never read ${missing.length} of ${offsets.length} committed records of ${this.o.topic}-${partition} (first at offset ${missing[0]})`,
              ]
        }),
      )
    const deadline = Date.now() + GROUP_CATCH_UP_MS
    while (unread().length > 0 && Date.now() < deadline) await sleep(500)
    return unread()
  }

  /** Reads every partition to its high watermark; returns each partition's record offsets. */
  private async finalRead(highWatermarks: readonly number[]): Promise<Map<number, number[]>> {
    const offsets = new Map<number, number[]>(highWatermarks.map((_, partition) => [partition, []]))
    const consumer = new Consumer({
      bootstrapServers: this.o.bootstrap,
      clientId: 'jepsen-final',
      isolationLevel: 'read_committed',
    })
    const topic = this.o.topic
    consumer.assign(highWatermarks.map((_, partition) => ({ topic, partition, offset: 0 })))
    const done = () =>
      highWatermarks.every((hw, partition) => (consumer.position({ topic, partition }) ?? 0) >= hw)
    const deadline = Date.now() + 120000
    let poll = 0
    try {
      while (!done()) {
        if (Date.now() > deadline)
          throw new Error(
            `final read_committed read did not reach the high watermarks ${highWatermarks.join('/')}`,
          )
        const records = await consumer.poll(1000)
        poll++
        for (const r of records) {
          this.history.add('read', readFields('final', poll, r))
          offsets.get(r.partition)?.push(r.offset)
        }
      }
    } finally {
      await consumer.close()
    }
    for (const [partition, hw] of highWatermarks.entries())
      this.history.add('covered', { consumer: 'final', topic, partition, startOffset: 0, endOffset: hw })
    return offsets
  }
}

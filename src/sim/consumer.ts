/**
 * A consumer: one per partition, tidelog's own `Consumer` in assign mode from offset 0 over
 * the simulated network (`SimNetwork.clientConnector`; faults cut brokers, never clients)
 * with the scheduler as its clock and a fork of the seed as its random. It finds leaders,
 * long-polls (200 ms), follows leader changes and retries as it does against real brokers.
 * Two roles:
 *
 * - `consumers` (PLAIN_CONSUMER, read_uncommitted): every record it returns goes to
 *   `ConsumerInvariants.onRecord`: offsets in order without a gap but for control records,
 *   each equal to the record committed there.
 * - `transactions` (READ_COMMITTED_CONSUMER): the broker answers up to its last stable offset
 *   with the aborted transactions of the range; the client drops control batches and the
 *   batches of aborted transactions, as Java's CompletedFetch does. What a poll returns goes
 *   to `TxnInvariants.onDelivered`; the broker's answers themselves are checked as they leave
 *   the handler (world.ts's tap: nothing at or above the answering broker's last stable offset).
 *
 * auto.offset.reset is none: a stale leader whose log is shorter than what it read answers
 * OFFSET_OUT_OF_RANGE, which poll() throws; the loop polls on at the same position, as an
 * application that knows its data is never deleted would (nothing it consumed can have
 * gone: it was below a high watermark).
 */
import { Consumer } from '../client/consumer.js'
import { KafkaProtocolError } from '../client/errors.js'
import type { SimRandom } from './random.js'
import { simClientOptions, type WorldInternals } from './world-internals.js'
import { TOPIC } from './world-view.js'

const FETCH_WAIT_MS = 200
const REQUEST_TIMEOUT_MS = 1500
const POLL_TIMEOUT_MS = 500

/** What a consumer is for: its isolation level, where its records go, its ids. */
export interface SimConsumerRole {
  readonly isolationLevel: 'read_uncommitted' | 'read_committed'
  /** Its network id is this plus its partition: clients are never cut off. */
  readonly nodeBase: number
  readonly clientIdPrefix: string
  /** How the run's log lines name it. */
  readonly label: string
}

export const PLAIN_CONSUMER: SimConsumerRole = {
  isolationLevel: 'read_uncommitted',
  nodeBase: 100,
  clientIdPrefix: 'sim-consumer',
  label: 'consumer',
}

export const READ_COMMITTED_CONSUMER: SimConsumerRole = {
  isolationLevel: 'read_committed',
  nodeBase: 500,
  clientIdPrefix: 'sim-rc-consumer',
  label: 'read_committed consumer',
}

export class SimConsumer {
  polls = 0
  /** Records poll() returned. */
  records = 0
  errors = 0
  /** Error code (or name) → how many poll() calls threw it (the run's final line). */
  readonly errorCodes = new Map<string, number>()
  private readonly consumer: Consumer
  private stopped = false

  constructor(
    private readonly world: WorldInternals,
    readonly partition: number,
    private readonly random: SimRandom,
    private readonly role: SimConsumerRole = PLAIN_CONSUMER,
  ) {
    this.consumer = new Consumer({
      ...simClientOptions(world, role.nodeBase + partition, random.fork()),
      clientId: `${role.clientIdPrefix}-${partition}`,
      isolationLevel: role.isolationLevel,
      autoOffsetReset: 'none',
      fetchMaxWaitMs: FETCH_WAIT_MS,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      maxPartitionFetchBytes: 32 * 1024,
      fetchMaxBytes: 64 * 1024,
      metadataMaxAgeMs: 5000,
    })
  }

  /** The next offset the consumer will return. */
  get position(): number {
    return this.consumer.position({ topic: TOPIC, partition: this.partition }) ?? 0
  }

  start(): void {
    this.world.scheduler.schedule(this.random.int(10, 100), () => {
      this.consumer.assign([{ topic: TOPIC, partition: this.partition, offset: 0 }])
      this.loop().catch((error: unknown) => this.world.clientFailure(error))
    })
  }

  stop(): void {
    this.stopped = true
    this.consumer.close().catch((error: unknown) => this.world.clientFailure(error))
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      this.polls++
      let records: Awaited<ReturnType<Consumer['poll']>>
      try {
        records = await this.consumer.poll(POLL_TIMEOUT_MS)
      } catch (error) {
        if (this.stopped) return
        this.errors++
        const code = error instanceof KafkaProtocolError ? `code ${error.errorCode}` : String(error)
        this.errorCodes.set(code, (this.errorCodes.get(code) ?? 0) + 1)
        this.world.log(
          `${this.role.label} p${this.partition}: poll failed (${code}); polling on at ${this.position}`,
        )
        // A backoff on the simulated clock: a poll that fails at once must not spin.
        await new Promise<void>((resolve) => this.world.scheduler.schedule(this.random.int(50, 200), resolve))
        continue
      }
      this.deliver(records)
    }
  }

  private deliver(records: Awaited<ReturnType<Consumer['poll']>>): void {
    if (this.role.isolationLevel === 'read_committed') {
      // The transaction checker's final pass has begun once a read_committed consumer stops.
      if (this.stopped) return
      this.records += records.length
      this.world.onTxnDelivered(
        this.partition,
        records.map((record) => ({ offset: record.offset, value: record.value?.toString() ?? '' })),
      )
      return
    }
    for (const record of records) {
      this.records++
      this.world.checkInCallback(() =>
        this.world.invariants.consumer.onRecord(
          record.partition,
          record.offset,
          record.value?.toString() ?? null,
        ),
      )
    }
  }
}

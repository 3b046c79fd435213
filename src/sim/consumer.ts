/**
 * A consumer (`consumers`): one per partition, tidelog's own `Consumer` in assign mode from
 * offset 0, read_uncommitted, over the simulated network (`SimNetwork.clientConnector`,
 * network id 100 + partition; faults cut brokers, never clients) with the scheduler as its
 * clock and a fork of the seed as its random. It finds leaders, long-polls (200 ms), follows
 * leader changes and retries as it does against real brokers.
 *
 * auto.offset.reset is none: a stale leader whose log is shorter than what it read answers
 * OFFSET_OUT_OF_RANGE, which poll() throws; the loop polls on at the same position, as an
 * application that knows its data is never deleted would (nothing it consumed can have
 * gone: it was below a high watermark). Every record it returns goes to
 * `ConsumerInvariants.onRecord`: offsets in order without a gap but for control records,
 * each equal to the record committed there.
 */
import { Consumer } from '../client/consumer.js'
import { KafkaProtocolError } from '../client/errors.js'
import type { SimRandom } from './random.js'
import { simClientOptions, type WorldInternals } from './world-internals.js'
import { TOPIC } from './world-view.js'

const FETCH_WAIT_MS = 200
const REQUEST_TIMEOUT_MS = 1500
const POLL_TIMEOUT_MS = 500
/** Consumers' network ids: clients are never cut off (faults impair brokers). */
export const CONSUMER_NODE_BASE = 100

export class SimConsumer {
  polls = 0
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
  ) {
    this.consumer = new Consumer({
      ...simClientOptions(world, CONSUMER_NODE_BASE + partition, random.fork()),
      clientId: `sim-consumer-${partition}`,
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
        this.world.log(`consumer p${this.partition}: poll failed (${code}); polling on at ${this.position}`)
        // A backoff on the simulated clock: a poll that fails at once must not spin.
        await new Promise<void>((resolve) => this.world.scheduler.schedule(this.random.int(50, 200), resolve))
        continue
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
}

/**
 * A read_committed consumer (`transactions`): one per partition, tidelog's own `Consumer`
 * with isolation.level read_committed in assign mode from offset 0, over the simulated
 * network (network id 500 + partition; faults cut brokers, never clients) with the
 * scheduler as its clock and a fork of the seed as its random. The broker answers up to its
 * last stable offset with the aborted transactions of the range; the client drops control
 * batches and the batches of aborted transactions, as Java's CompletedFetch does.
 *
 * What poll() returns goes to `TxnInvariants.onDelivered`; the broker's answers themselves
 * are checked as they leave the handler (world.ts's tap: nothing at or above the answering
 * broker's last stable offset).
 */
import { Consumer } from '../client/consumer.js'
import { KafkaProtocolError } from '../client/errors.js'
import type { SimRandom } from './random.js'
import { simClientOptions, type WorldInternals } from './world-internals.js'
import { TOPIC } from './world-view.js'

const FETCH_WAIT_MS = 200
const REQUEST_TIMEOUT_MS = 1500
const POLL_TIMEOUT_MS = 500
/** read_committed consumers' network ids (clients are never cut off). */
export const TXN_CONSUMER_NODE_BASE = 500

export class SimReadCommittedConsumer {
  polls = 0
  errors = 0
  /** Records poll() returned. */
  returned = 0
  private readonly consumer: Consumer
  private stopped = false

  constructor(
    private readonly world: WorldInternals,
    readonly partition: number,
    private readonly random: SimRandom,
  ) {
    this.consumer = new Consumer({
      ...simClientOptions(world, TXN_CONSUMER_NODE_BASE + partition, random.fork()),
      clientId: `sim-rc-consumer-${partition}`,
      isolationLevel: 'read_committed',
      // A stale leader's OFFSET_OUT_OF_RANGE must not move the position: polled on instead.
      autoOffsetReset: 'none',
      fetchMaxWaitMs: FETCH_WAIT_MS,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      maxPartitionFetchBytes: 32 * 1024,
      fetchMaxBytes: 64 * 1024,
      metadataMaxAgeMs: 5000,
    })
  }

  /** The next offset the consumer will fetch. */
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
        this.world.log(
          `read_committed consumer p${this.partition}: poll failed (${code}); polling on at ${this.position}`,
        )
        await new Promise<void>((resolve) => this.world.scheduler.schedule(this.random.int(50, 200), resolve))
        continue
      }
      if (this.stopped) return
      this.returned += records.length
      this.world.onTxnDelivered(
        this.partition,
        records.map((record) => ({ offset: record.offset, value: record.value?.toString() ?? '' })),
      )
    }
  }
}

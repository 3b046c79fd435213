/**
 * The `_schemas` topic (one partition, compacted) through tidelog's own client, bootstrapped
 * at this broker: writes are Produce requests with acks=all, so they take the broker's
 * produce path and replicate like any record; a consumer assigned to partition 0 reads the
 * topic from its start and applies every record to the store, then follows it. `sync()`
 * reads up to the partition's current end; `append()` resolves once its records are applied
 * here, so a write is visible to the next read on this broker.
 */
import { Consumer } from '../client/consumer.js'
import { Producer } from '../client/producer.js'
import type { Logger } from '../common/logger.js'
import { Errors } from './errors.js'
import type { SchemaStore, SchemasRecord } from './store.js'
import type { RegistryClientOptions } from './types.js'

export const SCHEMAS_TOPIC = '_schemas'
const TP = { topic: SCHEMAS_TOPIC, partition: 0 }
const CLIENT_ID = 'tidelog-schema-registry'
/** Longest wait for the topic's end, or for a write to come back. */
const SYNC_TIMEOUT_MS = 15_000
const POLL_MS = 200
const FAILURE_LOG_MS = 10_000

export interface SchemasLogOptions {
  readonly client: RegistryClientOptions
  readonly store: SchemaStore
  readonly logger: Logger
}

export class SchemasLog {
  private readonly consumer: Consumer
  private producer: Producer | null = null
  /** Offset after the last record applied to the store. */
  private applied = 0
  private readonly waiters = new Set<{ offset: number; resolve: () => void }>()
  private closed = false
  private lastFailureLogMs = 0
  private readonly loop: Promise<void>

  constructor(private readonly options: SchemasLogOptions) {
    this.consumer = new Consumer({
      ...options.client,
      clientId: CLIENT_ID,
      autoOffsetReset: 'earliest',
      fetchMaxWaitMs: POLL_MS,
    })
    this.consumer.assign([{ ...TP, offset: 0 }])
    this.loop = this.follow()
  }

  /** Every record written before this call is applied when it resolves. */
  async sync(): Promise<void> {
    let end: number
    try {
      const ends = await this.consumer.endOffsets([TP])
      end = [...ends.values()][0] ?? 0
    } catch (error) {
      // No leader for _schemas now (a failover), or the broker is stopping: Confluent's 50001.
      throw Errors.storeError(`Error while reading ${SCHEMAS_TOPIC}: ${(error as Error).message}`, error)
    }
    await this.appliedUpTo(end)
  }

  async append(records: readonly SchemasRecord[]): Promise<void> {
    this.producer ??= new Producer({
      ...this.options.client,
      clientId: CLIENT_ID,
      acks: 'all',
    })
    let last = -1
    try {
      for (const record of records) {
        const sent = await this.producer.send({
          ...TP,
          key: Buffer.from(record.key),
          value: record.value === null ? null : Buffer.from(record.value),
        })
        last = sent.offset
      }
    } catch (error) {
      throw Errors.storeError(`Error while storing the schema: ${(error as Error).message}`, error)
    }
    await this.appliedUpTo(last + 1)
  }

  async close(): Promise<void> {
    this.closed = true
    await this.loop
    await this.producer?.close()
    await this.consumer.close()
  }

  private appliedUpTo(offset: number): Promise<void> {
    if (this.applied >= offset) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const waiter = { offset, resolve: () => resolve() }
      const timer = setTimeout(() => {
        this.waiters.delete(waiter)
        reject(Errors.timeout(`Timed out reading ${SCHEMAS_TOPIC} up to offset ${offset}`))
      }, SYNC_TIMEOUT_MS)
      waiter.resolve = () => {
        clearTimeout(timer)
        resolve()
      }
      this.waiters.add(waiter)
    })
  }

  private async follow(): Promise<void> {
    while (!this.closed) {
      try {
        const records = await this.consumer.poll(POLL_MS)
        for (const record of records) {
          this.options.store.apply(
            record.key?.toString('utf8') ?? null,
            record.value?.toString('utf8') ?? null,
          )
          this.applied = record.offset + 1
        }
        const position = this.consumer.position(TP)
        if (position !== null && position > this.applied) this.applied = position
      } catch (error) {
        if (this.closed) break
        // A failover fails every poll until a new leader serves: one line per FAILURE_LOG_MS.
        const now = Date.now()
        if (now - this.lastFailureLogMs >= FAILURE_LOG_MS) {
          this.lastFailureLogMs = now
          this.options.logger.warn(
            { err: error },
            `schema registry: reading ${SCHEMAS_TOPIC} failed, retrying`,
          )
        }
        await new Promise((resolve) => setTimeout(resolve, POLL_MS))
      }
      for (const waiter of this.waiters)
        if (waiter.offset <= this.applied) {
          this.waiters.delete(waiter)
          waiter.resolve()
        }
    }
  }
}

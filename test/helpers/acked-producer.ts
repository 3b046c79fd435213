/**
 * An acks=all writer for failover tests: a kafkajs idempotent producer cycling over a few
 * partitions of one topic, one send of 3 records per partition in turn, retrying each send
 * until it succeeds (as kafkajs advises for idempotence, so no sequence is left ambiguous).
 * It keeps where every record was acknowledged and when, so a test can ask whether writes
 * to a partition resumed after a failover and, at the end, whether every acknowledged
 * record is in the log exactly once at its offset (`checkAckedReadBack`, read with kcat).
 */
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kafka, logLevel } from 'kafkajs'
import { kcatConsume } from './compat-clients.js'

export interface AckedRecord {
  readonly partition: number
  readonly offset: number
  /** performance.now() when the send was answered. */
  readonly atMs: number
}

export class AckedProducer {
  /** value -> where and when it was acknowledged. */
  readonly acked = new Map<string, AckedRecord>()
  /** Per partition: when its last acknowledgement came (performance.now()). */
  readonly lastAckMs = new Map<number, number>()
  /** Sends kafkajs gave up on (none expected: it retries without end). */
  failed = 0
  private stopped = false
  private readonly done: Promise<void>

  constructor(
    bootstrap: string,
    readonly topic: string,
    readonly partitions: readonly number[],
    clientId = 'acked-producer',
  ) {
    const producer = new Kafka({
      clientId,
      brokers: bootstrap.split(','),
      logLevel: logLevel.NOTHING,
      requestTimeout: 5000,
      connectionTimeout: 3000,
      retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 100, maxRetryTime: 1000 },
    }).producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false })
    this.done = (async () => {
      await producer.connect()
      try {
        for (let n = 0; !this.stopped; n++) {
          const partition = partitions[n % partitions.length]
          const values = [0, 1, 2].map((i) => `${clientId}-${n}-${i}`)
          try {
            const result = await producer.send({
              topic,
              acks: -1,
              timeout: 5000,
              messages: values.map((value) => ({ partition, value })),
            })
            const meta = result.find((m) => m.partition === partition && m.errorCode === 0)
            assert.ok(meta, `send ${n}: no answer for partition ${partition}: ${JSON.stringify(result)}`)
            const atMs = performance.now()
            values.forEach((value, i) => {
              this.acked.set(value, { partition, offset: Number(meta.baseOffset) + i, atMs })
            })
            this.lastAckMs.set(partition, atMs)
          } catch (error) {
            if (error instanceof assert.AssertionError) throw error
            this.failed++
          }
          await sleep(2)
        }
      } finally {
        await producer.disconnect().catch(() => undefined)
      }
    })()
  }

  /** Partitions of `among` (default: all written) with no acknowledgement after `sinceMs`. */
  notAckedSince(sinceMs: number, among: readonly number[] = this.partitions): number[] {
    return among.filter((p) => (this.lastAckMs.get(p) ?? -1) <= sinceMs)
  }

  /** Stops after the send under way; gives up waiting for it after `timeoutMs`. */
  async stop(timeoutMs = 60_000): Promise<void> {
    this.stopped = true
    await Promise.race([this.done, sleep(timeoutMs, undefined, { ref: false })])
  }
}

/**
 * Reads every partition `producer` wrote with kcat (from the beginning to its end) and
 * returns the acknowledged records that are missing, duplicated or at another offset
 * than acknowledged, with the number of records read.
 */
export async function checkAckedReadBack(
  bootstrap: string,
  producer: AckedProducer,
): Promise<{ read: number; lost: string[]; duplicated: string[]; misplaced: string[] }> {
  const where = new Map<string, { partition: number; offset: number }[]>()
  let read = 0
  // A few kcat processes at a time: each reads one partition.
  const queue = [...producer.partitions]
  const reader = async () => {
    for (let partition = queue.shift(); partition !== undefined; partition = queue.shift()) {
      const { records, code, stderr } = await kcatConsume(bootstrap, producer.topic, {
        partition,
        extra: ['-X', 'fetch.wait.max.ms=20'],
        timeoutMs: 30_000,
      })
      assert.equal(code, 0, `kcat ${producer.topic}-${partition}: ${stderr}`)
      for (const r of records) {
        read++
        const list = where.get(r.value ?? '') ?? []
        list.push({ partition: r.partition, offset: r.offset })
        where.set(r.value ?? '', list)
      }
    }
  }
  await Promise.all([reader(), reader(), reader(), reader()])
  const lost: string[] = []
  const duplicated: string[] = []
  const misplaced: string[] = []
  for (const [value, ack] of producer.acked) {
    const found = where.get(value) ?? []
    if (found.length === 0) lost.push(value)
    else if (found.length > 1) duplicated.push(value)
    else if (found[0].partition !== ack.partition || found[0].offset !== ack.offset)
      misplaced.push(
        `${value} acked at ${ack.partition}:${ack.offset}, in the log at ${found[0].partition}:${found[0].offset}`,
      )
  }
  return { read, lost, duplicated, misplaced }
}

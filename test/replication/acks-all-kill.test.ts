/**
 * acks=all under kill -9 of partition leaders, with the reliability settings of DESIGN.md
 * (RF=3, min.insync.replicas=2, no unclean election): three `tidelog broker` processes on
 * etcd, two kafkajs producers writing all along, and two kill -9s: the leader of
 * partition 0, then (as soon as the first victim is back, before it has necessarily
 * rejoined the ISR) the partition's new leader, a kill right after a leader change.
 * Afterwards the whole log is read with kcat (no group, every partition from the
 * beginning to its end) and:
 *  - every record the idempotent producer (one partition per send) had acknowledged is in
 *    the log exactly once, at the offset it was acknowledged with;
 *  - every record the plain producer (one send for all partitions, as
 *    test/groups/coordinator-kill.test.ts does) had acknowledged is in the log. A record
 *    counts as acknowledged only when the send's result has an answer for its partition:
 *    kafkajs 2.2.4 resolves a multi-partition send without re-sending the records of a
 *    partition whose leader moved, during retries, to a broker that had already answered
 *    that send (sendMessages.js skips brokers with a response; tulios/kafkajs#1303), and
 *    leaves that partition out of the result. Such records are counted and printed.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kafka, logLevel, type RecordMetadata } from 'kafkajs'
import { type EtcdCluster, waitFor, withEtcdCluster } from '../helpers/broker-process.js'
import { kcatConsume } from '../helpers/compat-clients.js'
import { kcatMetadata, partitionOf } from '../helpers/metadata-view.js'

const TOPIC = 'acks-all-kill'
const PARTITIONS = 6

function kafka(bootstrap: string, clientId: string, retries: number): Kafka {
  return new Kafka({
    clientId,
    brokers: bootstrap.split(','),
    logLevel: logLevel.NOTHING,
    requestTimeout: 5000,
    connectionTimeout: 3000,
    retry: { retries, initialRetryTime: 100, maxRetryTime: 1000 },
  })
}

interface Acked {
  readonly partition: number
  readonly offset: number
}

/** kafkajs `idempotent`, one send per partition in turn (3 records), retrying until it succeeds. */
class IdempotentProducer {
  /** value -> where it was acknowledged. */
  readonly acked = new Map<string, Acked>()
  failed = 0
  private stopped = false
  readonly done: Promise<void>

  constructor(bootstrap: string) {
    // As kafkajs advises for idempotence: retry until it succeeds, so no sequence is left ambiguous.
    const producer = kafka(bootstrap, 'acks-all-idempotent', Number.MAX_SAFE_INTEGER).producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
    })
    this.done = (async () => {
      await producer.connect()
      try {
        for (let n = 0; !this.stopped; n++) {
          const partition = n % PARTITIONS
          const values = [0, 1, 2].map((i) => `i-${n}-${i}`)
          try {
            const result = await producer.send({
              topic: TOPIC,
              acks: -1,
              timeout: 5000,
              messages: values.map((value) => ({ partition, value })),
            })
            const meta = result.find((m) => m.partition === partition && m.errorCode === 0)
            assert.ok(meta, `send ${n}: no answer for partition ${partition}: ${JSON.stringify(result)}`)
            values.forEach((value, i) => {
              this.acked.set(value, { partition, offset: Number(meta.baseOffset) + i })
            })
          } catch (error) {
            if (error instanceof assert.AssertionError) throw error
            this.failed++
          }
          await sleep(5)
        }
      } finally {
        await producer.disconnect().catch(() => undefined)
      }
    })()
  }

  async stop(): Promise<void> {
    this.stopped = true
    await this.done
  }
}

/** Plain kafkajs producer, each send 2 records to every partition (coordinator-kill's pattern). */
class RoundProducer {
  /** Values of partitions the send's result answered with no error. */
  readonly acked = new Set<string>()
  /** Values of resolved sends whose result has no answer for their partition. */
  readonly unanswered = new Set<string>()
  rounds = 0
  failedRounds = 0
  private stopped = false
  readonly done: Promise<void>

  constructor(bootstrap: string) {
    const producer = kafka(bootstrap, 'acks-all-rounds', 30).producer({ allowAutoTopicCreation: false })
    this.done = (async () => {
      await producer.connect()
      try {
        for (let round = 0; !this.stopped; round++) {
          const messages: { partition: number; value: string }[] = []
          for (let p = 0; p < PARTITIONS; p++)
            for (let i = 0; i < 2; i++) messages.push({ partition: p, value: `r-${round}-${p}-${i}` })
          let result: RecordMetadata[]
          try {
            result = await producer.send({ topic: TOPIC, acks: -1, timeout: 5000, messages })
            this.rounds++
          } catch {
            this.failedRounds++
            continue
          }
          const answered = new Set(result.filter((m) => m.errorCode === 0).map((m) => m.partition))
          for (const m of messages) (answered.has(m.partition) ? this.acked : this.unanswered).add(m.value)
        }
      } finally {
        await producer.disconnect().catch(() => undefined)
      }
    })()
  }

  async stop(): Promise<void> {
    this.stopped = true
    await this.done
  }
}

async function leaderOf(cluster: EtcdCluster, partition: number, not = -1): Promise<number> {
  return waitFor(
    `a live leader of ${TOPIC}-${partition}${not >= 0 ? ` other than ${not}` : ''}`,
    async () => {
      const { leader } = partitionOf(await kcatMetadata(cluster.liveBootstrap, TOPIC), TOPIC, partition)
      return leader >= 0 && leader !== not && cluster.broker(leader).isRunning ? leader : undefined
    },
    20000,
    100,
  )
}

test('acks=all, RF=3, min.insync.replicas=2: kill -9 of the leader, then of its successor right after the leader change; no acknowledged record lost', {
  timeout: 120000,
}, async () => {
  await withEtcdCluster({ brokers: 3 }, async (cluster) => {
    const started = Date.now()
    const log = (line: string) => console.log(`${((Date.now() - started) / 1000).toFixed(1)} s: ${line}`)
    const all = cluster.brokers.map((b) => b.address).join(',')
    const admin = kafka(all, 'acks-all-admin', 10).admin()
    await admin.connect()
    await admin.createTopics({
      topics: [
        {
          topic: TOPIC,
          numPartitions: PARTITIONS,
          replicationFactor: 3,
          configEntries: [
            { name: 'min.insync.replicas', value: '2' },
            { name: 'unclean.leader.election.enable', value: 'false' },
          ],
        },
      ],
      waitForLeaders: true,
    })
    await admin.disconnect()

    const idempotent = new IdempotentProducer(all)
    const rounds = new RoundProducer(all)
    try {
      await sleep(2000)
      const first = await leaderOf(cluster, 0)
      await cluster.broker(first).kill()
      log(`killed broker ${first}, leader of partition 0`)
      const second = await leaderOf(cluster, 0, first)
      log(`broker ${second} leads partition 0`)
      await sleep(1500)
      await cluster.broker(first).start()
      await cluster.waitForBrokers([1, 2, 3], 20000)
      await cluster.broker(second).kill()
      log(`broker ${first} back; killed broker ${second}, leader of partition 0`)
      const third = await leaderOf(cluster, 0, second)
      log(`broker ${third} leads partition 0`)
      await sleep(1500)
      await cluster.broker(second).start()
      await cluster.waitForBrokers([1, 2, 3], 20000)
      log(`broker ${second} back`)
      await sleep(1000)
    } finally {
      await Promise.race([
        Promise.all([idempotent.stop(), rounds.stop()]),
        sleep(60000, undefined, { ref: false }),
      ])
    }
    log(
      `idempotent: ${idempotent.acked.size} acknowledged, ${idempotent.failed} failed sends; rounds: ${rounds.rounds} resolved, ${rounds.failedRounds} failed`,
    )
    await waitFor(
      'every partition with a leader and a full ISR',
      async () => {
        const view = await kcatMetadata(cluster.liveBootstrap, TOPIC)
        const partitions = view.topics.get(TOPIC) ?? []
        return partitions.length === PARTITIONS &&
          partitions.every((p) => p.leader >= 0 && p.isr.length === 3)
          ? true
          : undefined
      },
      30000,
      200,
    )

    const { records, code, stderr } = await kcatConsume(cluster.liveBootstrap, TOPIC, { timeoutMs: 60000 })
    assert.equal(code, 0, stderr)
    const where = new Map<string, Acked[]>()
    for (const r of records) {
      const list = where.get(r.value ?? '') ?? []
      list.push({ partition: r.partition, offset: r.offset })
      where.set(r.value ?? '', list)
    }

    const lost: string[] = []
    const duplicated: string[] = []
    const misplaced: string[] = []
    for (const [value, ack] of idempotent.acked) {
      const found = where.get(value) ?? []
      if (found.length === 0) lost.push(value)
      else if (found.length > 1) duplicated.push(value)
      else if (found[0].partition !== ack.partition || found[0].offset !== ack.offset)
        misplaced.push(
          `${value} acked ${ack.partition}:${ack.offset}, in the log at ${found[0].partition}:${found[0].offset}`,
        )
    }
    const roundsLost = [...rounds.acked].filter((v) => !where.has(v))
    const unansweredAbsent = [...rounds.unanswered].filter((v) => !where.has(v))
    const summary = {
      records: records.length,
      idempotentAcked: idempotent.acked.size,
      idempotentLost: lost.length,
      idempotentDuplicated: duplicated.length,
      idempotentMisplaced: misplaced.length,
      roundsAcked: rounds.acked.size,
      roundsLost: roundsLost.length,
      roundsDuplicated: [...rounds.acked].filter((v) => (where.get(v)?.length ?? 0) > 1).length,
      roundsUnanswered: rounds.unanswered.size,
      roundsUnansweredAbsent: unansweredAbsent.length,
    }
    console.log(`ACKS-ALL-KILL ${JSON.stringify(summary)}`)
    if (unansweredAbsent.length > 0)
      console.log(
        `kafkajs resolved sends without an answer for some partitions (not sent again after the leader moved): ${unansweredAbsent.slice(0, 8)}`,
      )
    assert.ok(idempotent.acked.size > 100, `only ${idempotent.acked.size} idempotent records acknowledged`)
    assert.ok(rounds.acked.size > 100, `only ${rounds.acked.size} round records acknowledged`)
    assert.deepEqual(lost.slice(0, 10), [], `${lost.length} acknowledged idempotent records not in the log`)
    assert.deepEqual(duplicated.slice(0, 10), [], `${duplicated.length} idempotent records in the log twice`)
    assert.deepEqual(
      misplaced.slice(0, 10),
      [],
      `${misplaced.length} idempotent records not where acknowledged`,
    )
    assert.deepEqual(roundsLost.slice(0, 10), [], `${roundsLost.length} acknowledged records not in the log`)
    const errors = cluster.errorLogs()
    if (errors.length > 0) console.log(`error logs: ${JSON.stringify(errors.slice(0, 5))}`)
  })
})

/**
 * Issue 15's failure checks with kafkajs on three brokers (tidelog/testing, RF 3, min ISR
 * 2): kill -9 of the broker leading the transaction's __transaction_state partition in the
 * middle of a transaction, after which the commit completes on the new coordinator (which
 * loaded the replicated state) and the next transaction works; kill -9 of a data
 * partition's leader during EndTxn, whose marker then goes to the new leader; and a
 * transaction abandoned by its producer when its coordinator dies, aborted by the new
 * coordinator once its timeout passes, so no partition keeps it open (LSO back at the HW).
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { TRANSACTION_STATE_TOPIC } from '../../src/coordinator/transaction/transaction-log.js'
import { partitionForTransactionalId } from '../../src/coordinator/transaction/transaction-state-manager.js'
import { startCluster, type TestCluster } from '../helpers/testing.js'
import { waitUntil } from '../helpers/wait.js'

const TOPIC = 'txn-failover'
const PARTITIONS = 3
const TXN_PARTITIONS = 5

function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 30_000) {
  return waitUntil(what, timeoutMs, condition, 100)
}

describe('transaction coordinator failover (kill -9)', () => {
  let cluster: TestCluster
  let kafka: Kafka
  before(async () => {
    cluster = await startCluster({
      brokers: 3,
      properties: {
        'transaction.state.log.num.partitions': TXN_PARTITIONS,
        'transaction.abort.timed.out.transaction.cleanup.interval.ms': 500,
      },
      topics: [{ name: TOPIC, partitions: PARTITIONS, configs: { 'min.insync.replicas': 2 } }],
    })
    kafka = new Kafka({
      clientId: 'txn-failover',
      brokers: cluster.bootstrapServers.split(','),
      logLevel: logLevel.NOTHING,
      retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 1000 },
    })
  })
  after(async () => {
    await cluster?.stop()
  })

  const coordinatorOf = (transactionalId: string) =>
    cluster.leaderOf(TRANSACTION_STATE_TOPIC, partitionForTransactionalId(transactionalId, TXN_PARTITIONS))

  it('the commit of a transaction whose coordinator was killed completes on the next one', async () => {
    const producer = kafka.producer({ transactionalId: 'fo-tx', idempotent: true, maxInFlightRequests: 1 })
    await producer.connect()
    const values: string[] = []
    try {
      const txn = await producer.transaction()
      for (let p = 0; p < PARTITIONS; p++) {
        await txn.send({ topic: TOPIC, messages: [{ partition: p, value: `before-kill-${p}` }] })
        values.push(`before-kill-${p}`)
      }
      const killed = coordinatorOf('fo-tx')
      cluster.kill(killed)
      await txn.commit()
      assert.notEqual(coordinatorOf('fo-tx'), killed, 'another broker coordinates now')
      const next = await producer.transaction()
      await next.send({ topic: TOPIC, messages: [{ partition: 0, value: 'after-kill' }] })
      values.push('after-kill')
      await next.commit()
      await cluster.restart(killed)
    } finally {
      await producer.disconnect()
    }
    const consumer = kafka.consumer({
      groupId: 'fo-read-committed',
      readUncommitted: false,
      maxWaitTimeInMs: 200,
    })
    const seen: string[] = []
    await consumer.connect()
    try {
      await consumer.subscribe({ topic: TOPIC, fromBeginning: true })
      await consumer.run({
        eachMessage: async ({ message }) => {
          seen.push(message.value?.toString() ?? '')
        },
      })
      await waitFor('the committed records', () => values.every((v) => seen.includes(v)))
    } finally {
      await consumer.disconnect()
    }
    assert.deepEqual(seen.filter((v) => values.includes(v)).sort(), [...values].sort(), 'each once')
  })

  it('a data partition leader killed during EndTxn: its marker goes to the new leader, the commit completes', async () => {
    const transactionalId = 'fo-data-leader'
    const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
    await producer.connect()
    const values: string[] = []
    let killed = -1
    try {
      const txn = await producer.transaction()
      for (let p = 0; p < PARTITIONS; p++) {
        await txn.send({ topic: TOPIC, messages: [{ partition: p, value: `${transactionalId}-${p}` }] })
        values.push(`${transactionalId}-${p}`)
      }
      const coordinator = coordinatorOf(transactionalId)
      const victim = [0, 1, 2].find((p) => cluster.leaderOf(TOPIC, p) !== coordinator)
      assert.ok(victim !== undefined, 'a partition led away from the coordinator')
      killed = cluster.leaderOf(TOPIC, victim)
      const committing = txn.commit()
      cluster.kill(killed)
      await committing
      const next = await producer.transaction()
      await next.send({ topic: TOPIC, messages: [{ partition: victim, value: `${transactionalId}-next` }] })
      values.push(`${transactionalId}-next`)
      await next.commit()
    } finally {
      await producer.disconnect()
      if (killed >= 0) await cluster.restart(killed)
    }
    const consumer = kafka.consumer({
      groupId: 'fo-data-leader-rc',
      readUncommitted: false,
      maxWaitTimeInMs: 200,
    })
    const seen: string[] = []
    await consumer.connect()
    try {
      await consumer.subscribe({ topic: TOPIC, fromBeginning: true })
      await consumer.run({
        eachMessage: async ({ message }) => {
          seen.push(message.value?.toString() ?? '')
        },
      })
      await waitFor('the committed records', () => values.every((v) => seen.includes(v)))
    } finally {
      await consumer.disconnect()
    }
    assert.deepEqual(seen.filter((v) => values.includes(v)).sort(), [...values].sort(), 'each once')
  })

  it('a transaction left open when its coordinator dies is aborted after its timeout', async () => {
    const transactionalId = 'fo-abandoned'
    const producer = kafka.producer({
      transactionalId,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: 3000,
    })
    await producer.connect()
    const txn = await producer.transaction()
    await txn.send({ topic: TOPIC, messages: [{ partition: 1, value: 'abandoned' }] })
    /** Whether partition 1's leader has its LSO behind its HW; null while it has no live leader. */
    const lsoBehindHw = (): boolean | null => {
      const leader = cluster.leaderOf(TOPIC, 1)
      if (leader < 0 || !cluster.isRunning(leader)) return null
      const partition = cluster.broker(leader).replicaManager.getPartition(TOPIC, 1)
      if (!partition?.isLeader) return null
      return partition.lastStableOffset < partition.log.highWatermark
    }
    await waitFor('the open transaction holding the LSO back', () => lsoBehindHw() === true)
    const killed = coordinatorOf(transactionalId)
    cluster.kill(killed)
    // The producer goes away without ending the transaction.
    await producer.disconnect()
    await waitFor('a new coordinator', () => {
      const leader = coordinatorOf(transactionalId)
      return leader !== killed && leader >= 0
    })
    await waitFor('the abort of the timed-out transaction', () => {
      const [state] = cluster
        .broker(coordinatorOf(transactionalId))
        .transactionCoordinator.describe([transactionalId])
      return state.transactionState === 'CompleteAbort'
    })
    await waitFor('the LSO back at the high watermark', () => lsoBehindHw() === false)
    await cluster.restart(killed)
  })
})

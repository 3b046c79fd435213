/**
 * The README's example: a small kafkajs consumer service under test with tidelog/testing.
 * The service keeps a running total per customer from an `orders` topic; the test kills the
 * leader of the service's partition while orders flow and checks what the service did: it
 * kept consuming through the failover and counted every order exactly once (it skips order
 * ids it has seen, so a redelivery after the failover does no harm).
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kafka, logLevel } from 'kafkajs'
import { startCluster, type TestCluster } from '../../src/testing/index.js'
import { guardedLogger } from '../helpers/log-guard.js'

/** The service under test: totals per customer, idempotent per order id. */
class OrderTotals {
  readonly totals = new Map<string, number>()
  private readonly seen = new Set<string>()
  private readonly consumer

  constructor(kafka: Kafka) {
    this.consumer = kafka.consumer({ groupId: 'order-totals', sessionTimeout: 6000, heartbeatInterval: 500 })
  }

  async start(): Promise<void> {
    await this.consumer.connect()
    await this.consumer.subscribe({ topic: 'orders', fromBeginning: true })
    await this.consumer.run({
      eachMessage: async ({ message }) => {
        const order = JSON.parse(message.value!.toString()) as {
          id: string
          customer: string
          amount: number
        }
        if (this.seen.has(order.id)) return
        this.seen.add(order.id)
        this.totals.set(order.customer, (this.totals.get(order.customer) ?? 0) + order.amount)
      },
    })
  }

  get ordersCounted(): number {
    return this.seen.size
  }

  stop(): Promise<void> {
    return this.consumer.disconnect()
  }
}

let cluster: TestCluster

before(async () => {
  cluster = await startCluster({
    // The log guard's logger: an unexpected error line of a broker fails the test.
    logger: guardedLogger('tidelog/testing broker'),
    brokers: 3,
    topics: [{ name: 'orders', partitions: 1, replicationFactor: 3, configs: { 'min.insync.replicas': 2 } }],
  })
})
after(() => cluster.stop())

test('the order-totals service counts every order once while its partition leader is killed', async () => {
  const kafka = new Kafka({
    clientId: 'example',
    brokers: cluster.bootstrapServers.split(','),
    logLevel: logLevel.NOTHING,
    retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 1000 },
  })
  const service = new OrderTotals(kafka)
  await service.start()
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const expected = new Map<string, number>()
  const send = async (i: number): Promise<void> => {
    const customer = `c${i % 5}`
    await producer.send({
      topic: 'orders',
      acks: -1,
      messages: [{ key: customer, value: JSON.stringify({ id: `o${i}`, customer, amount: i }) }],
    })
    expected.set(customer, (expected.get(customer) ?? 0) + i)
  }
  for (let i = 0; i < 50; i++) await send(i)
  cluster.kill(cluster.leaderOf('orders', 0))
  for (let i = 50; i < 100; i++) await send(i)
  const deadline = Date.now() + 30_000
  while (service.ordersCounted < 100) {
    assert.ok(Date.now() < deadline, `the service counted ${service.ordersCounted} of 100 orders`)
    await sleep(50)
  }
  assert.deepEqual(service.totals, expected)
  await producer.disconnect()
  await service.stop()
})

/**
 * Helpers of the consumer group tests: kafkajs consumers that record what they were
 * assigned and what they consumed, and polling until a condition holds.
 */
import { type Consumer, Kafka, logLevel } from 'kafkajs'
import { waitUntil } from '../helpers/wait.js'

/** Broker properties that keep group tests fast: no initial delay, short sessions allowed. */
export const FAST_GROUP_PROPERTIES = {
  'group.initial.rebalance.delay.ms': 0,
  'group.min.session.timeout.ms': 1000,
  'offsets.topic.num.partitions': 10,
}

export function kafka(bootstrap: string, clientId = 'tidelog-groups-test'): Kafka {
  return new Kafka({
    clientId,
    brokers: bootstrap.split(','),
    logLevel: logLevel.NOTHING,
    retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 },
  })
}

export interface TrackedConsumer {
  readonly name: string
  readonly consumer: Consumer
  /** Partitions of the latest assignment (GROUP_JOIN event). */
  assignment: number[]
  /** "partition:offset" of every message consumed. */
  readonly consumed: string[]
  readonly values: string[]
  /** The member's latest group events (crash, rebalance, join, stop), for a failure message. */
  readonly events: string[]
}

const EVENTS_KEPT = 20

/** A kafkajs consumer subscribed to `topic`, running eachMessage, its progress recorded. */
export async function startConsumer(
  bootstrap: string,
  groupId: string,
  topic: string,
  name: string,
  options: {
    sessionTimeout?: number
    heartbeatInterval?: number
    autoCommitInterval?: number
    retries?: number
  } = {},
): Promise<TrackedConsumer> {
  const consumer = kafka(bootstrap, name).consumer({
    groupId,
    sessionTimeout: options.sessionTimeout ?? 6000,
    heartbeatInterval: options.heartbeatInterval ?? 300,
    rebalanceTimeout: 10000,
    // kafkajs heartbeats between fetches only: a long poll must stay well inside the session.
    maxWaitTimeInMs: 500,
    retry: { retries: options.retries ?? 30, initialRetryTime: 100, maxRetryTime: 1000 },
  })
  const tracked: TrackedConsumer = { name, consumer, assignment: [], consumed: [], values: [], events: [] }
  consumer.on(consumer.events.GROUP_JOIN, (event) => {
    tracked.assignment = [...(event.payload.memberAssignment[topic] ?? [])].sort((a, b) => a - b)
  })
  for (const event of ['CRASH', 'REBALANCING', 'GROUP_JOIN', 'STOP', 'DISCONNECT'] as const)
    consumer.on(consumer.events[event], (e) => {
      const payload = String(JSON.stringify(e.payload, (_k, v) => (v instanceof Error ? String(v) : v)))
      const line = `${new Date().toISOString().slice(11, 23)} ${event} ${payload.slice(0, 300)}`
      tracked.events.push(line)
      if (tracked.events.length > EVENTS_KEPT) tracked.events.shift()
      if (process.env.GROUPS_DEBUG) console.log(tracked.name, line)
    })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommitInterval: options.autoCommitInterval ?? 200,
    eachMessage: async ({ partition, message }) => {
      tracked.consumed.push(`${partition}:${message.offset}`)
      tracked.values.push(message.value?.toString() ?? '')
    },
  })
  return tracked
}

export async function produce(
  bootstrap: string,
  topic: string,
  partitions: number,
  perPartition: number,
  tag: string,
) {
  const producer = kafka(bootstrap).producer({ allowAutoTopicCreation: false })
  await producer.connect()
  try {
    // One send per partition: kafkajs 2.2.4 can resolve a send spanning several leaders
    // without the records of a partition whose leader moved meanwhile (tulios/kafkajs#1303;
    // see test/replication/acks-all-kill.test.ts).
    const perSend = []
    for (let p = 0; p < partitions; p++) {
      const messages = []
      for (let i = 0; i < perPartition; i++) messages.push({ partition: p, value: `${tag}-${p}-${i}` })
      perSend.push(messages)
    }
    await Promise.all(perSend.map((messages) => producer.send({ topic, acks: -1, messages })))
    return perSend.flat().map((m) => m.value)
  } finally {
    await producer.disconnect()
  }
}

export async function waitFor(
  what: string,
  timeoutMs: number,
  probe: () => Promise<boolean> | boolean,
): Promise<void> {
  // A probe that throws while a broker restarts is polled again; its last error is the failure.
  return waitUntil(what, timeoutMs, probe, 50)
}

/** Partitions held by the consumers, sorted; each partition at most once when balanced. */
export function assignedPartitions(consumers: readonly TrackedConsumer[]): number[] {
  return consumers.flatMap((c) => c.assignment).sort((a, b) => a - b)
}

/**
 * tidelog's transactional producer at transaction version 1 and 2 (issue 35 item 2), end
 * to end on a real broker finalized at version 2 and on Apache Kafka 4.4 (one node, its
 * default version 2): the same transactions (commit, abort, commit, each with records on
 * two partitions and the group's offset) with `transactionVersionMax` 1 and 2. At 1 the
 * epoch stays the one initTransactions got; at 2 every EndTxn v5 bumps it, and the
 * producer carries on with the bumped one (a stale epoch would be fenced). Either way a
 * read_committed consumer reads exactly the committed records, and the group's offset is
 * the last committed transaction's.
 */
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { Consumer } from '../../src/client/consumer.js'
import { Producer } from '../../src/client/producer.js'
import { withBroker } from '../helpers/cluster.js'
import { type KafkaReference, startKafkaReference } from '../helpers/kafka-reference.js'
import { waitUntil } from '../helpers/wait.js'

const BROKER_PROPERTIES = {
  'transaction.state.log.replication.factor': 1,
  'transaction.state.log.min.isr': 1,
  'transaction.state.log.num.partitions': 3,
  'offsets.topic.num.partitions': 3,
  'group.initial.rebalance.delay.ms': 0,
}
const READ_DEADLINE_MS = 60_000
const RECORDS_PER_PARTITION = 3

/** The transactions in order: whether each commits, and the group offset it sends. */
const PLAN: readonly { name: string; commit: boolean; offset: number }[] = [
  { name: 'first', commit: true, offset: 10 },
  { name: 'second', commit: false, offset: 20 },
  { name: 'third', commit: true, offset: 30 },
]

interface Outcome {
  /** Producer epoch after init and after each transaction, relative to init's. */
  readonly epochSteps: number[]
  /** What a read_committed consumer reads, sorted. */
  readonly committedValues: string[]
  readonly groupOffset: string
}

/** The PLAN at transaction version `version`, with topic and group of its own. */
async function runPlan(bootstrap: string, version: 1 | 2): Promise<Outcome> {
  const topic = `tv${version}-out`
  const groupId = `tv${version}-group`
  const admin = new Admin({ bootstrapServers: bootstrap })
  const producer = new Producer({
    bootstrapServers: bootstrap,
    transactionalId: `tv${version}-txn`,
    transactionVersionMax: version,
    lingerMs: 0,
    maxBlockMs: 30_000,
  })
  try {
    await admin.createTopics([{ topic, numPartitions: 2, replicationFactor: 1 }])
    await producer.initTransactions()
    assert.equal(producer.transactionVersion, version)
    const initEpoch = producer.producerIdentity!.producerEpoch
    const epochSteps = [0]
    for (const step of PLAN) {
      producer.beginTransaction()
      const sends = []
      for (let partition = 0; partition < 2; partition++)
        for (let i = 0; i < RECORDS_PER_PARTITION; i++)
          sends.push(producer.send({ topic, partition, value: `${step.name}-p${partition}-${i}` }))
      await Promise.all(sends)
      await producer.sendOffsetsToTransaction([{ topic, partition: 0, offset: step.offset }], groupId)
      if (step.commit) await producer.commitTransaction()
      else await producer.abortTransaction()
      epochSteps.push(producer.producerIdentity!.producerEpoch - initEpoch)
    }
    const expected = PLAN.filter((s) => s.commit).length * 2 * RECORDS_PER_PARTITION
    const committedValues = (await readCommitted(bootstrap, topic, expected)).sort()
    const offsets = await admin.listGroupOffsets(groupId, [topic], { requireStable: true })
    return { epochSteps, committedValues, groupOffset: offsets.map((o) => String(o.offset)).join(',') }
  } finally {
    await producer.close()
    admin.close()
  }
}

/** The topic's records a read_committed consumer reads, once `expected` arrived and the end is reached. */
async function readCommitted(bootstrap: string, topic: string, expected: number): Promise<string[]> {
  const consumer = new Consumer({
    bootstrapServers: bootstrap,
    isolationLevel: 'read_committed',
    fetchMaxWaitMs: 100,
  })
  const values: string[] = []
  try {
    consumer.assign([
      { topic, partition: 0 },
      { topic, partition: 1 },
    ])
    consumer.seekToBeginning()
    await waitUntil(`${expected} committed records of ${topic}`, READ_DEADLINE_MS, async () => {
      for (const r of await consumer.poll(200)) values.push(r.value?.toString() ?? '')
      return values.length >= expected
    })
    // One more poll: nothing aborted may follow the committed ones.
    for (const r of await consumer.poll(500)) values.push(r.value?.toString() ?? '')
  } finally {
    await consumer.close()
  }
  return values
}

function expectedValues(): string[] {
  return PLAN.filter((s) => s.commit)
    .flatMap((s) =>
      [0, 1].flatMap((p) => Array.from({ length: RECORDS_PER_PARTITION }, (_, i) => `${s.name}-p${p}-${i}`)),
    )
    .sort()
}

function assertOutcome(outcome: Outcome, version: 1 | 2): void {
  assert.deepEqual(
    outcome.epochSteps,
    version === 1 ? [0, 0, 0, 0] : [0, 1, 2, 3],
    version === 1 ? 'version 1 keeps the epoch' : 'version 2 bumps the epoch at every EndTxn',
  )
  assert.deepEqual(outcome.committedValues, expectedValues())
  assert.equal(outcome.groupOffset, '30')
}

describe('transactional producer at transaction version 1 and 2', () => {
  let kafka: KafkaReference | null = null
  after(async () => {
    await kafka?.stop()
  })

  it('tidelog: the same transactions at version 1 and 2; read_committed reads exactly the committed ones', {
    timeout: 180_000,
  }, async () => {
    await withBroker(
      async (cluster) => {
        for (const version of [1, 2] as const)
          assertOutcome(await runPlan(cluster.bootstrapServers, version), version)
      },
      { properties: BROKER_PROPERTIES },
    )
  })

  it('Apache Kafka 4.4: the same', { timeout: 400_000 }, async () => {
    kafka = await startKafkaReference()
    for (const version of [1, 2] as const) assertOutcome(await runPlan(kafka.bootstrap, version), version)
  })
})

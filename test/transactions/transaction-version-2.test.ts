/**
 * Issue 33 item 3, transaction version 2 (KIP-890 part 2) on the wire: the same raw
 * requests sent to tidelog (one broker) and to Apache Kafka 4.4 (one node), both at their
 * default transaction.version 2,
 * every answer recorded and both transcripts compared with the expected one:
 *
 * - Produce v12 with no AddPartitionsToTxn: the leader adds the partition itself;
 * - EndTxn v5 answers the producer id and the epoch bumped by one, at every end; a retry
 *   (the epoch below) gets the same answer; the same epoch is the next transaction;
 * - after the end, a Produce v12 from the old epoch is refused, to a partition of the ended
 *   transaction (its marker carries the bumped epoch) and to another one (the coordinator
 *   fences the old epoch);
 * - an abort with no transaction ongoing only bumps the epoch; a commit of none is refused;
 * - a transaction past its timeout is aborted by the coordinator one epoch up.
 */
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { ErrorCode, errorName } from '../../src/protocol/error-codes.js'
import type { ApiVersionsResponse } from '../../src/protocol/generated/api-versions-response.js'
import type { CreateTopicsResponse } from '../../src/protocol/generated/create-topics-response.js'
import type { DescribeTransactionsResponse } from '../../src/protocol/generated/describe-transactions-response.js'
import type { EndTxnResponse } from '../../src/protocol/generated/end-txn-response.js'
import type { FindCoordinatorResponse } from '../../src/protocol/generated/find-coordinator-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { InitProducerIdResponse } from '../../src/protocol/generated/init-producer-id-response.js'
import type { ProduceResponse } from '../../src/protocol/generated/produce-response.js'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import { type KafkaReference, startKafkaReference, TIDELOG_AS_REFERENCE } from '../helpers/kafka-reference.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { startCluster, type TestCluster } from '../helpers/testing.js'
import { waitUntil } from '../helpers/wait.js'

const TOPIC = 'tv2-raw'
const TRANSACTIONAL_ID = 'tv2-raw-txn'
const STEP_DEADLINE_MS = 60_000
/** Short enough that the coordinator aborts within seconds; its abort check runs every 500 ms. */
const SHORT_TIMEOUT_MS = 2000
const CLEANUP = { 'transaction.abort.timed.out.transaction.cleanup.interval.ms': 500 }

const EXPECTED = [
  'ApiVersions: Produce v12, EndTxn v5, TxnOffsetCommit v5; transaction.version 2',
  'InitProducerId NONE',
  'Produce v12 p0 epoch+0 NONE',
  'EndTxn v5 commit epoch+0 NONE -> same id, epoch+1',
  'EndTxn v5 commit epoch+0 NONE -> same id, epoch+1',
  'state CompleteCommit',
  'Produce v12 p0 epoch+0 INVALID_PRODUCER_EPOCH',
  'Produce v12 p1 epoch+0 INVALID_PRODUCER_EPOCH',
  'EndTxn v5 commit epoch+1 INVALID_TXN_STATE',
  'Produce v12 p1 epoch+1 NONE',
  'EndTxn v5 abort epoch+1 NONE -> same id, epoch+2',
  'state CompleteAbort',
  'EndTxn v5 abort epoch+2 NONE -> same id, epoch+3',
  'state CompleteAbort',
  'EndTxn v5 commit epoch+3 INVALID_TXN_STATE',
  'InitProducerId NONE epoch+4',
  'Produce v12 p0 epoch+4 NONE',
  'state CompleteAbort',
  // Kafka 4.4 bumps a timed-out TV2 transaction's epoch once (the abort's bump, not the
  // fence's too): the producer's abort of it is then a retry, its commit refused.
  'timed out: epoch+5',
  'EndTxn v5 commit epoch+4 INVALID_TXN_STATE',
  'EndTxn v5 abort epoch+4 NONE -> same id, epoch+5',
]

/** Answers a client retries as they are. */
const TRANSIENT: ReadonlySet<number> = new Set([
  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
  ErrorCode.NOT_COORDINATOR,
  ErrorCode.NOT_LEADER_OR_FOLLOWER,
  ErrorCode.LEADER_NOT_AVAILABLE,
  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
  ErrorCode.NOT_ENOUGH_REPLICAS,
  ErrorCode.CONCURRENT_TRANSACTIONS,
  ErrorCode.REQUEST_TIMED_OUT,
])

async function settled<T>(what: string, attempt: () => Promise<T>, code: (answer: T) => number): Promise<T> {
  const deadline = Date.now() + STEP_DEADLINE_MS
  for (;;) {
    const answer = await attempt()
    if (!TRANSIENT.has(code(answer))) return answer
    if (Date.now() > deadline) throw new Error(`${what}: still ${errorName(code(answer))}`)
    await sleep(200)
  }
}

/** The steps above, against one broker at `port`; the transcript. */
async function replay(port: number): Promise<string[]> {
  const client = await RawClient.connect(port)
  const log: string[] = []
  const call = <T>(apiKey: number, version: number, body: unknown) =>
    rawCall<T>(client, apiKey, version, body, 30_000)
  try {
    const versions = await call<ApiVersionsResponse>(ApiKey.ApiVersions, 4, {
      clientSoftwareName: 'tv2-test',
      clientSoftwareVersion: '1',
    })
    const max = (key: number) => versions.apiKeys.find((k) => k.apiKey === key)?.maxVersion ?? -1
    const level = versions.finalizedFeatures.find((f) => f.name === 'transaction.version')?.maxVersionLevel
    log.push(
      `ApiVersions: Produce v${Math.min(max(ApiKey.Produce), 12)}, EndTxn v${max(ApiKey.EndTxn)}, ` +
        `TxnOffsetCommit v${Math.min(max(ApiKey.TxnOffsetCommit), 5)}; transaction.version ${level}`,
    )
    const created = await call<CreateTopicsResponse>(ApiKey.CreateTopics, 5, {
      topics: [{ name: TOPIC, numPartitions: 2, replicationFactor: 1, assignments: [], configs: [] }],
      timeoutMs: 30_000,
    })
    assert.equal(created.topics[0]?.errorCode, ErrorCode.NONE, created.topics[0]?.errorMessage ?? '')
    // The coordinator's partition is created by the first FindCoordinator for it.
    await settled(
      'FindCoordinator',
      () => call<FindCoordinatorResponse>(ApiKey.FindCoordinator, 3, { key: TRANSACTIONAL_ID, keyType: 1 }),
      (a) => a.errorCode,
    )
    const init = await settled(
      'InitProducerId',
      () =>
        call<InitProducerIdResponse>(ApiKey.InitProducerId, 5, {
          transactionalId: TRANSACTIONAL_ID,
          transactionTimeoutMs: 60_000,
          producerId: -1n,
          producerEpoch: -1,
        }),
      (a) => a.errorCode,
    )
    log.push(`InitProducerId ${errorName(init.errorCode)}`)
    const producerId = init.producerId
    const base = init.producerEpoch
    const sequences = new Map<string, number>()

    const produce = async (partition: number, epoch: number) => {
      const key = `${partition}/${epoch}`
      const sequence = sequences.get(key) ?? 0
      const records = encodeRecordBatchSync({
        records: [{ key: null, value: Buffer.from(`p${partition} epoch ${epoch} #${sequence}`) }],
        producerId,
        producerEpoch: epoch,
        baseSequence: sequence,
        isTransactional: true,
        defaultTimestamp: Date.now(),
      })
      const answer = await settled(
        'Produce',
        () =>
          call<ProduceResponse>(ApiKey.Produce, 12, {
            transactionalId: TRANSACTIONAL_ID,
            acks: -1,
            timeoutMs: 30_000,
            topicData: [{ name: TOPIC, partitionData: [{ index: partition, records }] }],
          }),
        (a) => a.responses[0]?.partitionResponses[0]?.errorCode ?? -1,
      )
      const code = answer.responses[0]?.partitionResponses[0]?.errorCode ?? -1
      if (code === ErrorCode.NONE) sequences.set(key, sequence + 1)
      log.push(`Produce v12 p${partition} epoch+${epoch - base} ${errorName(code)}`)
    }
    const end = async (result: 'commit' | 'abort', epoch: number) => {
      const answer = await settled(
        'EndTxn',
        () =>
          call<EndTxnResponse>(ApiKey.EndTxn, 5, {
            transactionalId: TRANSACTIONAL_ID,
            producerId,
            producerEpoch: epoch,
            committed: result === 'commit',
          }),
        (a) => a.errorCode,
      )
      const named =
        answer.errorCode === ErrorCode.NONE
          ? ` -> ${answer.producerId === producerId ? 'same id' : `id ${answer.producerId}`}, epoch+${answer.producerEpoch - base}`
          : ''
      log.push(`EndTxn v5 ${result} epoch+${epoch - base} ${errorName(answer.errorCode)}${named}`)
    }
    const awaitState = async (state: string) => {
      let seen = ''
      await waitUntil(`transaction ${state}`, STEP_DEADLINE_MS, async () => {
        const answer = await call<DescribeTransactionsResponse>(ApiKey.DescribeTransactions, 0, {
          transactionalIds: [TRANSACTIONAL_ID],
        })
        seen = answer.transactionStates[0]?.transactionState ?? ''
        return seen === state
      })
      log.push(`state ${seen}`)
    }

    await produce(0, base)
    await end('commit', base)
    await end('commit', base) // a retry whose answer was lost
    await awaitState('CompleteCommit')
    await produce(0, base) // the ended epoch, where its COMMIT marker (epoch+1) is
    await produce(1, base) // the ended epoch, a partition it never wrote
    await end('commit', base + 1) // nothing written in the next transaction yet
    await produce(1, base + 1)
    await end('abort', base + 1)
    await awaitState('CompleteAbort')
    await end('abort', base + 2) // no transaction ongoing: the epoch is bumped all the same
    await awaitState('CompleteAbort')
    await end('commit', base + 3)

    // The coordinator's own abort of a transaction past its timeout (the cluster's
    // transaction version decides how it bumps): the epoch it leaves, and what the
    // producer is told then.
    const timedOut = await settled(
      'InitProducerId',
      () =>
        call<InitProducerIdResponse>(ApiKey.InitProducerId, 5, {
          transactionalId: TRANSACTIONAL_ID,
          transactionTimeoutMs: SHORT_TIMEOUT_MS,
          producerId,
          producerEpoch: base + 3,
        }),
      (a) => a.errorCode,
    )
    log.push(`InitProducerId ${errorName(timedOut.errorCode)} epoch+${timedOut.producerEpoch - base}`)
    await produce(0, timedOut.producerEpoch)
    await awaitState('CompleteAbort')
    const described = await call<DescribeTransactionsResponse>(ApiKey.DescribeTransactions, 0, {
      transactionalIds: [TRANSACTIONAL_ID],
    })
    log.push(`timed out: epoch+${(described.transactionStates[0]?.producerEpoch ?? 0) - base}`)
    await end('commit', timedOut.producerEpoch)
    await end('abort', timedOut.producerEpoch)
    return log
  } finally {
    client.socket.destroy()
  }
}

describe('transaction version 2 on the wire: tidelog answers as Kafka 4.4', () => {
  let cluster: TestCluster | undefined
  let kafka: KafkaReference | undefined
  after(async () => {
    await cluster?.stop()
    await kafka?.stop()
  })

  it('tidelog (1 broker, transaction.version 2 by default)', { timeout: 180_000 }, async () => {
    cluster = await startCluster({ brokers: 1, properties: { ...TIDELOG_AS_REFERENCE, ...CLEANUP } })
    const port = cluster.broker(cluster.brokerIds[0]).port
    assert.deepEqual(await replay(port), EXPECTED)
    await cluster.stop()
    cluster = undefined
  })

  it('Kafka 4.4 (1 node, transaction.version 2 by default): the same answers', {
    timeout: 300_000,
  }, async () => {
    kafka = await startKafkaReference({ nodes: 1, properties: CLEANUP })
    const port = Number(kafka.bootstrap.split(',')[0]?.split(':')[1])
    assert.deepEqual(await replay(port), EXPECTED)
  })
})

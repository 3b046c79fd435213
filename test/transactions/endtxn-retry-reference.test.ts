/**
 * Issue 40 item 3: what a transactional client is told when it ends a transaction again,
 * late, or at a coordinator that took over, replayed as raw requests against tidelog and
 * against Apache Kafka 4.4 (the reference broker), three brokers each, with transaction
 * version 1 requests (EndTxn up to v4 and AddPartitionsToTxn from the client are version 1
 * on both, whatever transaction.version is finalized: tidelog's 2, the reference's 1; a
 * timeout bumps the epoch once either way). Every step's answer is recorded
 * and the transcripts compared; Kafka's is the one its
 * TransactionCoordinator.endTransactionWithTV1 gives:
 *
 * - EndTxn repeated after its commit (abort) completed: NONE; the other result:
 *   INVALID_TXN_STATE. So is an EndTxn when no AddPartitionsToTxn reached the coordinator
 *   (Empty, or the previous transaction's Complete* state): librdkafka 2.0.2 then sends
 *   EndTxn(abort) and turns the answer into a fatal error, on Kafka as on tidelog.
 * - EndTxn after the coordinator timed the transaction out and aborted it with a bumped
 *   epoch: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH before EndTxn v2 (librdkafka 2.0.2
 *   sends v1).
 * - The coordinator killed (kill -9): the next one, having loaded the replicated state,
 *   commits an ongoing transaction, answers a repeated commit NONE and an abort after it
 *   INVALID_TXN_STATE, finishes a commit the dead one had acknowledged, and times out and
 *   fences a transaction left open.
 * - A commit whose only partition lost its only replica: the one difference, kept on
 *   purpose (TIDELOG_ANSWERS).
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { ErrorCode, errorName } from '../../src/protocol/error-codes.js'
import type { AddPartitionsToTxnResponse } from '../../src/protocol/generated/add-partitions-to-txn-response.js'
import type { CreateTopicsResponse } from '../../src/protocol/generated/create-topics-response.js'
import type { DescribeTransactionsResponse } from '../../src/protocol/generated/describe-transactions-response.js'
import type { EndTxnResponse } from '../../src/protocol/generated/end-txn-response.js'
import type { FindCoordinatorResponse } from '../../src/protocol/generated/find-coordinator-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { InitProducerIdResponse } from '../../src/protocol/generated/init-producer-id-response.js'
import type { MetadataResponse } from '../../src/protocol/generated/metadata-response.js'
import type { ProduceResponse } from '../../src/protocol/generated/produce-response.js'
import { ZERO_UUID } from '../../src/protocol/primitives.js'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import { type KafkaReference, startKafkaReference, TIDELOG_AS_REFERENCE } from '../helpers/kafka-reference.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { startCluster, type TestCluster } from '../helpers/testing.js'

/** RF 3, three partitions: its markers can always be written while two brokers live. */
const TOPIC = 'endtxn-retry'
/** One partition on one broker, killed: the markers of a commit to it cannot be written. */
const STUCK_TOPIC = 'endtxn-stuck'
const LONG_TIMEOUT_MS = 120_000
/** Short enough that the coordinator aborts within seconds; the abort check runs every 500 ms. */
const SHORT_TIMEOUT_MS = 2000
const STEP_DEADLINE_MS = 60_000
const CLEANUP_INTERVAL_MS = 500
/** How long the leaderless commit is given to complete (Kafka: at its next marker retry). */
const LEADERLESS_WAIT_MS = 5000

/** The answers Kafka 4.4 gives, step by step. */
const KAFKA_ANSWERS = [
  'commit: InitProducerId NONE',
  'commit: AddPartitionsToTxn NONE',
  'commit: Produce NONE',
  'commit: EndTxn v3 commit NONE',
  'commit: state CompleteCommit',
  'commit: EndTxn v3 commit NONE',
  'commit: EndTxn v1 commit NONE',
  'commit: EndTxn v3 abort INVALID_TXN_STATE',
  'commit: EndTxn v1 abort INVALID_TXN_STATE',
  'never-added: InitProducerId NONE',
  'never-added: EndTxn v1 abort INVALID_TXN_STATE',
  'never-added: EndTxn v1 commit INVALID_TXN_STATE',
  'abort: InitProducerId NONE',
  'abort: AddPartitionsToTxn NONE',
  'abort: Produce NONE',
  'abort: EndTxn v3 abort NONE',
  'abort: state CompleteAbort',
  'abort: EndTxn v3 abort NONE',
  'abort: EndTxn v3 commit INVALID_TXN_STATE',
  'timeout: InitProducerId NONE',
  'timeout: AddPartitionsToTxn NONE',
  'timeout: Produce NONE',
  'timeout: state CompleteAbort',
  'timeout: epoch bumped by 1',
  'timeout: EndTxn v1 commit INVALID_PRODUCER_EPOCH',
  'timeout: EndTxn v3 commit PRODUCER_FENCED',
  'timeout: EndTxn v1 abort INVALID_PRODUCER_EPOCH',
  'timeout: EndTxn v3 abort PRODUCER_FENCED',
  'timeout: AddPartitionsToTxn PRODUCER_FENCED',
  'timeout: InitProducerId NONE',
  'timeout: epoch bumped by 2',
  'failover-open: InitProducerId NONE',
  'failover-open: AddPartitionsToTxn NONE',
  'failover-open: Produce NONE',
  'failover-acked: InitProducerId NONE',
  'failover-acked: AddPartitionsToTxn NONE',
  'failover-acked: Produce NONE',
  'failover-acked: EndTxn v3 commit NONE',
  'failover-timeout: InitProducerId NONE',
  'failover-timeout: AddPartitionsToTxn NONE',
  'failover-timeout: Produce NONE',
  'stuck: InitProducerId NONE',
  'stuck: AddPartitionsToTxn NONE',
  'stuck: Produce NONE',
  'coordinator killed',
  'stuck: partition without a leader',
  'stuck: EndTxn v3 commit NONE',
  'stuck: state CompleteCommit',
  'stuck: EndTxn v3 commit NONE',
  'stuck: EndTxn v1 commit NONE',
  'stuck: EndTxn v3 abort INVALID_TXN_STATE',
  'failover-open: EndTxn v1 commit NONE',
  'failover-open: state CompleteCommit',
  'failover-open: EndTxn v1 commit NONE',
  'failover-open: EndTxn v1 abort INVALID_TXN_STATE',
  'failover-acked: EndTxn v1 commit NONE',
  'failover-acked: state CompleteCommit',
  'failover-timeout: state CompleteAbort',
  'failover-timeout: EndTxn v1 commit INVALID_PRODUCER_EPOCH',
  'failover-timeout: EndTxn v3 commit PRODUCER_FENCED',
]

/**
 * tidelog's answers: Kafka's, but for one deliberate difference. Kafka's marker channel
 * skips a partition without a leader as "likely deleted already" and completes the
 * transaction, so its commit is never marked there: the records stay open on that
 * partition until the producer's next marker closes them, with that transaction's result
 * (an abort then undoes a committed transaction). tidelog keeps sending until a leader
 * takes the marker (a partition that no longer exists is skipped, as in Kafka), so the
 * transaction stays in PrepareCommit and EndTxn answers CONCURRENT_TRANSACTIONS meanwhile.
 */
const STUCK_STATE = KAFKA_ANSWERS.indexOf('stuck: state CompleteCommit')
const TIDELOG_ANSWERS = KAFKA_ANSWERS.map((line, index) => {
  if (index === STUCK_STATE) return 'stuck: state PrepareCommit'
  if (index > STUCK_STATE && index <= STUCK_STATE + 3)
    return line.replace(/(NONE|INVALID_TXN_STATE)$/, 'CONCURRENT_TRANSACTIONS')
  return line
})

/** What the steps need of a cluster under test. */
interface Target {
  readonly name: string
  /** Loopback port by node id. */
  readonly ports: ReadonlyMap<number, number>
  /** As kill -9. */
  kill(nodeId: number): void
}

/** Answers a client retries as they are (librdkafka refreshes the coordinator and resends). */
const TRANSIENT: ReadonlySet<number> = new Set([
  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
  ErrorCode.NOT_COORDINATOR,
  ErrorCode.NOT_LEADER_OR_FOLLOWER,
  ErrorCode.LEADER_NOT_AVAILABLE,
  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
  ErrorCode.NOT_ENOUGH_REPLICAS,
  ErrorCode.REQUEST_TIMED_OUT,
])

class Wire {
  private readonly clients = new Map<number, RawClient>()
  private readonly killed = new Set<number>()

  constructor(readonly target: Target) {}

  kill(nodeId: number): void {
    this.killed.add(nodeId)
    this.target.kill(nodeId)
  }

  get liveNodes(): number[] {
    return [...this.target.ports.keys()].filter((id) => !this.killed.has(id))
  }

  /** One request to a node; a dead connection is dropped (the next call dials again). */
  async call<T>(nodeId: number, apiKey: number, version: number, body: unknown): Promise<T> {
    const port = this.target.ports.get(nodeId)
    assert.ok(port !== undefined, `node ${nodeId} of ${this.target.name}`)
    let client = this.clients.get(nodeId)
    if (!client || client.closed) {
      client = await RawClient.connect(port)
      this.clients.set(nodeId, client)
    }
    try {
      return await rawCall<T>(client, apiKey, version, body, 30_000)
    } catch (error) {
      client.socket.destroy()
      this.clients.delete(nodeId)
      throw error
    }
  }

  close(): void {
    for (const client of this.clients.values()) client.socket.destroy()
    this.clients.clear()
  }
}

/** Retries `attempt` until it answers something other than a transient error, or the deadline. */
async function untilSettled(what: string, attempt: () => Promise<number>): Promise<number> {
  const deadline = Date.now() + STEP_DEADLINE_MS
  let last = 'nothing'
  for (;;) {
    try {
      const code = await attempt()
      if (!TRANSIENT.has(code)) return code
      last = errorName(code)
    } catch (error) {
      last = String(error)
    }
    if (Date.now() > deadline) throw new Error(`${what}: still ${last} after ${STEP_DEADLINE_MS} ms`)
    await sleep(200)
  }
}

async function coordinatorOf(wire: Wire, transactionalId: string): Promise<number> {
  let nodeId = -1
  await untilSettled(`FindCoordinator ${transactionalId}`, async () => {
    const asked = wire.liveNodes[0]
    const found = await wire.call<FindCoordinatorResponse>(asked, ApiKey.FindCoordinator, 3, {
      key: transactionalId,
      keyType: 1,
    })
    if (found.errorCode !== ErrorCode.NONE) return found.errorCode
    if (!wire.liveNodes.includes(found.nodeId)) return ErrorCode.COORDINATOR_NOT_AVAILABLE
    nodeId = found.nodeId
    return ErrorCode.NONE
  })
  return nodeId
}

async function leaderOf(wire: Wire, topic: string, partition: number): Promise<number> {
  let leader = -1
  await untilSettled(`leader of ${topic}-${partition}`, async () => {
    const metadata = await wire.call<MetadataResponse>(wire.liveNodes[0], ApiKey.Metadata, 12, {
      topics: [{ topicId: ZERO_UUID, name: topic }],
    })
    const state = metadata.topics[0]?.partitions.find((p) => p.partitionIndex === partition)
    if (!state || state.errorCode !== ErrorCode.NONE)
      return state?.errorCode ?? ErrorCode.LEADER_NOT_AVAILABLE
    if (!wire.liveNodes.includes(state.leaderId)) return ErrorCode.LEADER_NOT_AVAILABLE
    leader = state.leaderId
    return ErrorCode.NONE
  })
  return leader
}

/** Waits until Metadata says `topic`-`partition` has no leader (its only replica is dead). */
async function awaitLeaderless(wire: Wire, topic: string, partition: number): Promise<void> {
  const deadline = Date.now() + STEP_DEADLINE_MS
  for (;;) {
    try {
      const metadata = await wire.call<MetadataResponse>(wire.liveNodes[0], ApiKey.Metadata, 12, {
        topics: [{ topicId: ZERO_UUID, name: topic }],
      })
      const state = metadata.topics[0]?.partitions.find((p) => p.partitionIndex === partition)
      if (state?.leaderId === -1) return
    } catch {
      // A dead connection: dialled again.
    }
    if (Date.now() > deadline) throw new Error(`${topic}-${partition} still has a leader`)
    await sleep(200)
  }
}

/** One transactional id's producer, speaking to whichever broker coordinates it. */
class Txn {
  producerId = -1n
  producerEpoch = -1
  private sequence = 0

  constructor(
    private readonly wire: Wire,
    private readonly log: string[],
    private readonly label: string,
    readonly transactionalId: string,
    private readonly timeoutMs: number,
  ) {}

  private record(step: string): void {
    this.log.push(`${this.label}: ${step}`)
  }

  /** Sends to the current coordinator, found again after each transient answer. */
  private atCoordinator(what: string, send: (nodeId: number) => Promise<number>): Promise<number> {
    return untilSettled(`${this.transactionalId} ${what}`, async () =>
      send(await coordinatorOf(this.wire, this.transactionalId)),
    )
  }

  async init(): Promise<void> {
    const code = await untilSettled(`${this.transactionalId} InitProducerId`, async () => {
      const nodeId = await coordinatorOf(this.wire, this.transactionalId)
      const answer = await this.wire.call<InitProducerIdResponse>(nodeId, ApiKey.InitProducerId, 1, {
        transactionalId: this.transactionalId,
        transactionTimeoutMs: this.timeoutMs,
      })
      // The abort of a fenced transaction runs first: every client retries this.
      if (answer.errorCode === ErrorCode.CONCURRENT_TRANSACTIONS) return ErrorCode.COORDINATOR_NOT_AVAILABLE
      if (answer.errorCode === ErrorCode.NONE) {
        this.producerId = answer.producerId
        this.producerEpoch = answer.producerEpoch
        this.sequence = 0
      }
      return answer.errorCode
    })
    this.record(`InitProducerId ${errorName(code)}`)
  }

  async addPartition(topic: string, partition: number): Promise<void> {
    const code = await this.atCoordinator('AddPartitionsToTxn', async (nodeId) => {
      const answer = await this.wire.call<AddPartitionsToTxnResponse>(nodeId, ApiKey.AddPartitionsToTxn, 3, {
        v3AndBelowTransactionalId: this.transactionalId,
        v3AndBelowProducerId: this.producerId,
        v3AndBelowProducerEpoch: this.producerEpoch,
        v3AndBelowTopics: [{ name: topic, partitions: [partition] }],
      })
      return answer.resultsByTopicV3AndBelow[0]?.resultsByPartition[0]?.partitionErrorCode ?? -1
    })
    this.record(`AddPartitionsToTxn ${errorName(code)}`)
  }

  async produce(topic: string, partition: number): Promise<void> {
    const records = encodeRecordBatchSync({
      records: [{ key: Buffer.from(this.transactionalId), value: Buffer.from(`record ${this.sequence}`) }],
      producerId: this.producerId,
      producerEpoch: this.producerEpoch,
      baseSequence: this.sequence,
      isTransactional: true,
      defaultTimestamp: Date.now(),
    })
    const code = await untilSettled(`${this.transactionalId} Produce`, async () => {
      const leader = await leaderOf(this.wire, topic, partition)
      const answer = await this.wire.call<ProduceResponse>(leader, ApiKey.Produce, 8, {
        transactionalId: this.transactionalId,
        acks: -1,
        timeoutMs: 30_000,
        topicData: [{ name: topic, partitionData: [{ index: partition, records }] }],
      })
      return answer.responses[0]?.partitionResponses[0]?.errorCode ?? -1
    })
    this.sequence++
    this.record(`Produce ${errorName(code)}`)
  }

  /** EndTxn with this producer's id and epoch, as a client retrying it sends it. */
  async end(result: 'commit' | 'abort', version: number): Promise<void> {
    const code = await this.atCoordinator('EndTxn', async (nodeId) => {
      const answer = await this.wire.call<EndTxnResponse>(nodeId, ApiKey.EndTxn, version, {
        transactionalId: this.transactionalId,
        producerId: this.producerId,
        producerEpoch: this.producerEpoch,
        committed: result === 'commit',
      })
      return answer.errorCode
    })
    this.record(`EndTxn v${version} ${result} ${errorName(code)}`)
  }

  /** EndTxn (commit) until it is no longer CONCURRENT_TRANSACTIONS: a client's retries. */
  async commitRetried(version: number): Promise<void> {
    let code: number = ErrorCode.CONCURRENT_TRANSACTIONS
    const deadline = Date.now() + STEP_DEADLINE_MS
    while (code === ErrorCode.CONCURRENT_TRANSACTIONS && Date.now() < deadline) {
      code = await this.atCoordinator('EndTxn', async (nodeId) => {
        const answer = await this.wire.call<EndTxnResponse>(nodeId, ApiKey.EndTxn, version, {
          transactionalId: this.transactionalId,
          producerId: this.producerId,
          producerEpoch: this.producerEpoch,
          committed: true,
        })
        return answer.errorCode
      })
      if (code === ErrorCode.CONCURRENT_TRANSACTIONS) await sleep(200)
    }
    this.record(`EndTxn v${version} commit ${errorName(code)}`)
  }

  async describe(): Promise<DescribeTransactionsResponse['transactionStates'][number]> {
    let described: DescribeTransactionsResponse['transactionStates'][number] | undefined
    await this.atCoordinator('DescribeTransactions', async (nodeId) => {
      const answer = await this.wire.call<DescribeTransactionsResponse>(
        nodeId,
        ApiKey.DescribeTransactions,
        0,
        {
          transactionalIds: [this.transactionalId],
        },
      )
      described = answer.transactionStates[0]
      return described?.errorCode ?? -1
    })
    assert.ok(described, `${this.transactionalId} described`)
    return described
  }

  /** Waits until the coordinator holds the transaction in `state`; records the state seen last. */
  async awaitState(state: string, timeoutMs = STEP_DEADLINE_MS): Promise<void> {
    const deadline = Date.now() + timeoutMs
    let seen = ''
    while (Date.now() < deadline) {
      seen = (await this.describe()).transactionState
      if (seen === state) {
        this.record(`state ${state}`)
        return
      }
      await sleep(200)
    }
    this.record(`state ${seen}`)
  }

  async recordEpochBump(since: number): Promise<void> {
    const epoch = (await this.describe()).producerEpoch
    this.record(`epoch bumped by ${epoch - since}`)
  }
}

/** Finds a transactional id `prefix-N` whose coordinator satisfies `wanted`. */
async function idCoordinatedBy(
  wire: Wire,
  prefix: string,
  wanted: (nodeId: number) => boolean,
): Promise<string> {
  for (let n = 0; n < 200; n++) {
    const id = `${prefix}-${n}`
    if (wanted(await coordinatorOf(wire, id))) return id
  }
  throw new Error(`no transactional id ${prefix}-N has the coordinator wanted`)
}

async function createTopics(wire: Wire, stuckBroker: number): Promise<void> {
  const answer = await wire.call<CreateTopicsResponse>(wire.liveNodes[0], ApiKey.CreateTopics, 5, {
    topics: [
      {
        name: TOPIC,
        numPartitions: 3,
        replicationFactor: 3,
        assignments: [],
        configs: [{ name: 'min.insync.replicas', value: '2' }],
      },
      {
        name: STUCK_TOPIC,
        numPartitions: -1,
        replicationFactor: -1,
        assignments: [{ partitionIndex: 0, brokerIds: [stuckBroker] }],
        configs: [{ name: 'min.insync.replicas', value: '1' }],
      },
    ],
    timeoutMs: 30_000,
    validateOnly: false,
  })
  for (const topic of answer.topics)
    assert.equal(topic.errorCode, ErrorCode.NONE, `CreateTopics ${topic.name}: ${topic.errorMessage}`)
  await leaderOf(wire, TOPIC, 0)
  await leaderOf(wire, STUCK_TOPIC, 0)
}

/** Every step, in order, on one cluster; returns what it was told. */
async function replay(target: Target): Promise<string[]> {
  const wire = new Wire(target)
  const log: string[] = []
  try {
    // The broker to kill coordinates the failover ids and holds the stuck partition alone.
    const doomed = await coordinatorOf(wire, 'failover-open-0')
    await createTopics(wire, doomed)

    const commit = new Txn(wire, log, 'commit', 'retry-commit', LONG_TIMEOUT_MS)
    await commit.init()
    await commit.addPartition(TOPIC, 0)
    await commit.produce(TOPIC, 0)
    await commit.end('commit', 3)
    await commit.awaitState('CompleteCommit')
    await commit.end('commit', 3)
    await commit.end('commit', 1)
    await commit.end('abort', 3)
    await commit.end('abort', 1)

    // librdkafka sends EndTxn(abort) once it has sent AddPartitionsToTxn, answered or not
    // (its txn_req_cnt): when none reached the coordinator, the state is that of the
    // previous transaction (Empty here, CompleteCommit in `commit` above).
    const neverAdded = new Txn(wire, log, 'never-added', 'never-added', LONG_TIMEOUT_MS)
    await neverAdded.init()
    await neverAdded.end('abort', 1)
    await neverAdded.end('commit', 1)

    const abort = new Txn(wire, log, 'abort', 'retry-abort', LONG_TIMEOUT_MS)
    await abort.init()
    await abort.addPartition(TOPIC, 1)
    await abort.produce(TOPIC, 1)
    await abort.end('abort', 3)
    await abort.awaitState('CompleteAbort')
    await abort.end('abort', 3)
    await abort.end('commit', 3)

    const timeout = new Txn(wire, log, 'timeout', 'retry-timeout', SHORT_TIMEOUT_MS)
    await timeout.init()
    const startEpoch = timeout.producerEpoch
    await timeout.addPartition(TOPIC, 2)
    await timeout.produce(TOPIC, 2)
    await timeout.awaitState('CompleteAbort')
    await timeout.recordEpochBump(startEpoch)
    await timeout.end('commit', 1)
    await timeout.end('commit', 3)
    await timeout.end('abort', 1)
    await timeout.end('abort', 3)
    await timeout.addPartition(TOPIC, 2)
    await timeout.init()
    await timeout.recordEpochBump(startEpoch)

    const onDoomed = (nodeId: number) => nodeId === doomed
    const open = new Txn(wire, log, 'failover-open', 'failover-open-0', LONG_TIMEOUT_MS)
    await open.init()
    await open.addPartition(TOPIC, 0)
    await open.produce(TOPIC, 0)
    const acked = new Txn(
      wire,
      log,
      'failover-acked',
      await idCoordinatedBy(wire, 'failover-acked', onDoomed),
      LONG_TIMEOUT_MS,
    )
    await acked.init()
    await acked.addPartition(TOPIC, 1)
    await acked.produce(TOPIC, 1)
    await acked.end('commit', 3)
    const timedOut = new Txn(
      wire,
      log,
      'failover-timeout',
      await idCoordinatedBy(wire, 'failover-timeout', onDoomed),
      SHORT_TIMEOUT_MS,
    )
    await timedOut.init()
    await timedOut.addPartition(TOPIC, 2)
    await timedOut.produce(TOPIC, 2)
    const stuck = new Txn(
      wire,
      log,
      'stuck',
      await idCoordinatedBy(wire, 'stuck', (nodeId) => nodeId !== doomed),
      LONG_TIMEOUT_MS,
    )
    await stuck.init()
    await stuck.addPartition(STUCK_TOPIC, 0)
    await stuck.produce(STUCK_TOPIC, 0)

    wire.kill(doomed)
    log.push('coordinator killed')

    // Its only replica is dead: once the partition has no leader, Kafka skips its marker
    // and completes the commit; tidelog waits for a leader to write it.
    await awaitLeaderless(wire, STUCK_TOPIC, 0)
    log.push('stuck: partition without a leader')
    await stuck.end('commit', 3)
    await stuck.awaitState('CompleteCommit', LEADERLESS_WAIT_MS)
    await stuck.end('commit', 3)
    await stuck.end('commit', 1)
    await stuck.end('abort', 3)

    // Each step finds the coordinator again: a live broker, having loaded the state.
    await open.end('commit', 1)
    await open.awaitState('CompleteCommit')
    await open.end('commit', 1)
    await open.end('abort', 1)

    await acked.commitRetried(1)
    await acked.awaitState('CompleteCommit')

    await timedOut.awaitState('CompleteAbort')
    await timedOut.end('commit', 1)
    await timedOut.end('commit', 3)
  } finally {
    wire.close()
  }
  return log
}

async function portsOf(bootstrapPort: number): Promise<Map<number, number>> {
  const client = await RawClient.connect(bootstrapPort)
  try {
    const metadata = await rawCall<MetadataResponse>(client, ApiKey.Metadata, 12, { topics: [] })
    return new Map(metadata.brokers.map((b) => [b.nodeId, b.port]))
  } finally {
    client.socket.destroy()
  }
}

describe('EndTxn retried, late or after a coordinator failover: tidelog answers as Kafka 4.4', () => {
  let cluster: TestCluster | undefined
  let kafka: KafkaReference | undefined
  after(async () => {
    await cluster?.stop()
    await kafka?.stop()
  })

  let tidelogLog: string[] = []
  it('tidelog (3 brokers)', { timeout: 300_000 }, async () => {
    cluster = await startCluster({
      brokers: 3,
      properties: {
        ...TIDELOG_AS_REFERENCE,
        'transaction.abort.timed.out.transaction.cleanup.interval.ms': CLEANUP_INTERVAL_MS,
      },
    })
    const started = cluster
    const ports = new Map(started.brokerIds.map((id) => [id, started.broker(id).port]))
    tidelogLog = await replay({ name: 'tidelog', ports, kill: (id) => started.kill(id) })
    await started.stop()
    cluster = undefined
    assert.deepEqual(tidelogLog, TIDELOG_ANSWERS)
  })

  it('Kafka 4.4 (3 nodes, transaction version 1): the same answers', { timeout: 400_000 }, async () => {
    kafka = await startKafkaReference({
      nodes: 3,
      features: { 'transaction.version': 1 },
      properties: {
        'transaction.abort.timed.out.transaction.cleanup.interval.ms': CLEANUP_INTERVAL_MS,
        // Fail over in seconds, as the tidelog test cluster does (broker.session.timeout.ms 3000).
        'broker.session.timeout.ms': 3000,
        'broker.heartbeat.interval.ms': 500,
        'replica.lag.time.max.ms': 3000,
      },
    })
    const started = kafka
    const ports = await portsOf(Number(started.bootstrap.split(',')[0]?.split(':')[1]))
    const pids = (nodeId: number) => `${started.dir}/node-${nodeId}/pid`
    const referenceLog = await replay({
      name: 'Kafka 4.4',
      ports,
      kill: (nodeId) => process.kill(Number(readFileSync(pids(nodeId), 'utf8').trim()), 'SIGKILL'),
    })
    assert.deepEqual(referenceLog, KAFKA_ANSWERS, 'Kafka answers as recorded')
    if (tidelogLog.length > 0)
      assert.deepEqual(
        tidelogLog.filter((_, index) => TIDELOG_ANSWERS[index] === KAFKA_ANSWERS[index]),
        referenceLog.filter((_, index) => TIDELOG_ANSWERS[index] === KAFKA_ANSWERS[index]),
        'tidelog answers as Kafka (but for the leaderless partition)',
      )
  })
})

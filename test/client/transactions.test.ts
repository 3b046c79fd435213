/**
 * tidelog's transactional producer (issue 15 item 6) against a scripted broker that is
 * leader, transaction coordinator and group coordinator at once and answers as each test
 * says: the requests in Java's order (FindCoordinator key type 1, InitProducerId with the
 * transactional id, AddPartitionsToTxn before a partition's first batch, transactional
 * batches, AddOffsetsToTxn then TxnOffsetCommit to the group coordinator, EndTxn after the
 * flush), the retries (CONCURRENT_TRANSACTIONS, a coordinator that moved), fencing as
 * ProducerFencedError and fatal, abortable failures and the abort that recovers from them
 * (with the KIP-360 epoch bump after a failed batch), and the state errors; at transaction
 * version 2 (a broker finalizing it) no AddPartitionsToTxn nor AddOffsetsToTxn, Produce v12,
 * EndTxn v5 whose bump the next transaction uses, and `transactionVersionMax: 1`. Also the
 * consumer side of read_committed: aborted transactions dropped from a fetched blob.
 */
import assert from 'node:assert/strict'
import { createServer, type Server, type Socket } from 'node:net'
import { describe, it } from 'node:test'
import { decodeFetchedRecords } from '../../src/client/fetch-records.js'
import { Producer } from '../../src/client/producer.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { FrameDecoder } from '../../src/protocol/frame-decoder.js'
import { encodeResponseFrame } from '../../src/protocol/frame-encoder.js'
import { ApiKey, apis, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import type { ProduceRequest } from '../../src/protocol/generated/produce-request.js'
import { decodeRequestHeader } from '../../src/protocol/generated/request-header.js'
import { Reader, ZERO_UUID } from '../../src/protocol/primitives.js'
import { decodeRecordBatchSync, encodeRecordBatchSync } from '../../src/protocol/record-batch.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

interface Script {
  /** Per API key: error codes answered first, in turn (then NONE). */
  errors?: Partial<Record<number, number[]>>
  /** The error for the n-th produced batch (0-based), or undefined for success. */
  produce?: (n: number) => number | undefined
  /** Per API key: how long to wait before answering. */
  delayMs?: Partial<Record<number, number>>
  /** Transaction version 2: Produce v12, EndTxn v5 (bumping the epoch), TxnOffsetCommit v5, finalized. */
  transactionV2?: boolean
}

interface Seen {
  /** "Api(detail)" per request, in arrival order; ApiVersions and Metadata left out. */
  log: string[]
  batches: { isTransactional: boolean; producerId: bigint; producerEpoch: number; baseSequence: number }[]
  /** "Api vN" per request, in arrival order (all of them). */
  versions: string[]
  close(): Promise<void>
  bootstrap: string
}

const API_NAMES = new Map(Object.entries(ApiKey).map(([name, key]) => [key as number, name]))

async function scriptedBroker(script: Script = {}): Promise<Seen> {
  const sockets = new Set<Socket>()
  let epoch = 0
  const seen: Seen = {
    log: [],
    batches: [],
    versions: [],
    bootstrap: '',
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
  const nextError = (apiKey: number): number => script.errors?.[apiKey]?.shift() ?? ErrorCode.NONE
  const answer = (socket: Socket, frame: Buffer): void => {
    const apiKey = frame.readInt16BE(0)
    const version = frame.readInt16BE(2)
    const api = apis.get(apiKey)!
    const reader = new Reader(frame)
    const header = decodeRequestHeader(reader, api.requestHeaderVersion(version))
    // biome-ignore lint/suspicious/noExplicitAny: each API's request is read by its own branch
    const request = api.decodeRequest(reader, version) as any
    const base = api.defaultResponse() as object
    const name = API_NAMES.get(apiKey) ?? String(apiKey)
    seen.versions.push(`${name} v${version}`)
    const v2 = script.transactionV2 === true
    let body: object
    if (apiKey === ApiKey.ApiVersions) {
      const keys = [
        [ApiKey.ApiVersions, 0, 3],
        [ApiKey.Metadata, 1, 12],
        [ApiKey.Produce, 3, v2 ? 12 : 9],
        [ApiKey.InitProducerId, 0, 5],
        [ApiKey.FindCoordinator, 0, 4],
        [ApiKey.AddPartitionsToTxn, 0, 3],
        [ApiKey.AddOffsetsToTxn, 0, 3],
        [ApiKey.EndTxn, 0, v2 ? 5 : 3],
        [ApiKey.TxnOffsetCommit, 0, v2 ? 5 : 3],
      ].map(([k, min, max]) => ({ apiKey: k, minVersion: min, maxVersion: max }))
      const finalized = v2 ? [{ name: 'transaction.version', minVersionLevel: 2, maxVersionLevel: 2 }] : []
      body = {
        ...base,
        errorCode: 0,
        apiKeys: keys,
        finalizedFeaturesEpoch: v2 ? 1n : -1n,
        finalizedFeatures: finalized,
      }
    } else if (apiKey === ApiKey.Metadata) {
      const partition = (index: number) => ({
        errorCode: 0,
        partitionIndex: index,
        leaderId: 0,
        leaderEpoch: 0,
        replicaNodes: [0],
        isrNodes: [0],
        offlineReplicas: [],
      })
      body = {
        ...base,
        brokers: [{ nodeId: 0, host: '127.0.0.1', port, rack: null }],
        clusterId: 'scripted',
        controllerId: 0,
        topics: [
          {
            errorCode: 0,
            name: 't',
            topicId: ZERO_UUID,
            isInternal: false,
            topicAuthorizedOperations: -2147483648,
            partitions: [partition(0), partition(1)],
          },
        ],
      }
    } else {
      const errorCode = nextError(apiKey)
      if (apiKey === ApiKey.FindCoordinator) {
        const key = version >= 4 ? request.coordinatorKeys[0] : request.key
        seen.log.push(`${name}(${request.keyType}:${key})`)
        const entry = { key, nodeId: 0, host: '127.0.0.1', port, errorCode, errorMessage: null }
        body = version >= 4 ? { ...base, coordinators: [entry] } : { ...base, ...entry }
      } else if (apiKey === ApiKey.InitProducerId) {
        seen.log.push(`${name}(${request.transactionalId},${request.producerId}/${request.producerEpoch})`)
        if (errorCode === ErrorCode.NONE) epoch = request.producerId >= 0n ? request.producerEpoch + 1 : epoch
        body = { ...base, errorCode, producerId: 7000n, producerEpoch: epoch }
      } else if (apiKey === ApiKey.AddPartitionsToTxn) {
        const topics = request.v3AndBelowTopics as { name: string; partitions: number[] }[]
        seen.log.push(
          `${name}(${topics.flatMap((t) => t.partitions.map((p) => `${t.name}-${p}`)).join(',')})`,
        )
        body = {
          ...base,
          resultsByTopicV3AndBelow: topics.map((t) => ({
            name: t.name,
            resultsByPartition: t.partitions.map((p) => ({
              partitionIndex: p,
              partitionErrorCode: errorCode,
            })),
          })),
        }
      } else if (apiKey === ApiKey.AddOffsetsToTxn) {
        seen.log.push(`${name}(${request.groupId})`)
        body = { ...base, errorCode }
      } else if (apiKey === ApiKey.TxnOffsetCommit) {
        const parts = (
          request.topics as {
            name: string
            partitions: { partitionIndex: number; committedOffset: bigint }[]
          }[]
        )
          .flatMap((t) => t.partitions.map((p) => `${t.name}-${p.partitionIndex}=${p.committedOffset}`))
          .join(',')
        seen.log.push(
          `${name}(${request.groupId},${request.generationIdOrMemberEpoch},${request.memberId},${parts})`,
        )
        body = {
          ...base,
          topics: request.topics.map((t: { name: string; partitions: { partitionIndex: number }[] }) => ({
            name: t.name,
            partitions: t.partitions.map((p) => ({ partitionIndex: p.partitionIndex, errorCode })),
          })),
        }
      } else if (apiKey === ApiKey.EndTxn) {
        seen.log.push(`${name}(${request.committed ? 'commit' : 'abort'},${request.producerEpoch})`)
        // v5 bumps the epoch at every end and answers it; a retry (the epoch below) gets the same.
        const bumped = version >= 5 && errorCode === ErrorCode.NONE
        if (bumped && request.producerEpoch === epoch) epoch++
        body = { ...base, errorCode, producerId: bumped ? 7000n : -1n, producerEpoch: bumped ? epoch : -1 }
      } else if (apiKey === ApiKey.Produce) {
        const produce = request as ProduceRequest
        body = {
          ...base,
          responses: produce.topicData.map((topic) => ({
            name: topic.name,
            partitionResponses: topic.partitionData.map((p) => {
              const records = Buffer.concat(
                p.records === null ? [] : Buffer.isBuffer(p.records) ? [p.records] : [...p.records],
              )
              const batch = decodeRecordBatchSync(records)
              seen.log.push(`${name}(${produce.transactionalId},${topic.name}-${p.index})`)
              seen.batches.push({
                isTransactional: batch.isTransactional,
                producerId: batch.producerId,
                producerEpoch: batch.producerEpoch,
                baseSequence: batch.baseSequence,
              })
              const error = script.produce?.(seen.batches.length - 1) ?? ErrorCode.NONE
              return {
                index: p.index,
                errorCode: error,
                baseOffset: error === ErrorCode.NONE ? BigInt(seen.batches.length) : -1n,
                logAppendTimeMs: -1n,
                logStartOffset: 0n,
                recordErrors: [],
                errorMessage: null,
                currentLeader: { leaderId: -1, leaderEpoch: -1 },
              }
            }),
          })),
        }
      } else {
        socket.destroy()
        return
      }
    }
    const bytes = Buffer.concat(encodeResponseFrame(apiKey, version, header.correlationId, body))
    const delay = script.delayMs?.[apiKey]
    if (delay) setTimeout(() => socket.write(bytes), delay)
    else socket.write(bytes)
  }
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => socket.destroy())
    const decoder = new FrameDecoder(1 << 20)
    socket.on('data', (chunk: Buffer) => decoder.push(chunk, (frame) => answer(socket, frame)))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : 0
  seen.bootstrap = `127.0.0.1:${port}`
  return seen
}

function transactionalProducer(bootstrap: string, transactionalId = 'tx-1'): Producer {
  return new Producer({
    bootstrapServers: bootstrap,
    transactionalId,
    lingerMs: 0,
    retryBackoffMs: 5,
    retryBackoffMaxMs: 20,
    requestTimeoutMs: 2000,
    deliveryTimeoutMs: 10000,
    maxBlockMs: 5000,
  })
}

async function withBroker(script: Script, run: (broker: Seen, producer: Producer) => Promise<void>) {
  const broker = await scriptedBroker(script)
  const producer = transactionalProducer(broker.bootstrap)
  try {
    await run(broker, producer)
  } finally {
    await producer.close().catch(() => undefined)
    await broker.close()
  }
}

describe('transactional producer against a scripted coordinator', () => {
  it('init, two partitions, commit: AddPartitionsToTxn before their transactional batches, EndTxn after them', async () => {
    await withBroker({}, async (broker, producer) => {
      assert.equal(producer.transactionState, 'UNINITIALIZED')
      await producer.initTransactions()
      assert.equal(producer.transactionState, 'READY')
      assert.deepEqual(producer.producerIdentity, { producerId: 7000n, producerEpoch: 0 })
      producer.beginTransaction()
      await Promise.all([
        producer.send({ topic: 't', partition: 0, value: 'a' }),
        producer.send({ topic: 't', partition: 1, value: 'b' }),
      ])
      await producer.commitTransaction()
      assert.equal(producer.transactionState, 'READY')
      assert.deepEqual(broker.log.slice(0, 3), [
        'FindCoordinator(1:tx-1)',
        'InitProducerId(tx-1,-1/-1)',
        'AddPartitionsToTxn(t-0,t-1)',
      ])
      assert.deepEqual(broker.log.slice(3, 5).sort(), ['Produce(tx-1,t-0)', 'Produce(tx-1,t-1)'])
      assert.deepEqual(broker.log.slice(5), ['EndTxn(commit,0)'])
      assert.deepEqual(
        broker.batches.map((b) => [b.isTransactional, b.producerId, b.producerEpoch, b.baseSequence]),
        [
          [true, 7000n, 0, 0],
          [true, 7000n, 0, 0],
        ],
      )
      // The next transaction continues the sequences and adds the partition again.
      producer.beginTransaction()
      await producer.send({ topic: 't', partition: 0, value: 'c' })
      await producer.commitTransaction()
      assert.deepEqual(broker.log.slice(6), [
        'AddPartitionsToTxn(t-0)',
        'Produce(tx-1,t-0)',
        'EndTxn(commit,0)',
      ])
      assert.equal(broker.batches[2].baseSequence, 1)
    })
  })

  it("transaction version 2: Produce v12 with no AddPartitionsToTxn, TxnOffsetCommit v5 with no AddOffsetsToTxn; EndTxn v5 retried with the same epoch, its bump the next transaction's from sequence 0", async () => {
    const script = { transactionV2: true, errors: { [ApiKey.EndTxn]: [ErrorCode.CONCURRENT_TRANSACTIONS] } }
    await withBroker(script, async (broker, producer) => {
      await producer.initTransactions()
      assert.equal(producer.transactionVersion, 2)
      producer.beginTransaction()
      await Promise.all([
        producer.send({ topic: 't', partition: 0, value: 'a' }),
        producer.send({ topic: 't', partition: 1, value: 'b' }),
      ])
      await producer.sendOffsetsToTransaction([{ topic: 't', partition: 1, offset: 42 }], 'g')
      await producer.commitTransaction()
      assert.deepEqual(producer.producerIdentity, { producerId: 7000n, producerEpoch: 1 })
      producer.beginTransaction()
      await producer.send({ topic: 't', partition: 0, value: 'c' })
      await producer.abortTransaction()
      assert.deepEqual(producer.producerIdentity, { producerId: 7000n, producerEpoch: 2 })
      assert.deepEqual(broker.log.slice(0, 2), ['FindCoordinator(1:tx-1)', 'InitProducerId(tx-1,-1/-1)'])
      assert.deepEqual(broker.log.slice(2, 4).sort(), ['Produce(tx-1,t-0)', 'Produce(tx-1,t-1)'])
      assert.deepEqual(broker.log.slice(4), [
        'FindCoordinator(0:g)',
        'TxnOffsetCommit(g,-1,,t-1=42)',
        // CONCURRENT_TRANSACTIONS first: the retry names the same epoch.
        'EndTxn(commit,0)',
        'EndTxn(commit,0)',
        'Produce(tx-1,t-0)',
        'EndTxn(abort,1)',
      ])
      assert.deepEqual(
        broker.batches.map((b) => [b.producerEpoch, b.baseSequence]),
        [
          [0, 0],
          [0, 0],
          [1, 0],
        ],
      )
      const used = new Set(broker.versions.filter((v) => /^(Produce|EndTxn|TxnOffsetCommit) /.test(v)))
      assert.deepEqual([...used].sort(), ['EndTxn v5', 'Produce v12', 'TxnOffsetCommit v5'])
    })
  })

  it('transactionVersionMax 1 against the same broker: version 1 requests (AddPartitionsToTxn, Produce v11 at most, EndTxn v4 at most)', async () => {
    const broker = await scriptedBroker({ transactionV2: true })
    const producer = new Producer({
      bootstrapServers: broker.bootstrap,
      transactionalId: 'tx-1',
      transactionVersionMax: 1,
      lingerMs: 0,
      maxBlockMs: 5000,
    })
    try {
      await producer.initTransactions()
      assert.equal(producer.transactionVersion, 1)
      producer.beginTransaction()
      await producer.send({ topic: 't', partition: 0, value: 'a' })
      await producer.commitTransaction()
      assert.deepEqual(producer.producerIdentity, { producerId: 7000n, producerEpoch: 0 })
      assert.deepEqual(broker.log.slice(2), [
        'AddPartitionsToTxn(t-0)',
        'Produce(tx-1,t-0)',
        'EndTxn(commit,0)',
      ])
      const used = new Set(broker.versions.filter((v) => /^(Produce|EndTxn) /.test(v)))
      assert.deepEqual([...used].sort(), ['EndTxn v4', 'Produce v11'])
    } finally {
      await producer.close().catch(() => undefined)
      await broker.close()
    }
  })

  it('a transaction that touched nothing ends without EndTxn', async () => {
    await withBroker({}, async (broker, producer) => {
      await producer.initTransactions()
      producer.beginTransaction()
      await producer.commitTransaction()
      producer.beginTransaction()
      await producer.abortTransaction()
      assert.deepEqual(broker.log, ['FindCoordinator(1:tx-1)', 'InitProducerId(tx-1,-1/-1)'])
      assert.equal(producer.transactionState, 'READY')
    })
  })

  it('sendOffsetsToTransaction: AddOffsetsToTxn to the transaction coordinator, TxnOffsetCommit with the group generation to the group coordinator', async () => {
    await withBroker({}, async (broker, producer) => {
      await producer.initTransactions()
      producer.beginTransaction()
      await producer.send({ topic: 't', partition: 0, value: 'out' })
      await producer.sendOffsetsToTransaction([{ topic: 't', partition: 1, offset: 42 }], {
        groupId: 'g',
        generationId: 3,
        memberId: 'm-1',
        groupInstanceId: null,
      })
      await producer.commitTransaction()
      assert.deepEqual(broker.log.slice(4), [
        'AddOffsetsToTxn(g)',
        'FindCoordinator(0:g)',
        'TxnOffsetCommit(g,3,m-1,t-1=42)',
        'EndTxn(commit,0)',
      ])
      // Offsets alone start a transaction too (EndTxn is needed).
      producer.beginTransaction()
      await producer.sendOffsetsToTransaction([{ topic: 't', partition: 1, offset: 43 }], 'g')
      await producer.abortTransaction()
      assert.deepEqual(broker.log.slice(8), [
        'AddOffsetsToTxn(g)',
        'TxnOffsetCommit(g,-1,,t-1=43)',
        'EndTxn(abort,0)',
      ])
    })
  })

  it('abort while AddPartitionsToTxn is in flight: the unsent record fails, EndTxn(abort) still ends what the coordinator started', async () => {
    await withBroker({ delayMs: { [ApiKey.AddPartitionsToTxn]: 300 } }, async (broker, producer) => {
      await producer.initTransactions()
      producer.beginTransaction()
      const sent = producer.send({ topic: 't', partition: 0, value: 'never' })
      const outcome = sent.then(
        () => null,
        (error: unknown) => error,
      )
      // The AddPartitionsToTxn goes on the next turn of the event loop; abort once it is out.
      await new Promise((resolve) => setTimeout(resolve, 50))
      assert.equal(broker.log.at(-1), 'AddPartitionsToTxn(t-0)')
      await producer.abortTransaction()
      assert.equal(((await outcome) as { code?: string } | null)?.code, 'ERR_TRANSACTION_ABORTED')
      assert.deepEqual(broker.log.slice(2), ['AddPartitionsToTxn(t-0)', 'EndTxn(abort,0)'])
      assert.equal(producer.transactionState, 'READY')
    })
  })

  it('a commit called while sendOffsetsToTransaction is unanswered sends EndTxn after the offsets', async () => {
    await withBroker({ delayMs: { [ApiKey.AddOffsetsToTxn]: 200 } }, async (broker, producer) => {
      await producer.initTransactions()
      producer.beginTransaction()
      const offsets = producer.sendOffsetsToTransaction([{ topic: 't', partition: 0, offset: 9 }], 'g')
      await producer.commitTransaction()
      await offsets
      assert.deepEqual(broker.log.slice(2), [
        'AddOffsetsToTxn(g)',
        'FindCoordinator(0:g)',
        'TxnOffsetCommit(g,-1,,t-0=9)',
        'EndTxn(commit,0)',
      ])
      await assert.rejects(
        producer.sendOffsetsToTransaction([{ topic: 't', partition: 0, offset: 1.5 }], 'g'),
        {
          code: 'ERR_TRANSACTION_STATE',
        },
      )
      producer.beginTransaction()
      await assert.rejects(
        producer.sendOffsetsToTransaction([{ topic: 't', partition: 0, offset: 1.5 }], 'g'),
        {
          code: 'ERR_INVALID_ARGUMENT',
        },
      )
    })
  })

  it('CONCURRENT_TRANSACTIONS and a coordinator that moved are retried, looking the coordinator up again', async () => {
    await withBroker(
      {
        errors: {
          [ApiKey.InitProducerId]: [
            ErrorCode.CONCURRENT_TRANSACTIONS,
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
          ],
          [ApiKey.AddPartitionsToTxn]: [ErrorCode.CONCURRENT_TRANSACTIONS],
          [ApiKey.EndTxn]: [ErrorCode.NOT_COORDINATOR],
        },
      },
      async (broker, producer) => {
        await producer.initTransactions()
        producer.beginTransaction()
        await producer.send({ topic: 't', partition: 0, value: 'a' })
        await producer.commitTransaction()
        assert.deepEqual(broker.log, [
          'FindCoordinator(1:tx-1)',
          'InitProducerId(tx-1,-1/-1)',
          'InitProducerId(tx-1,-1/-1)',
          'InitProducerId(tx-1,-1/-1)',
          'AddPartitionsToTxn(t-0)',
          'AddPartitionsToTxn(t-0)',
          'Produce(tx-1,t-0)',
          'EndTxn(commit,0)',
          'FindCoordinator(1:tx-1)',
          'EndTxn(commit,0)',
        ])
      },
    )
  })

  it('PRODUCER_FENCED from the coordinator is a fatal ProducerFencedError: every later call fails with it', async () => {
    await withBroker(
      { errors: { [ApiKey.EndTxn]: [ErrorCode.PRODUCER_FENCED] } },
      async (broker, producer) => {
        await producer.initTransactions()
        producer.beginTransaction()
        await producer.send({ topic: 't', partition: 0, value: 'a' })
        await assert.rejects(producer.commitTransaction(), {
          name: 'ProducerFencedError',
          code: 'ERR_PRODUCER_FENCED',
        })
        assert.equal(producer.transactionState, 'FATAL_ERROR')
        assert.throws(() => producer.beginTransaction(), { name: 'ProducerFencedError' })
        await assert.rejects(producer.abortTransaction(), { name: 'ProducerFencedError' })
        await assert.rejects(producer.send({ topic: 't', partition: 0, value: 'b' }), {
          name: 'ProducerFencedError',
        })
        assert.equal(broker.log.filter((l) => l.startsWith('Produce')).length, 1)
      },
    )
  })

  it('INVALID_PRODUCER_EPOCH on produce: the send fails as ProducerFencedError, the abort recovers and bumps the epoch', async () => {
    await withBroker(
      { produce: (n) => (n === 0 ? ErrorCode.INVALID_PRODUCER_EPOCH : undefined) },
      async (broker, producer) => {
        await producer.initTransactions()
        producer.beginTransaction()
        await assert.rejects(producer.send({ topic: 't', partition: 0, value: 'a' }), {
          name: 'ProducerFencedError',
          errorCode: ErrorCode.INVALID_PRODUCER_EPOCH,
        })
        assert.equal(producer.transactionState, 'ABORTABLE_ERROR')
        await assert.rejects(producer.commitTransaction(), { name: 'ProducerFencedError' })
        await producer.abortTransaction()
        assert.equal(producer.transactionState, 'READY')
        // KIP-360: InitProducerId with the current id and epoch; sequences restart at 0.
        assert.deepEqual(broker.log.slice(-2), ['EndTxn(abort,0)', 'InitProducerId(tx-1,7000/0)'])
        assert.deepEqual(producer.producerIdentity, { producerId: 7000n, producerEpoch: 1 })
        producer.beginTransaction()
        await producer.send({ topic: 't', partition: 0, value: 'b' })
        await producer.commitTransaction()
        assert.deepEqual([broker.batches.at(-1)!.producerEpoch, broker.batches.at(-1)!.baseSequence], [1, 0])
      },
    )
  })

  it('a group fencing on TxnOffsetCommit (ILLEGAL_GENERATION) is abortable: commit refuses, abort recovers', async () => {
    await withBroker(
      { errors: { [ApiKey.TxnOffsetCommit]: [ErrorCode.ILLEGAL_GENERATION] } },
      async (broker, producer) => {
        await producer.initTransactions()
        producer.beginTransaction()
        await assert.rejects(
          producer.sendOffsetsToTransaction([{ topic: 't', partition: 0, offset: 1 }], {
            groupId: 'g',
            generationId: 1,
            memberId: 'old',
          }),
          { code: 'ERR_KAFKA_ILLEGAL_GENERATION' },
        )
        assert.equal(producer.transactionState, 'ABORTABLE_ERROR')
        await assert.rejects(producer.commitTransaction(), { name: 'TransactionAbortableError' })
        await producer.abortTransaction()
        assert.equal(broker.log.at(-1), 'EndTxn(abort,0)')
        assert.equal(producer.transactionState, 'READY')
      },
    )
  })

  it('calls out of order are TransactionStateErrors; a transactional id needs idempotence', async () => {
    await withBroker({}, async (broker, producer) => {
      assert.throws(() => producer.beginTransaction(), { name: 'TransactionStateError' })
      await assert.rejects(producer.send({ topic: 't', value: 'x' }), { name: 'TransactionStateError' })
      await producer.initTransactions()
      await assert.rejects(producer.initTransactions(), { name: 'TransactionStateError' })
      await assert.rejects(producer.send({ topic: 't', value: 'x' }), {
        name: 'TransactionStateError',
        message: /beginTransaction/,
      })
      await assert.rejects(producer.commitTransaction(), { name: 'TransactionStateError' })
      await assert.rejects(producer.sendOffsetsToTransaction([], 'g'), { name: 'TransactionStateError' })
      producer.beginTransaction()
      assert.throws(() => producer.beginTransaction(), { name: 'TransactionStateError' })
      assert.equal(broker.log.filter((l) => l.startsWith('Produce')).length, 0)
      const plain = new Producer({ bootstrapServers: broker.bootstrap })
      try {
        await assert.rejects(plain.initTransactions(), { name: 'TransactionStateError' })
      } finally {
        await plain.close()
      }
    })
    assert.throws(
      () => new Producer({ bootstrapServers: '127.0.0.1:1', transactionalId: 'x', enableIdempotence: false }),
      { code: 'ERR_INVALID_ARGUMENT' },
    )
    assert.throws(() => new Producer({ bootstrapServers: '127.0.0.1:1', transactionalId: 'x', acks: 1 }), {
      code: 'ERR_INVALID_ARGUMENT',
    })
  })
})

describe('read_committed decoding of a fetched blob', () => {
  const batch = (baseOffset: number, producerId: bigint, values: string[], transactional = true) => {
    const buf = encodeRecordBatchSync({
      records: values.map((v) => ({ key: null, value: Buffer.from(v) })),
      producerId,
      producerEpoch: 0,
      baseSequence: 0,
      isTransactional: transactional,
      defaultTimestamp: 1,
    })
    buf.writeBigInt64BE(BigInt(baseOffset), 0)
    return buf
  }
  const marker = (offset: number, producerId: bigint, commit: boolean) => {
    const key = Buffer.alloc(4)
    key.writeInt16BE(commit ? 1 : 0, 2)
    const buf = encodeRecordBatchSync({
      records: [{ key, value: Buffer.alloc(6) }],
      producerId,
      producerEpoch: 0,
      isTransactional: true,
      isControl: true,
      defaultTimestamp: 1,
    })
    buf.writeBigInt64BE(BigInt(offset), 0)
    return buf
  }

  it("drops an aborted transaction's batches up to its ABORT marker, keeps committed and plain ones, skips markers", async () => {
    const blob = Buffer.concat([
      batch(0, 1n, ['a1', 'a2']), // producer 1, aborted
      batch(2, 2n, ['c1']), // producer 2, committed
      batch(3, -1n, ['plain'], false),
      marker(4, 1n, false),
      marker(5, 2n, true),
      batch(6, 1n, ['a3']), // producer 1's next transaction, committed later: kept
    ])
    const aborted = [{ producerId: 1n, firstOffset: 0n }]
    const committed = await decodeFetchedRecords('t', 0, blob, 0, aborted)
    assert.deepEqual(
      committed.records.map((r) => r.value?.toString()),
      ['c1', 'plain', 'a3'],
    )
    assert.equal(committed.nextOffset, 7)
    const uncommitted = await decodeFetchedRecords('t', 0, blob, 0, null)
    assert.deepEqual(
      uncommitted.records.map((r) => r.value?.toString()),
      ['a1', 'a2', 'c1', 'plain', 'a3'],
    )
  })
})

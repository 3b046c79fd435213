/**
 * The marker sender against partition leaders played by a fake network that decodes each
 * WriteTxnMarkers request with the generated codecs and answers as the test says: markers
 * retried on NOT_LEADER_OR_FOLLOWER and on a dropped connection until written, sending
 * stopped when a leader fences it, partitions of deleted topics dropped, nothing sent once
 * this broker no longer coordinates the transaction.
 */

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type Clock, systemClock } from '../../../src/common/clock.js'
import { silentLogger } from '../../../src/common/logger.js'
import type { ByteStream } from '../../../src/common/network.js'
import { toProducerId } from '../../../src/common/types.js'
import {
  type MarkerJob,
  TransactionMarkerSender,
} from '../../../src/coordinator/transaction/transaction-marker-sender.js'
import { TransactionMetadata } from '../../../src/coordinator/transaction/transaction-metadata.js'
import type { ClusterImage } from '../../../src/metadata/cluster-image.js'
import { ErrorCode } from '../../../src/protocol/error-codes.js'
import {
  decodeRequestHeader,
  encodeResponseHeader,
} from '../../../src/protocol/generated/headers-and-data.js'
import { ApiKey, apis, loadAllApiCodecs } from '../../../src/protocol/generated/index.js'
import type { WriteTxnMarkersRequest } from '../../../src/protocol/generated/write-txn-markers-request.js'
import { Reader, Writer } from '../../../src/protocol/primitives.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

type Answer = ((topic: string, partition: number) => number) | 'drop'

/** Brokers 1 and 2 at ports 9001 and 9002; `answers[nodeId]` decides each reply in turn. */
class FakeLeaders {
  readonly requests: { nodeId: number; request: WriteTxnMarkersRequest }[] = []
  constructor(private readonly answers: Record<number, Answer[]>) {}

  connect(_host: string, port: number): Promise<ByteStream> {
    const nodeId = port - 9000
    let onData: (chunk: Buffer) => void = () => {}
    let onClose: (error: Error | null) => void = () => {}
    let closed = false
    const close = () => {
      if (closed) return
      closed = true
      onClose(null)
    }
    const stream: ByteStream = {
      remoteAddress: `127.0.0.1:${port}`,
      writableNeedDrain: false,
      write: (chunks) => {
        const frame = Buffer.concat(chunks)
        const api = apis.get(ApiKey.WriteTxnMarkers)!
        const r = new Reader(frame, 4)
        const header = decodeRequestHeader(r, api.requestHeaderVersion(1))
        const request = api.decodeRequest(r, header.requestApiVersion) as WriteTxnMarkersRequest
        this.requests.push({ nodeId, request })
        const answer = this.answers[nodeId]?.shift() ?? (() => ErrorCode.NONE)
        if (answer === 'drop') return void setImmediate(close)
        const w = new Writer(128)
        w.writeInt32(0)
        encodeResponseHeader(w, api.responseHeaderVersion(1), { correlationId: header.correlationId })
        api.encodeResponse(w, 1, {
          markers: request.markers.map((m) => ({
            producerId: m.producerId,
            topics: m.topics.map((t) => ({
              name: t.name,
              partitions: t.partitionIndexes.map((p) => ({
                partitionIndex: p,
                errorCode: answer(t.name, p),
              })),
            })),
          })),
        })
        const out = w.toBuffer()
        out.writeInt32BE(out.length - 4, 0)
        setImmediate(() => onData(out))
      },
      pause: () => {},
      resume: () => {},
      onData: (listener) => {
        onData = listener
      },
      onDrain: () => {},
      onClose: (listener) => {
        onClose = listener
      },
      destroy: close,
    }
    return Promise.resolve(stream)
  }
}

function image(topics: Record<string, number[]>): ClusterImage {
  return {
    brokers: new Map([
      [1, { nodeId: 1, host: '127.0.0.1', port: 9001 }],
      [2, { nodeId: 2, host: '127.0.0.1', port: 9002 }],
    ]),
    topics: new Map(
      Object.entries(topics).map(([name, leaders]) => [
        name,
        { partitions: leaders.map((leader, partition) => ({ partition, leader })) },
      ]),
    ),
  } as unknown as ClusterImage
}

function job(partitions: Record<string, number[]>, isCurrent = () => true): MarkerJob {
  const pending = TransactionMetadata.created('tx', toProducerId(7n), 60000, 0)
  pending.partitions = new Map(Object.entries(partitions).map(([t, ids]) => [t, new Set(ids)]))
  return {
    transactionalId: 'tx',
    producerId: toProducerId(7n),
    producerEpoch: 3,
    coordinatorEpoch: 11,
    result: 'commit',
    pending,
    isCurrent,
  }
}

/** Real time whose timers hold the event loop open (systemClock's do not; a broker's sockets would). */
const refClock: Clock = {
  ...systemClock,
  setTimeout(callback, delayMs) {
    const timer = setTimeout(callback, delayMs)
    return { cancel: () => clearTimeout(timer) }
  },
}

function sender(leaders: FakeLeaders, topics: Record<string, number[]>) {
  return new TransactionMarkerSender(
    {
      clock: refClock,
      logger: silentLogger,
      transport: leaders,
      metadataImage: () => image(topics),
      brokerAddress: (id) => image(topics).brokers.get(id),
    },
    { requestTimeoutMs: 2000, retryBackoffMs: 1, retryBackoffMaxMs: 5 },
  )
}

describe('transaction marker sender', () => {
  it('each leader gets its partitions; NOT_LEADER and a dropped connection are retried until written', async () => {
    const notLeaderFirst: Answer = (_t, p) => (p === 0 ? ErrorCode.NOT_LEADER_OR_FOLLOWER : ErrorCode.NONE)
    const leaders = new FakeLeaders({ 1: [notLeaderFirst], 2: ['drop'] })
    const s = sender(leaders, { t: [1, 2, 1] })
    const j = job({ t: [0, 1, 2] })
    assert.equal(await s.send(j), 'written')
    assert.equal(j.pending.partitions.size, 0)
    const first = leaders.requests[0].request.markers[0]
    assert.equal(first.producerId, 7n)
    assert.equal(first.producerEpoch, 3)
    assert.equal(first.coordinatorEpoch, 11)
    assert.equal(first.transactionResult, true)
    const toBroker1 = leaders.requests.filter((r) => r.nodeId === 1)
    assert.deepEqual(toBroker1[0].request.markers[0].topics, [{ name: 't', partitionIndexes: [0, 2] }])
    assert.deepEqual(
      toBroker1[1].request.markers[0].topics,
      [{ name: 't', partitionIndexes: [0] }],
      'only the rest again',
    )
    assert.equal(
      leaders.requests.filter((r) => r.nodeId === 2).length,
      2,
      'resent after the dropped connection',
    )
    s.shutdown()
  })

  it('a leader fencing the markers stops the sending', async () => {
    const leaders = new FakeLeaders({ 1: [() => ErrorCode.TRANSACTION_COORDINATOR_FENCED] })
    const s = sender(leaders, { t: [1] })
    assert.equal(await s.send(job({ t: [0] })), 'fenced')
    assert.equal(leaders.requests.length, 1)
    s.shutdown()
  })

  it('partitions of a deleted topic need no marker; a former coordinator sends nothing', async () => {
    const leaders = new FakeLeaders({})
    const s = sender(leaders, { kept: [2] })
    const j = job({ gone: [0, 1], kept: [0] })
    assert.equal(await s.send(j), 'written')
    assert.deepEqual(
      leaders.requests.map((r) => r.request.markers[0].topics),
      [[{ name: 'kept', partitionIndexes: [0] }]],
    )
    assert.equal(await s.send(job({ kept: [0] }, () => false)), 'abandoned')
    assert.equal(leaders.requests.length, 1)
    s.shutdown()
  })
})

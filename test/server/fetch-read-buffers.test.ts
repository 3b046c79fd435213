/**
 * Fetch answers read into pooled buffers (src/common/read-buffer-pool.ts) that come back
 * once the socket wrote them. Many fetches pipelined on two connections, each reading
 * several MiB from disk, must all carry intact batches (CRC-32C) equal to one another, and
 * the buffers must come back to the pool (else the reuse this test guards never happens).
 * Once fetches stop, the process's memory reclaimer empties the pool again (issue 34).
 */
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { readBufferPool } from '../../src/common/read-buffer-pool.js'
import { crc32c } from '../../src/protocol/crc32c.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey, apis, type FetchResponse } from '../../src/protocol/generated/index.js'
import { decodeResponseHeader } from '../../src/protocol/generated/response-header.js'
import { Reader, ZERO_UUID } from '../../src/protocol/primitives.js'
import { MemoryReclaimer } from '../../src/runtime/memory-reclaimer.js'
import '../helpers/raw-call.js' // loads the codecs
import { ManualClock } from '../helpers/manual-clock.js'
import { RawClient } from '../helpers/raw-client.js'
import { ReplicationCluster } from '../replication/in-process-cluster.js'
import { simpleBatch } from '../storage/helpers.js'

const PARTITIONS = 2
const BATCHES_PER_PARTITION = 40
const RECORDS_PER_BATCH = 64
const VALUE_BYTES = 4096
const PARTITION_MAX_BYTES = 4 << 20
const FETCHES_PER_CONNECTION = 12

/** A socket's response frames, kept as received chunks (answers of several MiB each). */
class FrameReader {
  private readonly chunks: Buffer[] = []
  private bytes = 0
  private wake: (() => void) | null = null

  constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.chunks.push(chunk)
      this.bytes += chunk.length
      this.wake?.()
    })
  }

  static connect(port: number): Promise<FrameReader> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port }, () => resolve(new FrameReader(socket)))
      socket.once('error', reject)
    })
  }

  private take(length: number): Buffer {
    const joined = Buffer.concat(this.chunks, this.bytes)
    this.chunks.length = 0
    if (joined.length > length) this.chunks.push(joined.subarray(length))
    this.bytes = joined.length - length
    return joined.subarray(0, length)
  }

  private async atLeast(length: number): Promise<void> {
    const deadline = Date.now() + 20000
    while (this.bytes < length) {
      if (Date.now() > deadline) throw new Error('timed out waiting for a response frame')
      await new Promise<void>((resolve) => {
        this.wake = resolve
        setTimeout(resolve, 100)
      })
    }
  }

  async next(): Promise<Buffer> {
    await this.atLeast(4)
    const size = this.take(4).readInt32BE(0)
    await this.atLeast(size)
    return Buffer.from(this.take(size))
  }
}

/** Checks each batch's CRC-32C (attributes to the end) and returns how many there were. */
function checkBatches(records: Buffer): number {
  let at = 0
  let count = 0
  while (at + 61 <= records.length) {
    const size = 12 + records.readInt32BE(at + 8)
    assert.ok(at + size <= records.length, 'fetch answers whole batches')
    assert.equal(
      crc32c(records.subarray(at + 21, at + size)),
      records.readUInt32BE(at + 17),
      `batch at ${at}`,
    )
    at += size
    count++
  }
  assert.equal(at, records.length)
  return count
}

test('pipelined fetches read into reused buffers all answer intact, equal batches; the pool empties when they stop', async () => {
  const cluster = await ReplicationCluster.start(1, {})
  const clients: FrameReader[] = []
  try {
    await cluster.createTopic('pooled', PARTITIONS, 1)
    const broker = cluster.broker(0)
    for (let partition = 0; partition < PARTITIONS; partition++) {
      for (let i = 0; i < BATCHES_PER_PARTITION; i++) {
        const batch = simpleBatch(RECORDS_PER_BATCH, VALUE_BYTES, partition * 100 + i)
        const result = await broker.replicaManager.appendToLeader({
          topic: 'pooled',
          partition: partition,
          records: batch,
          requiredAcks: 1,
          timeoutMs: 5000,
        })
        assert.equal(result.errorCode, ErrorCode.NONE)
      }
    }
    const port = Number(broker.bootstrapServers.split(':')[1])
    for (let i = 0; i < 2; i++) clients.push(await FrameReader.connect(port))
    const api = apis.get(ApiKey.Fetch)!
    const version = 11
    const fetchAt = (offset: bigint, correlationId: number): Buffer =>
      RawClient.frame(ApiKey.Fetch, version, correlationId, {
        ...(api.defaultRequest() as object),
        replicaId: -1,
        maxWaitMs: 0,
        minBytes: 1,
        maxBytes: 50 << 20,
        isolationLevel: 0,
        sessionId: 0,
        sessionEpoch: -1,
        topics: [
          {
            topic: 'pooled',
            topicId: ZERO_UUID,
            partitions: Array.from({ length: PARTITIONS }, (_, partition) => ({
              partition,
              currentLeaderEpoch: -1,
              fetchOffset: offset,
              lastFetchedEpoch: -1,
              logStartOffset: -1n,
              partitionMaxBytes: PARTITION_MAX_BYTES,
            })),
          },
        ],
      })
    // Offsets 0 and 3 batches in: the reads start on and off the index's first entry.
    const offsets = [0n, BigInt(3 * RECORDS_PER_BATCH)]
    let correlationId = 1
    // The first connection reads nothing for now: its answers wait in the broker's socket
    // (written in part) while the second connection's fetches read into buffers. A buffer
    // given back before its bytes were written would be overwritten by those reads.
    clients[0].socket.pause()
    for (const client of clients) {
      for (let i = 0; i < FETCHES_PER_CONNECTION; i++)
        client.socket.write(fetchAt(offsets[i % offsets.length], correlationId++))
      await delay(200)
    }
    const seen = new Map<string, Buffer>()
    let batches = 0
    for (const client of [...clients].reverse()) {
      client.socket.resume()
      for (let i = 0; i < FETCHES_PER_CONNECTION; i++) {
        const frame = await client.next()
        const reader = new Reader(frame)
        decodeResponseHeader(reader, api.responseHeaderVersion(version))
        const response = api.decodeResponse(reader, version) as FetchResponse
        for (const p of response.responses[0].partitions) {
          assert.equal(p.errorCode, ErrorCode.NONE)
          const records = p.records as Buffer
          assert.ok(records.length > PARTITION_MAX_BYTES / 2, `partition ${p.partitionIndex} read from disk`)
          batches += checkBatches(records)
          const key = `${p.partitionIndex}@${offsets[i % offsets.length]}`
          const first = seen.get(key)
          if (first === undefined) seen.set(key, records)
          else assert.ok(first.equals(records), `fetch ${i} of ${key} differs from the first`)
        }
      }
    }
    assert.ok(batches > 0)
    // The last answers' write callbacks may run after the client read them.
    for (let i = 0; i < 100 && readBufferPool.retainedBytes < PARTITION_MAX_BYTES; i++) await delay(10)
    assert.ok(
      readBufferPool.retainedBytes >= PARTITION_MAX_BYTES,
      `${readBufferPool.retainedBytes} bytes pooled`,
    )
    // The reclaimer `tidelog start` and `tidelog broker` run, on a clock the test moves and
    // an idle process whose collections it counts.
    const clock = new ManualClock()
    let collections = 0
    const memory = {
      busyFractionSinceLastCall: () => 0,
      heldBytes: () => 0,
      collectGarbage: () => collections++,
    }
    const reclaimer = new MemoryReclaimer({ clock, memory, pool: readBufferPool, intervalMs: 5000 })
    reclaimer.start()
    clock.advance(5000)
    assert.ok(readBufferPool.retainedBytes >= PARTITION_MAX_BYTES, 'kept through the interval of the fetches')
    clock.advance(5000)
    reclaimer.stop()
    assert.equal(readBufferPool.retainedBytes, 0)
    assert.equal(collections, 1)
  } finally {
    for (const client of clients) client.socket.destroy()
    await cluster.close()
  }
})

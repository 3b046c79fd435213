/**
 * The replica fetcher over an injected transport and a manual clock: a leader connection
 * that never answers (half-open: no FIN, no RST) is dropped after the fetch wait plus the
 * request timeout and the fetcher reconnects, instead of stalling every partition it
 * carries forever; partitions added one after another (a new topic's) go in incremental
 * fetches of short polls, and only a long poll is cut (closing the connection) for one; a
 * topic re-created under the same name is another partition to the fetch session (forgotten
 * and added by topic id).
 */

import assert from 'node:assert/strict'
import { join } from 'node:path'
import { test } from 'node:test'
import type { FileHandle, FileSystem, OpenFlags } from '../../src/common/file-system.js'
import { silentLogger } from '../../src/common/logger.js'
import type { ByteStream } from '../../src/common/network.js'
import { toOffset, toPartitionEpoch } from '../../src/common/types.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { encodeResponseFrame } from '../../src/protocol/frame-encoder.js'
import { defaultFetchResponsePartitionData } from '../../src/protocol/generated/fetch-response.js'
import { decodeRequestHeader } from '../../src/protocol/generated/headers-and-data.js'
import {
  ApiKey,
  apis,
  type FetchRequest,
  type FetchResponse,
  loadAllApiCodecs,
  type OffsetForLeaderEpochRequest,
  type OffsetForLeaderEpochResponse,
} from '../../src/protocol/generated/index.js'
import { Reader } from '../../src/protocol/primitives.js'
import { FULL_SWEEP_INTERVAL_MS } from '../../src/replication/follower-session-news.js'
import { Partition } from '../../src/replication/partition.js'
import { ReplicaFetcherManager } from '../../src/replication/replica-fetcher-manager.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock, simpleBatch, withTempDir } from '../storage/helpers.js'

const tick = () => new Promise((resolve) => setImmediate(resolve))

test('a fetch that is never answered drops the connection and reconnects', async () => {
  await withTempDir(async (dir) => {
    const clock = new ManualClock()
    const connections: { written: number; destroyed: boolean }[] = []
    const transport = {
      async connect(): Promise<ByteStream> {
        const state = { written: 0, destroyed: false }
        connections.push(state)
        return {
          remoteAddress: '127.0.0.1:1',
          writableNeedDrain: false,
          pause: () => undefined,
          resume: () => undefined,
          onDrain: () => undefined,
          write: () => void state.written++,
          onData: () => undefined,
          onClose: () => undefined,
          destroy: () => void (state.destroyed = true),
        }
      },
    }
    const log = await UnifiedLog.open({ fs: nodeFileSystem, dir: join(dir, 't-0'), clock })
    const partition = new Partition(
      // Fetch v13+ names topics by id: a real (base64url) Kafka uuid.
      { topic: 't', partition: 0, topicId: 'AAAAAAAAAAAAAAAAAAAAAg' },
      log,
      {
        partition: 0,
        replicas: ids(1, 2),
        isr: ids(1, 2),
        leader: toBrokerId(2),
        leaderEpoch: 0,
        partitionEpoch: toPartitionEpoch(0),
      },
      {
        localBrokerId: toBrokerId(1),
        isFenced: () => false,
        nowMs: () => clock.now,
        alterIsr: async () => false,
      },
    )
    const fetchers = new ReplicaFetcherManager({
      nodeId: toBrokerId(1),
      clock,
      logger: silentLogger,
      transport,
      brokerAddress: () => ({ host: '127.0.0.1', port: 1 }),
      fetchMaxBytes: 1 << 20,
      fetchResponseMaxBytes: 10 << 20,
      fetchWaitMaxMs: 500,
      fetchMinBytes: 1,
      fetchBackoffMs: 100,
      requestTimeoutMs: 2000,
    })
    try {
      fetchers.follow(partition, toBrokerId(2), 0)
      for (let i = 0; i < 10; i++) await tick()
      assert.equal(connections.length, 1)
      assert.equal(connections[0].written, 1, 'one fetch sent')
      clock.advance(2499)
      for (let i = 0; i < 10; i++) await tick()
      assert.equal(connections[0].destroyed, false, 'still within the timeout')
      clock.advance(1)
      for (let i = 0; i < 10; i++) await tick()
      assert.equal(connections[0].destroyed, true, 'the silent connection is dropped')
      clock.advance(100) // backoff
      for (let i = 0; i < 10; i++) await tick()
      assert.equal(connections.length, 2, 'and the fetcher reconnects')
      assert.equal(connections[1].written, 1)
    } finally {
      fetchers.shutdown()
      await log.close()
    }
  })
})

/** A leader that decodes each Fetch and holds it until the test answers it. */
class HeldFetches {
  readonly fetches: { connection: number; request: FetchRequest; answer: (body: FetchResponse) => void }[] =
    []
  readonly destroyed: boolean[] = []

  readonly transport = {
    connect: (): Promise<ByteStream> => {
      const connection = this.destroyed.length
      this.destroyed.push(false)
      let onData: (chunk: Buffer) => void = () => {}
      const stream: ByteStream = {
        remoteAddress: '127.0.0.1:1',
        writableNeedDrain: false,
        write: (chunks) => {
          const api = apis.get(ApiKey.Fetch)!
          const r = new Reader(Buffer.concat(chunks), 4)
          const header = decodeRequestHeader(r, api.requestHeaderVersion(15))
          const request = api.decodeRequest(r, header.requestApiVersion) as FetchRequest
          this.fetches.push({
            connection,
            request,
            answer: (body) => {
              onData(Buffer.concat(encodeResponseFrame(ApiKey.Fetch, 15, header.correlationId, body)))
            },
          })
        },
        pause: () => {},
        resume: () => {},
        onData: (listener) => {
          onData = listener
        },
        onDrain: () => {},
        onClose: () => {},
        destroy: () => void (this.destroyed[connection] = true),
      }
      return Promise.resolve(stream)
    },
  }
}

/** Partition indexes a fetch carries. */
const carried = (request: FetchRequest) => request.topics.flatMap((t) => t.partitions.map((p) => p.partition))

test('partitions added during a burst join the next incremental fetch; only a long poll is cut', async () => {
  await loadAllApiCodecs()
  await withTempDir(async (dir) => {
    const clock = new ManualClock()
    const leader = new HeldFetches()
    const topicId = 'AAAAAAAAAAAAAAAAAAAAAg'
    const partitions: Partition[] = []
    for (let index = 0; index < 3; index++) {
      const log = await UnifiedLog.open({ fs: nodeFileSystem, dir: join(dir, `t-${index}`), clock })
      partitions.push(
        new Partition(
          { topic: 't', partition: index, topicId },
          log,
          {
            partition: index,
            replicas: ids(1, 2),
            isr: ids(1, 2),
            leader: toBrokerId(2),
            leaderEpoch: 0,
            partitionEpoch: toPartitionEpoch(0),
          },
          {
            localBrokerId: toBrokerId(1),
            isFenced: () => false,
            nowMs: () => clock.now,
            alterIsr: async () => false,
          },
        ),
      )
    }
    const fetchers = new ReplicaFetcherManager({
      nodeId: toBrokerId(1),
      clock,
      logger: silentLogger,
      transport: leader.transport,
      brokerAddress: () => ({ host: '127.0.0.1', port: 1 }),
      fetchMaxBytes: 1 << 20,
      fetchResponseMaxBytes: 10 << 20,
      fetchWaitMaxMs: 500,
      fetchMinBytes: 1,
      fetchBackoffMs: 100,
    })
    const settle = async () => {
      for (let i = 0; i < 20; i++) await tick()
    }
    const empty = (sessionId: number): FetchResponse => ({
      throttleTimeMs: 0,
      errorCode: ErrorCode.NONE,
      sessionId,
      responses: [],
      nodeEndpoints: [],
    })
    try {
      fetchers.follow(partitions[0], toBrokerId(2), 0)
      await settle()
      // The opening fetch: full, and short (a partition was just added).
      let fetch = leader.fetches.at(-1)!
      assert.equal(fetch.request.sessionEpoch, 0)
      assert.deepEqual(carried(fetch.request), [0])
      assert.ok(fetch.request.maxWaitMs < 500, `a burst polls briefly, not ${fetch.request.maxWaitMs} ms`)
      fetch.answer({
        ...empty(77),
        responses: [
          { topic: '', topicId, partitions: [{ ...defaultFetchResponsePartitionData(), partitionIndex: 0 }] },
        ],
      })
      await settle()
      fetch = leader.fetches.at(-1)!
      assert.equal(fetch.request.sessionId, 77)
      assert.equal(fetch.request.sessionEpoch, 1)
      assert.deepEqual(carried(fetch.request), [])
      // Added while that short poll is out: it is not cut (the connection and the session
      // stay), and the partition goes in the next, incremental, fetch.
      fetchers.follow(partitions[1], toBrokerId(2), 0)
      clock.advance(fetch.request.maxWaitMs)
      await settle()
      assert.equal(leader.destroyed[0], false, 'a short poll is not cut')
      fetch.answer(empty(77))
      await settle()
      fetch = leader.fetches.at(-1)!
      assert.equal(fetch.connection, 0)
      assert.equal(fetch.request.sessionEpoch, 2)
      assert.deepEqual(carried(fetch.request), [1])
      // Nothing added for replica.fetch.wait.max.ms: back to long polls.
      clock.advance(500)
      fetch.answer(empty(77))
      await settle()
      fetch = leader.fetches.at(-1)!
      assert.equal(fetch.request.maxWaitMs, 500)
      assert.deepEqual(carried(fetch.request), [])
      // A partition added during a long poll cuts it short (closing the connection): the
      // next fetch, on a new one, is full and replaces the session.
      fetchers.follow(partitions[2], toBrokerId(2), 0)
      clock.advance(10)
      await settle()
      assert.equal(leader.destroyed[0], true, 'the long poll is cut')
      fetch = leader.fetches.at(-1)!
      assert.equal(fetch.connection, 1)
      assert.equal(fetch.request.sessionId, 77)
      assert.equal(fetch.request.sessionEpoch, 0)
      assert.deepEqual(carried(fetch.request).sort(), [0, 1, 2])
    } finally {
      fetchers.shutdown()
      for (const partition of partitions) await partition.log.close()
    }
  })
})

test('a topic re-created under the same name: the next incremental fetch forgets the old topic id and adds the new one', async () => {
  await loadAllApiCodecs()
  await withTempDir(async (dir) => {
    const clock = new ManualClock()
    const leader = new HeldFetches()
    const oldTopicId = 'AAAAAAAAAAAAAAAAAAAAAg'
    const newTopicId = 'AAAAAAAAAAAAAAAAAAAAAw'
    const replicaOf = async (topicId: string, subdir: string) =>
      new Partition(
        { topic: 't', partition: 0, topicId },
        await UnifiedLog.open({ fs: nodeFileSystem, dir: join(dir, subdir), clock }),
        {
          partition: 0,
          replicas: ids(1, 2),
          isr: ids(1, 2),
          leader: toBrokerId(2),
          leaderEpoch: 0,
          partitionEpoch: toPartitionEpoch(0),
        },
        {
          localBrokerId: toBrokerId(1),
          isFenced: () => false,
          nowMs: () => clock.now,
          alterIsr: async () => false,
        },
      )
    const oldReplica = await replicaOf(oldTopicId, 'old')
    const newReplica = await replicaOf(newTopicId, 'new')
    const fetchers = new ReplicaFetcherManager({
      nodeId: toBrokerId(1),
      clock,
      logger: silentLogger,
      transport: leader.transport,
      brokerAddress: () => ({ host: '127.0.0.1', port: 1 }),
      fetchMaxBytes: 1 << 20,
      fetchResponseMaxBytes: 10 << 20,
      fetchWaitMaxMs: 500,
      fetchMinBytes: 1,
      fetchBackoffMs: 100,
    })
    const settle = async () => {
      for (let i = 0; i < 20; i++) await tick()
    }
    const answer = (topicId: string, records: Buffer | null, highWatermark: bigint): FetchResponse => ({
      throttleTimeMs: 0,
      errorCode: ErrorCode.NONE,
      sessionId: 77,
      responses:
        records === null
          ? []
          : [
              {
                topic: '',
                topicId,
                partitions: [
                  { ...defaultFetchResponsePartitionData(), partitionIndex: 0, highWatermark, records },
                ],
              },
            ],
      nodeEndpoints: [],
    })
    try {
      fetchers.follow(oldReplica, toBrokerId(2), 0)
      await settle()
      leader.fetches.at(-1)!.answer(answer(oldTopicId, Buffer.alloc(0), 0n))
      await settle()
      // The session is open and a short poll is out (the partition was just added): the
      // replica manager retires the old topic's replica and follows the new topic's, as it
      // does when both images arrive while a fetch is out.
      let fetch = leader.fetches.at(-1)!
      assert.equal(fetch.request.sessionEpoch, 1)
      fetchers.unfollow(oldReplica)
      fetchers.follow(newReplica, toBrokerId(2), 0)
      await settle()
      assert.equal(leader.destroyed[0], false, 'a short poll is not cut: the next fetch is incremental')
      fetch.answer(answer(oldTopicId, null, 0n))
      await settle()
      fetch = leader.fetches.at(-1)!
      assert.equal(fetch.request.sessionEpoch, 2)
      // Sent as a change of the old entry (same name and index), the leader's session kept
      // the old topic id, and the new partition was never fetched.
      assert.deepEqual(
        fetch.request.forgottenTopicsData.map((t) => [t.topicId, t.partitions]),
        [[oldTopicId, [0]]],
        'the old topic is forgotten',
      )
      assert.deepEqual(
        fetch.request.topics.map((t) => [t.topicId, t.partitions.map((p) => p.partition)]),
        [[newTopicId, [0]]],
        'the new topic is added',
      )
      // An answer for the old topic id is not taken for the new partition; one for the new id is.
      fetch.answer(answer(oldTopicId, simpleBatch(2), 2n))
      await settle()
      assert.equal(newReplica.log.logEndOffset, 0, "the old topic's records went into the new replica")
      fetch = leader.fetches.at(-1)!
      fetch.answer(answer(newTopicId, simpleBatch(3), 3n))
      await settle()
      assert.equal(newReplica.log.logEndOffset, 3)
      assert.equal(oldReplica.log.logEndOffset, 0)
    } finally {
      fetchers.shutdown()
      await oldReplica.log.close()
      await newReplica.log.close()
    }
  })
})

test('an unfollow of a re-created topic’s old replica does not stop the new one', async () => {
  await withTempDir(async (dir) => {
    const clock = new ManualClock()
    const leader = new HeldFetches()
    const replicaOf = async (topicId: string, subdir: string) =>
      new Partition(
        { topic: 't', partition: 0, topicId },
        await UnifiedLog.open({ fs: nodeFileSystem, dir: join(dir, subdir), clock }),
        {
          partition: 0,
          replicas: ids(1, 2),
          isr: ids(1, 2),
          leader: toBrokerId(2),
          leaderEpoch: 0,
          partitionEpoch: toPartitionEpoch(0),
        },
        {
          localBrokerId: toBrokerId(1),
          isFenced: () => false,
          nowMs: () => clock.now,
          alterIsr: async () => false,
        },
      )
    const oldReplica = await replicaOf('AAAAAAAAAAAAAAAAAAAAAg', 'old')
    const newReplica = await replicaOf('AAAAAAAAAAAAAAAAAAAAAw', 'new')
    const fetchers = new ReplicaFetcherManager({
      nodeId: toBrokerId(1),
      clock,
      logger: silentLogger,
      transport: leader.transport,
      brokerAddress: () => ({ host: '127.0.0.1', port: 1 }),
      fetchMaxBytes: 1 << 20,
      fetchResponseMaxBytes: 10 << 20,
      fetchWaitMaxMs: 500,
      fetchMinBytes: 1,
      fetchBackoffMs: 100,
    })
    try {
      // Following the new topic's partition replaces the old one's (one per name and index),
      // and a late unfollow of the old one leaves the new one followed. The replica manager
      // unfollows the old replica first; keyed by name, the other order stopped the new one.
      fetchers.follow(oldReplica, toBrokerId(2), 0)
      fetchers.follow(newReplica, toBrokerId(2), 0)
      fetchers.unfollow(oldReplica)
      for (let i = 0; i < 20; i++) await tick()
      clock.advance(100) // the fetcher's loop found nothing ready to fetch yet and backed off
      for (let i = 0; i < 20; i++) await tick()
      const fetch = leader.fetches.at(-1)
      assert.ok(fetch !== undefined, 'nothing is fetched: the new replica was unfollowed with the old one')
      assert.deepEqual(
        fetch.request.topics.map((t) => [t.topicId, t.partitions.map((p) => p.partition)]),
        [['AAAAAAAAAAAAAAAAAAAAAw', [0]]],
      )
    } finally {
      fetchers.shutdown()
      await oldReplica.log.close()
      await newReplica.log.close()
    }
  })
})

/** Node's file system, with writes to `.log` files held while `held` is set. */
class HeldLogWrites implements FileSystem {
  held = false
  private release: () => void = () => {}
  private gate: Promise<void> = Promise.resolve()

  hold(): void {
    this.held = true
    this.gate = new Promise((resolve) => {
      this.release = resolve
    })
  }

  letGo(): void {
    this.held = false
    this.release()
  }

  async open(path: string, flags: OpenFlags): Promise<FileHandle> {
    const handle = await nodeFileSystem.open(path, flags)
    if (!path.endsWith('.log')) return handle
    const wait = () => (this.held ? this.gate : Promise.resolve())
    return {
      read: (buffer, offset, length, position) => handle.read(buffer, offset, length, position),
      write: async (buffer, position) => {
        await wait()
        return handle.write(buffer, position)
      },
      writev: async (buffers, position) => {
        await wait()
        return handle.writev(buffers, position)
      },
      sync: () => handle.sync(),
      truncate: (length) => handle.truncate(length),
      stat: () => handle.stat(),
      close: () => handle.close(),
    }
  }
  rename = nodeFileSystem.rename.bind(nodeFileSystem)
  unlink = nodeFileSystem.unlink.bind(nodeFileSystem)
  mkdir = nodeFileSystem.mkdir.bind(nodeFileSystem)
  rmdir = nodeFileSystem.rmdir.bind(nodeFileSystem)
  readdir = nodeFileSystem.readdir.bind(nodeFileSystem)
  stat = nodeFileSystem.stat.bind(nodeFileSystem)
  syncDir = nodeFileSystem.syncDir.bind(nodeFileSystem)
  statfs = nodeFileSystem.statfs.bind(nodeFileSystem)
  lockExclusive = nodeFileSystem.lockExclusive.bind(nodeFileSystem)
}

/** A new leader that answers OffsetForLeaderEpoch at once with `endOffset` and holds fetches. */
function leaderAnswering(endOffset: bigint, leaderEpoch: number) {
  const asked: number[] = []
  const transport = {
    connect: (): Promise<ByteStream> => {
      let onData: (chunk: Buffer) => void = () => {}
      return Promise.resolve<ByteStream>({
        remoteAddress: '127.0.0.1:1',
        writableNeedDrain: false,
        write: (chunks) => {
          const frame = Buffer.concat(chunks)
          const apiKey = frame.readInt16BE(4)
          if (apiKey !== ApiKey.OffsetForLeaderEpoch) return
          const api = apis.get(apiKey)!
          const version = frame.readInt16BE(6)
          const r = new Reader(frame, 4)
          const header = decodeRequestHeader(r, api.requestHeaderVersion(version))
          const request = api.decodeRequest(r, version) as OffsetForLeaderEpochRequest
          const topics = request.topics.map((t) => ({
            topic: t.topic,
            partitions: t.partitions.map((p) => {
              asked.push(p.leaderEpoch)
              return { errorCode: ErrorCode.NONE, partition: p.partition, leaderEpoch, endOffset }
            }),
          }))
          const body: OffsetForLeaderEpochResponse = { throttleTimeMs: 0, topics }
          setImmediate(() =>
            onData(Buffer.concat(encodeResponseFrame(apiKey, version, header.correlationId, body))),
          )
        },
        pause: () => {},
        resume: () => {},
        onData: (listener) => {
          onData = listener
        },
        onDrain: () => {},
        onClose: () => {},
        destroy: () => {},
      })
    },
  }
  return { transport, asked }
}

test('a replica that stops leading truncates what it appended as leader after its last epoch, even an append still on its way to the log', async () => {
  await loadAllApiCodecs()
  await withTempDir(async (dir) => {
    const clock = new ManualClock()
    const fs = new HeldLogWrites()
    const log = await UnifiedLog.open({ fs, dir: join(dir, 't-0'), clock })
    const state = (leader: number, leaderEpoch: number) => ({
      partition: 0,
      replicas: ids(1, 2),
      isr: ids(1, 2),
      leader: toBrokerId(leader),
      leaderEpoch,
      partitionEpoch: toPartitionEpoch(leaderEpoch),
    })
    const partition = new Partition(
      { topic: 't', partition: 0, topicId: 'AAAAAAAAAAAAAAAAAAAAAg' },
      log,
      state(1, 5),
      {
        localBrokerId: toBrokerId(1),
        isFenced: () => false,
        nowMs: () => clock.now,
        alterIsr: async () => false,
      },
    )
    // Epoch 6's leader (broker 2) has this replica's first two records; its epoch 5 ends at 2.
    const newLeader = leaderAnswering(2n, 5)
    const fetchers = new ReplicaFetcherManager({
      nodeId: toBrokerId(1),
      clock,
      logger: silentLogger,
      transport: newLeader.transport,
      brokerAddress: () => ({ host: '127.0.0.1', port: 2 }),
      fetchMaxBytes: 1 << 20,
      fetchResponseMaxBytes: 10 << 20,
      fetchWaitMaxMs: 500,
      fetchMinBytes: 1,
      fetchBackoffMs: 100,
    })
    const settle = async () => {
      for (let i = 0; i < 30; i++) await tick()
    }
    try {
      await partition.appendRecordsToLeader(simpleBatch(2), 1, 1)
      assert.equal(log.logEndOffset, 2)
      // An append taken as leader in epoch 5 whose write is slow (a marker, a produce)...
      fs.hold()
      const late = partition.appendRecordsToLeader(simpleBatch(1), 1, 1)
      await settle()
      // ...is still on its way when epoch 6 makes this replica a follower of broker 2.
      partition.updateState(state(2, 6))
      fetchers.follow(partition, toBrokerId(2), 6)
      await settle()
      fs.letGo()
      await late
      // The truncation's file operations take real time.
      for (let i = 0; i < 200 && log.logEndOffset !== 2; i++) await new Promise((r) => setTimeout(r, 10))
      assert.deepEqual(newLeader.asked, [5], 'one OffsetForLeaderEpoch, for epoch 5')
      assert.equal(log.logEndOffset, 2, 'the epoch-5 append the new leader lacks is cut')
    } finally {
      fetchers.shutdown()
      await log.close()
    }
  })
})

test('an idle round reads no partition; what changes is sent in the next fetch, what changes unseen within a sweep', async () => {
  await loadAllApiCodecs()
  await withTempDir(async (dir) => {
    const clock = new ManualClock()
    const leader = new HeldFetches()
    const topicId = 'AAAAAAAAAAAAAAAAAAAAAg'
    const count = 20
    // Reads of a log end count what a round looks at: the old round read every one, twice.
    let logEndReads = 0
    const logEnd = Object.getOwnPropertyDescriptor(UnifiedLog.prototype, 'logEndOffset')!.get!
    const partitions: Partition[] = []
    for (let index = 0; index < count; index++) {
      const log = await UnifiedLog.open({ fs: nodeFileSystem, dir: join(dir, `t-${index}`), clock })
      Object.defineProperty(log, 'logEndOffset', {
        get() {
          logEndReads++
          return logEnd.call(this)
        },
      })
      const state = {
        partition: index,
        replicas: ids(1, 2),
        isr: ids(1, 2),
        leader: toBrokerId(2),
        leaderEpoch: 0,
        partitionEpoch: toPartitionEpoch(0),
      }
      const context = {
        localBrokerId: toBrokerId(1),
        isFenced: () => false,
        nowMs: () => clock.now,
        alterIsr: async () => false,
      }
      partitions.push(new Partition({ topic: 't', partition: index, topicId }, log, state, context))
    }
    const fetchers = new ReplicaFetcherManager({
      nodeId: toBrokerId(1),
      clock,
      logger: silentLogger,
      transport: leader.transport,
      brokerAddress: () => ({ host: '127.0.0.1', port: 1 }),
      fetchMaxBytes: 1 << 20,
      fetchResponseMaxBytes: 10 << 20,
      fetchWaitMaxMs: 500,
      fetchMinBytes: 1,
      fetchBackoffMs: 100,
    })
    const settle = async () => {
      for (let i = 0; i < 20; i++) await tick()
    }
    type PartitionData = FetchResponse['responses'][number]['partitions'][number]
    const answer = (partitionData: Partial<PartitionData>[] = []): FetchResponse => ({
      throttleTimeMs: 0,
      errorCode: ErrorCode.NONE,
      sessionId: 77,
      responses:
        partitionData.length === 0
          ? []
          : [
              {
                topic: '',
                topicId,
                partitions: partitionData.map((p) => ({ ...defaultFetchResponsePartitionData(), ...p })),
              },
            ],
      nodeEndpoints: [],
    })
    /** Answers the fetch out after its wait; the next one, sent at once. */
    const round = async (partitionData: Partial<PartitionData>[] = []) => {
      const fetch = leader.fetches.at(-1)!
      clock.advance(fetch.request.maxWaitMs)
      fetch.answer(answer(partitionData))
      await settle()
      return leader.fetches.at(-1)!.request
    }
    const positions = (request: FetchRequest) =>
      request.topics.flatMap((t) => t.partitions.map((p) => [p.partition, Number(p.fetchOffset)]))
    const forgotten = (request: FetchRequest) => request.forgottenTopicsData.flatMap((t) => t.partitions)
    try {
      for (const partition of partitions) fetchers.follow(partition, toBrokerId(2), 0)
      await settle()
      // Past the burst of additions (the first fetch carries the one truncated in time, the
      // next the others): long polls, none of which has anything to send.
      const sent = new Set(carried(leader.fetches.at(-1)!.request))
      let request = await round()
      for (let i = 0; i < 200 && request.maxWaitMs < 500; i++) {
        for (const index of carried(request)) sent.add(index)
        request = await round()
      }
      assert.equal(sent.size, count)
      assert.equal(request.maxWaitMs, 500)
      request = await round()
      const readsBefore = logEndReads
      for (let i = 0; i < 10; i++) {
        request = await round()
        assert.deepEqual(carried(request), [])
      }
      assert.equal(logEndReads - readsBefore, 0, 'ten idle rounds read no log end')
      // Records for one partition: the next fetch asks from its new end, and only for it.
      request = await round([{ partitionIndex: 3, highWatermark: 1n, records: simpleBatch(1) }])
      assert.deepEqual(positions(request), [[3, 1]])
      assert.equal(partitions[3].highWatermark, 1)
      // An error backs one off (replica.fetch.backoff.ms): the next fetch forgets it, the one
      // after its backoff sends it again.
      request = await round([{ partitionIndex: 5, errorCode: ErrorCode.KAFKA_STORAGE_ERROR }])
      assert.deepEqual(forgotten(request), [5])
      assert.deepEqual(carried(request), [])
      request = await round()
      assert.deepEqual(positions(request), [[5, 0]])
      // A log cut outside the fetcher and reported (a corrupt batch met by a read): next fetch.
      await partitions[3].truncateTo(toOffset(0))
      fetchers.touch(partitions[3])
      request = await round()
      assert.deepEqual(positions(request), [[3, 0]])
      // Cut and not reported: the sweep finds it within FULL_SWEEP_INTERVAL_MS.
      request = await round([{ partitionIndex: 3, highWatermark: 1n, records: simpleBatch(1) }])
      assert.deepEqual(positions(request), [[3, 1]])
      await partitions[3].truncateTo(toOffset(0))
      request = await round()
      let waitedMs = request.maxWaitMs
      while (carried(request).length === 0 && waitedMs <= FULL_SWEEP_INTERVAL_MS) {
        waitedMs += request.maxWaitMs
        request = await round()
      }
      assert.deepEqual(positions(request), [[3, 0]])
      assert.ok(waitedMs <= FULL_SWEEP_INTERVAL_MS, `found after ${waitedMs} ms`)
    } finally {
      fetchers.shutdown()
      for (const partition of partitions) await partition.log.close()
    }
  })
})

/**
 * Damaged segments in a 3-broker cluster (issue 35, item 3): a follower whose segment is
 * damaged cuts it and fetches the rest from the leader again, found by recovery after a
 * kill or by a read; a leader that finds damage goes offline and a consumer reads every
 * record, as written, from the replica that takes over.
 */

import assert from 'node:assert/strict'
import { open, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { Consumer, Producer } from '../../src/client/index.js'
import { toOffset } from '../../src/common/types.js'
import type { TestCluster } from '../../src/testing/index.js'
import { toBrokerId } from '../helpers/broker-ids.js'
import { allowErrorLogs } from '../helpers/log-guard.js'
import { startCluster } from '../helpers/testing.js'
import { waitUntil } from '../helpers/wait.js'
import { splitBatches } from '../storage/helpers.js'

const TOPIC = 'damaged'
/** More than a log keeps in memory (RecentBatches, 256 KiB): old segments are read from disk. */
const RECORDS = 400
const value = (i: number) => `value-${i}`.padEnd(900, '.')

async function withCluster(body: (cluster: TestCluster) => Promise<void>): Promise<void> {
  const cluster = await startCluster({
    brokers: 3,
    // Below segment.bytes: a follower refetching several segments' worth must not ask for
    // more than one segment holds in one append (refused as larger than segment.bytes).
    properties: { 'replica.fetch.max.bytes': 8192 },
    topics: [{ name: TOPIC, partitions: 1, replicationFactor: 3, configs: { 'segment.bytes': 16384 } }],
  })
  try {
    const producer = new Producer({ bootstrapServers: cluster.bootstrapServers, acks: 'all', lingerMs: 0 })
    try {
      for (let i = 0; i < RECORDS; i += 10) {
        await Promise.all(
          Array.from({ length: 10 }, (_, j) =>
            producer.send({ topic: TOPIC, partition: 0, key: `k${i + j}`, value: value(i + j) }),
          ),
        )
      }
    } finally {
      await producer.close()
    }
    await cluster.waitForIsr(TOPIC)
    await body(cluster)
  } finally {
    await cluster.stop()
  }
}

function logOf(cluster: TestCluster, id: number) {
  const partition = cluster.broker(id).replicaManager.getPartition(TOPIC, 0)
  assert.ok(partition, `broker ${id} hosts the partition`)
  return partition.log
}

/** Every batch of broker `id`'s replica, as bytes (the leader epoch field included). */
async function batchesOf(cluster: TestCluster, id: number): Promise<Buffer[]> {
  const log = logOf(cluster, id)
  const out: Buffer[] = []
  let offset = log.logStartOffset
  while (offset < log.logEndOffset) {
    const data = await log.read(offset, { maxBytes: 1 << 20, maxOffset: log.logEndOffset })
    for (const batch of splitBatches(data.records)) out.push(Buffer.from(batch.bytes))
    offset = data.nextOffset
  }
  return out
}

/** The partition dir of broker `id` (TestCluster keeps each broker's log dir under its root). */
function partitionDir(cluster: TestCluster, id: number): string {
  return join(logOf(cluster, id).dir)
}

/** Flips a bit in the records of the `nth` batch of segment file `file`. */
async function flipInBatch(file: string, nth: number): Promise<void> {
  const handle = await open(file, 'r+')
  try {
    const { size } = await handle.stat()
    const buf = Buffer.alloc(size)
    await handle.read(buf, 0, size, 0)
    let at = 0
    for (let i = 0; i < nth; i++) at += 12 + buf.readInt32BE(at + 8)
    assert.ok(at + 70 < size, `segment ${file} has ${nth + 1} batches`)
    buf[at + 70] ^= 0x10
    await handle.write(buf, at + 70, 1, at + 70)
  } finally {
    await handle.close()
  }
}

async function segmentFiles(dir: string): Promise<string[]> {
  return (await readdir(dir))
    .filter((n) => n.endsWith('.log'))
    .sort()
    .map((n) => join(dir, n))
}

async function waitCaughtUp(cluster: TestCluster, follower: number, leader: number): Promise<void> {
  await waitUntil(
    `broker ${follower} catches up with broker ${leader}`,
    60_000,
    () =>
      cluster.isRunning(follower) &&
      logOf(cluster, follower).logEndOffset === logOf(cluster, leader).logEndOffset &&
      cluster.partitionState(TOPIC, 0).isr.includes(toBrokerId(follower)),
    50,
  )
}

describe('damaged segments in a cluster', () => {
  it('a follower killed with a damaged active segment recovers, cuts it and refetches it from the leader', async () => {
    await withCluster(async (cluster) => {
      const leader = cluster.leaderOf(TOPIC, 0)
      const follower = cluster.brokerIds.find((id) => id !== leader)!
      const dir = partitionDir(cluster, follower)
      const expected = await batchesOf(cluster, leader)
      cluster.kill(follower)
      const files = await segmentFiles(dir)
      await flipInBatch(files.at(-1)!, 0)
      await cluster.restart(follower)
      assert.ok(
        logOf(cluster, follower).logEndOffset < logOf(cluster, leader).logEndOffset,
        'recovery cut it',
      )
      await waitCaughtUp(cluster, follower, leader)
      assert.deepEqual(await batchesOf(cluster, follower), expected)
    })
  })

  it('a follower read that meets a damaged flushed segment cuts it there and refetches it from the leader', async () => {
    // The damage is found by the follower's own read (as a KIP-392 consumer's): logged on purpose.
    allowErrorLogs(/truncated a corrupt log segment/)
    await withCluster(async (cluster) => {
      const leader = cluster.leaderOf(TOPIC, 0)
      const follower = cluster.brokerIds.find((id) => id !== leader)!
      const dir = partitionDir(cluster, follower)
      const expected = await batchesOf(cluster, leader)
      await cluster.stopBroker(follower)
      const files = await segmentFiles(dir)
      assert.ok(files.length >= 3, `only ${files.length} segments`)
      await flipInBatch(files[1], 0)
      await cluster.restart(follower)
      await waitCaughtUp(cluster, follower, leader)
      const partition = cluster.broker(follower).replicaManager.getPartition(TOPIC, 0)!
      let offset = 0
      let served = 0
      let failure: unknown
      while (failure === undefined) {
        try {
          const read = await partition.read(toOffset(offset), 1 << 20, 'read_uncommitted', true)
          if (read.info.sizeInBytes === 0) break
          for (const batch of splitBatches(read.info.records)) {
            assert.ok(batch.bytes.equals(expected[served]), `batch ${served} served as written`)
            served++
          }
          offset = read.info.nextOffset
        } catch (error) {
          failure = error
        }
      }
      assert.match(String(failure), /corrupt record batch/)
      await waitCaughtUp(cluster, follower, leader)
      assert.deepEqual(await batchesOf(cluster, follower), expected)
      assert.equal(logOf(cluster, follower).isOffline, false)
    })
  })

  it('a leader that meets a damaged batch goes offline; the consumer reads every record from the new leader', async () => {
    // The damaged leader takes its only log dir offline and stops: on purpose.
    allowErrorLogs(/corrupt record batch|log dir offline|every log dir is offline|log went offline/)
    await withCluster(async (cluster) => {
      // Damaged under the running leader, as a disk does: its reads go to the file each time.
      const victim = cluster.leaderOf(TOPIC, 0)
      const files = await segmentFiles(partitionDir(cluster, victim))
      await flipInBatch(files[1], 0)
      const consumer = new Consumer({
        bootstrapServers: cluster.bootstrapServers,
        autoOffsetReset: 'earliest',
      })
      try {
        await consumer.assign([{ topic: TOPIC, partition: 0, offset: 0 }])
        const seen: { offset: number; value: string }[] = []
        for await (const record of consumer) {
          seen.push({ offset: Number(record.offset), value: record.value?.toString() ?? '' })
          if (seen.length === RECORDS) break
        }
        assert.deepEqual(
          seen.map((r) => r.offset),
          Array.from({ length: RECORDS }, (_, i) => i),
        )
        assert.deepEqual(
          seen.map((r) => r.value),
          Array.from({ length: RECORDS }, (_, i) => value(i)),
        )
      } finally {
        await consumer.close()
      }
      assert.notEqual(cluster.leaderOf(TOPIC, 0), victim, 'leadership left the damaged replica')
    })
  })
})

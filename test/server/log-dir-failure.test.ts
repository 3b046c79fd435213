/**
 * A disk error takes the broker's only log directory offline: the broker stops (Kafka halts
 * it), controlled, so its leaderships move to the other ISR members at once rather than after
 * the session timeout, and producers carry on there. Three in-process brokers on one store;
 * the leader's file system starts failing writes and fsyncs with EIO mid-stream.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { Producer, type RecordMetadata } from '../../src/client/producer.js'
import { systemClock } from '../../src/common/clock.js'
import type { FileHandle, FileSystem } from '../../src/common/file-system.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { nodeParts } from '../../src/runtime/node-parts.js'
import { Broker } from '../../src/server/broker.js'
import { brokerConfigFromProperties } from '../../src/server/broker-config.js'
import { readAll } from '../client/helpers.js'
import { freePort } from '../helpers/broker-process.js'
import { allowErrorLogs, guardedLogger } from '../helpers/log-guard.js'
import { waitUntil } from '../replication/in-process-cluster.js'

/** node:fs, until `failing` is set: then every write and fsync fails with EIO. */
class FailingFileSystem implements FileSystem {
  failing = false
  open = async (path: string, flags: Parameters<FileSystem['open']>[1]): Promise<FileHandle> => {
    const handle = await nodeFileSystem.open(path, flags)
    const unlessFailing =
      <A extends unknown[], R>(operation: (...args: A) => Promise<R>) =>
      async (...args: A): Promise<R> => {
        if (this.failing) throw Object.assign(new Error(`EIO: i/o error, write '${path}'`), { code: 'EIO' })
        return operation(...args)
      }
    return {
      read: (buffer, offset, length, position) => handle.read(buffer, offset, length, position),
      write: unlessFailing((buffer: Buffer, position: number) => handle.write(buffer, position)),
      writev: unlessFailing((buffers: readonly Buffer[], position: number) =>
        handle.writev(buffers, position),
      ),
      sync: unlessFailing(() => handle.sync()),
      truncate: unlessFailing((length: number) => handle.truncate(length)),
      stat: () => handle.stat(),
      close: () => handle.close(),
    }
  }
  rename = (from: string, to: string) => nodeFileSystem.rename(from, to)
  unlink = (path: string) => nodeFileSystem.unlink(path)
  mkdir = (path: string) => nodeFileSystem.mkdir(path)
  rmdir = (path: string) => nodeFileSystem.rmdir(path)
  readdir = (path: string) => nodeFileSystem.readdir(path)
  stat = (path: string) => nodeFileSystem.stat(path)
  syncDir = (path: string) => nodeFileSystem.syncDir(path)
  statfs = (path: string) => nodeFileSystem.statfs(path)
  lockExclusive = (path: string) => nodeFileSystem.lockExclusive(path)
}

test('a broker whose only log dir fails stops, its leaderships move at once, and no acknowledged record is lost', {
  timeout: 90000,
}, async () => {
  // The failed broker's disk errors and its stop are the point; only that broker's (the
  // survivors log none of these), and only these three messages.
  allowErrorLogs(
    /"msg":"log went offline after a failed disk operation"/,
    /"msg":"log dir offline after a disk failure"/,
    /"msg":"every log dir is offline: stopping the broker"/,
  )
  const root = await mkdtemp(join(tmpdir(), 'tidelog-logdir-failure-'))
  const store = await EmbeddedStore.open({ clock: systemClock })
  const fileSystems = [new FailingFileSystem(), new FailingFileSystem(), new FailingFileSystem()]
  const brokers: Broker[] = []
  let producer: Producer | null = null
  try {
    for (let i = 0; i < 3; i++) {
      const port = await freePort()
      const props = new Map<string, string>([
        ['node.id', String(i)],
        ['log.dirs', join(root, `broker-${i}`)],
        ['listeners', `PLAINTEXT://127.0.0.1:${port}`],
        // Long: leadership moving within it shows the broker stopped itself, controlled.
        ['broker.session.timeout.ms', '30000'],
        ['replica.lag.time.max.ms', '3000'],
        ['min.insync.replicas', '2'],
      ])
      brokers.push(
        await Broker.start(brokerConfigFromProperties(props), {
          ...nodeParts,
          store,
          logger: guardedLogger(`broker-${i}`),
          fileSystem: fileSystems[i],
        }),
      )
    }
    const bootstrap = brokers.map((b) => b.bootstrapServers).join(',')
    const admin = new Admin({ bootstrapServers: bootstrap })
    await admin.createTopics([{ topic: 't', numPartitions: 1, replicationFactor: 3 }])
    admin.close()
    const leaderOf = () => brokers[2].metadataImage().topics.get('t')?.partitions[0]?.leader ?? -1
    await waitUntil('a leader', 10000, () => leaderOf() >= 0)
    const failed = leaderOf()
    const survivor = brokers.find((b) => b.nodeId !== failed)!

    producer = new Producer({
      bootstrapServers: bootstrap,
      acks: 'all',
      lingerMs: 0,
      requestTimeoutMs: 5000,
      deliveryTimeoutMs: 25000,
    })
    const acked: RecordMetadata[] = []
    const send = async (from: number, count: number) => {
      for (let i = from; i < from + count; i++)
        acked.push(await producer!.send({ topic: 't', value: `v${i}` }))
    }
    await send(0, 20)
    fileSystems[failed].failing = true
    const started = Date.now()
    await send(20, 20)
    await waitUntil('a new leader', 20000, () => leaderOf() >= 0 && leaderOf() !== failed)
    assert.ok(Date.now() - started < 20000, 'leadership moved well within the 30 s session timeout')
    await brokers[failed].whenStopped()

    const records = await readAll(survivor.bootstrapServers, 't')
    assert.deepEqual(
      records.map((r) => r.value?.toString()),
      Array.from({ length: 40 }, (_, i) => `v${i}`),
      'every acknowledged record once, in order',
    )
    assert.deepEqual(
      acked.map((m) => m.offset),
      Array.from({ length: 40 }, (_, i) => i),
    )
  } finally {
    await producer?.close()
    for (const broker of brokers.reverse()) await broker.stop().catch(() => {})
    await store.close()
    await rm(root, { recursive: true, force: true })
  }
})

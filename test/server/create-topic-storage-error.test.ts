/**
 * A partition whose log cannot be created (EMFILE, ENOSPC, EIO from the disk) takes its log
 * dir offline, loudly, and CreateTopics answers KAFKA_STORAGE_ERROR for its topic instead of
 * success followed by UNKNOWN_TOPIC_OR_PARTITION for good. The rest of the metadata still
 * applies; with no log dir left the broker stops itself, and a failing checkpoint does not
 * crash or hang it.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { Producer } from '../../src/client/producer.js'
import type { FileHandle, FileSystem, OpenFlags } from '../../src/common/file-system.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { nodeParts } from '../../src/runtime/node-parts.js'
import { Broker } from '../../src/server/broker.js'
import { brokerConfigFromProperties } from '../../src/server/broker-config.js'
import { freePort } from '../helpers/broker-process.js'
import { allowErrorLogs, guardedLogger } from '../helpers/log-guard.js'

/** node:fs, except that opening a path `failsOpen` matches fails with `code` (EMFILE: the open-file limit). */
class FailingOpenFileSystem implements FileSystem {
  failsOpen: (path: string) => boolean = () => false
  code = 'EMFILE'
  failedOpens = 0
  open = async (path: string, flags: OpenFlags): Promise<FileHandle> => {
    if (this.failsOpen(path)) {
      this.failedOpens++
      throw Object.assign(new Error(`${this.code}: too many open files, open '${path}'`), {
        code: this.code,
        syscall: 'open',
      })
    }
    return nodeFileSystem.open(path, flags)
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

async function startBroker(root: string, logDirs: string[], fileSystem: FileSystem): Promise<Broker> {
  const port = await freePort()
  const props = new Map<string, string>([
    ['node.id', '0'],
    ['log.dirs', logDirs.map((d) => join(root, d)).join(',')],
    ['listeners', `PLAINTEXT://127.0.0.1:${port}`],
    ['offsets.topic.replication.factor', '1'],
  ])
  return Broker.start(brokerConfigFromProperties(props), {
    ...nodeParts,
    logger: guardedLogger('broker-0'),
    fileSystem,
  })
}

test('CreateTopics answers KAFKA_STORAGE_ERROR when a partition cannot be created, and the broker carries on', {
  timeout: 60000,
}, async () => {
  allowErrorLogs(
    /"msg":"log dir offline after a disk failure"/,
    /"msg":"log dir offline; its partitions are unavailable until a restart"/,
    /"msg":"could not create the log of an assigned partition; it is offline"/,
  )
  const root = await mkdtemp(join(tmpdir(), 'tidelog-create-storage-error-'))
  const fs = new FailingOpenFileSystem()
  fs.failsOpen = (path) => path.includes('/doomed-0/')
  const broker = await startBroker(root, ['d1', 'd2'], fs)
  let stoppedItself = false
  void broker.whenStopped().then(() => {
    stoppedItself = true
  })
  const admin = new Admin({ bootstrapServers: broker.bootstrapServers })
  const producer = new Producer({ bootstrapServers: broker.bootstrapServers, lingerMs: 0 })
  try {
    const started = Date.now()
    await assert.rejects(admin.createTopics([{ topic: 'doomed', numPartitions: 1, replicationFactor: 1 }]), {
      errorCode: ErrorCode.KAFKA_STORAGE_ERROR,
    })
    assert.ok(Date.now() - started < 10000, 'answered without waiting for the request timeout')
    assert.ok(fs.failedOpens > 0)
    const [doomed] = await admin.describeTopics(['doomed'])
    assert.equal(doomed.partitions[0].errorCode, ErrorCode.KAFKA_STORAGE_ERROR)

    // One dir is offline; the other still takes new partitions, and they work.
    await admin.createTopics([{ topic: 'fine', numPartitions: 2, replicationFactor: 1 }])
    const sent = await producer.send({ topic: 'fine', partition: 1, value: 'v' })
    assert.equal(sent.offset, 0)
    assert.equal(stoppedItself, false)
  } finally {
    await producer.close()
    admin.close()
    await broker.stop()
    await rm(root, { recursive: true, force: true })
  }
})

test('with its only log dir failed (EMFILE creating a log) the broker answers an error and stops itself', {
  timeout: 60000,
}, async () => {
  allowErrorLogs(
    /"msg":"log dir offline after a disk failure"/,
    /"msg":"every log dir is offline: stopping the broker"/,
    /"msg":"could not create the log of an assigned partition; it is offline"/,
  )
  const root = await mkdtemp(join(tmpdir(), 'tidelog-create-storage-error-'))
  const fs = new FailingOpenFileSystem()
  fs.failsOpen = (path) => path.includes('/doomed-')
  const broker = await startBroker(root, ['d1'], fs)
  const admin = new Admin({ bootstrapServers: broker.bootstrapServers, requestTimeoutMs: 5000 })
  try {
    await assert.rejects(admin.createTopics([{ topic: 'doomed', numPartitions: 3, replicationFactor: 1 }]))
    await broker.whenStopped()
  } finally {
    admin.close()
    await broker.stop()
    await rm(root, { recursive: true, force: true })
  }
})

test('a checkpoint failing with EIO takes the log dir offline; the broker stops, it does not crash or hang', {
  timeout: 60000,
}, async () => {
  allowErrorLogs(
    /"msg":"log dir offline after a disk failure"/,
    /"msg":"every log dir is offline: stopping the broker"/,
  )
  const root = await mkdtemp(join(tmpdir(), 'tidelog-create-storage-error-'))
  const fs = new FailingOpenFileSystem()
  const broker = await startBroker(root, ['d1'], fs)
  const admin = new Admin({ bootstrapServers: broker.bootstrapServers })
  try {
    await admin.createTopics([{ topic: 't', numPartitions: 2, replicationFactor: 1 }])
    fs.code = 'EIO'
    fs.failsOpen = (path) => path.endsWith('replication-offset-checkpoint.tmp')
    const started = Date.now()
    await broker.whenStopped()
    assert.ok(Date.now() - started < 20000, `stopped after ${Date.now() - started} ms`)
    assert.ok(fs.failedOpens > 0)
  } finally {
    admin.close()
    await broker.stop()
    await rm(root, { recursive: true, force: true })
  }
})

/**
 * Issue 41 item 2, in one process: startBroker() and startCluster() lock their data
 * directories (each log dir's `.lock`, the embedded store's journal), so a second start on a
 * directory in use is refused with a DirectoryLockedError naming it, whether the first runs
 * in this process or another; a stopped one leaves the directory free at once. Two brokers
 * that both appended to one metadata journal once left it unreadable mid-file.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { DirectoryLockedError } from '../../src/common/file-system.js'
import { startBroker, startCluster } from '../../src/index.js'
import { guardedLogger } from '../helpers/log-guard.js'

/** The refusal: a DirectoryLockedError for `lockFile` in `dir`, saying so in Kafka's words. */
function refusedOn(dir: string, lockFile: string) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof DirectoryLockedError, String(error))
    assert.equal(error.code, 'ERR_DIRECTORY_LOCKED')
    assert.equal(error.dir, dir)
    assert.equal(error.lockFile, lockFile)
    assert.equal(
      error.message,
      `Failed to acquire lock on file ${lockFile} in ${dir}. ` +
        'A tidelog broker in another process or in this one is using this directory.',
    )
    return true
  }
}

async function withDataDir(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'tidelog-lock-'))
  try {
    await body(dir)
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

test('startBroker twice on one data directory: the second is refused; once the first stops, it starts', {
  timeout: 60000,
}, async () => {
  await withDataDir(async (dataDir) => {
    const first = await startBroker({ dataDir, logger: guardedLogger('first') })
    try {
      await assert.rejects(
        startBroker({ dataDir, logger: guardedLogger('second') }),
        refusedOn(dataDir, '.lock'),
      )
      // The first one is untouched by the refused start.
      assert.equal(first.brokers[0].isStopping, false)
    } finally {
      await first.stop()
    }
    const again = await startBroker({ dataDir, logger: guardedLogger('again') })
    await again.stop()
  })
})

test('startCluster twice on one data directory: the second is refused on the shared metadata store', {
  timeout: 60000,
}, async () => {
  await withDataDir(async (dataDir) => {
    const first = await startCluster({ brokers: 2, port: 0, dataDir, logger: guardedLogger('first') })
    try {
      await assert.rejects(
        startCluster({ brokers: 2, port: 0, dataDir, logger: guardedLogger('second') }),
        refusedOn(dataDir, '__tidelog_metadata.log.lock'),
      )
      // One broker on the cluster's root would share its metadata journal: refused too.
      await assert.rejects(
        startBroker({ dataDir, logger: guardedLogger('single') }),
        refusedOn(dataDir, '__tidelog_metadata.log.lock'),
      )
      // And one on the log dir of the cluster's broker 1.
      const brokerDir = join(dataDir, 'broker-1')
      await assert.rejects(
        startBroker({ logger: guardedLogger('on-broker-1'), properties: { 'log.dirs': brokerDir } }),
        refusedOn(brokerDir, '.lock'),
      )
    } finally {
      await first.stop()
    }
    const again = await startCluster({ brokers: 2, port: 0, dataDir, logger: guardedLogger('again') })
    await again.stop()
  })
})

test('a broker refused on its second log dir holds none: its first is free for the next start', {
  timeout: 60000,
}, async () => {
  await withDataDir(async (root) => {
    const [a, b] = [join(root, 'a'), join(root, 'b')]
    const holder = await startBroker({ logger: guardedLogger('holder'), properties: { 'log.dirs': b } })
    try {
      await assert.rejects(
        startBroker({ logger: guardedLogger('refused'), properties: { 'log.dirs': `${a},${b}` } }),
        refusedOn(b, '.lock'),
      )
      const onA = await startBroker({ logger: guardedLogger('on-a'), properties: { 'log.dirs': a } })
      await onA.stop()
    } finally {
      await holder.stop()
    }
  })
})

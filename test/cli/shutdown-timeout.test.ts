/**
 * SIGTERM stops `tidelog start` cleanly, and never takes longer than
 * tidelog.shutdown.timeout.ms: past it the process says why and exits with status 1
 * instead of hanging (a broker with a failed log dir or 10,000 partitions once did not stop
 * within 60 s).
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { spawnTidelog } from '../helpers/broker-process.js'

async function started(dataDir: string, set: string[] = []) {
  const child = spawnTidelog(
    ['start', '--port', '0', '--data-dir', dataDir, ...set.flatMap((kv) => ['--set', kv])],
    {},
    'tidelog start',
  )
  const { line } = await child.waitForLine(/^bootstrap servers: /, 20000)
  return { child, bootstrapServers: line.replace('bootstrap servers: ', '').trim() }
}

test('SIGTERM stops a broker with 1,000 partitions cleanly, within its shutdown timeout', {
  timeout: 90000,
}, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-shutdown-'))
  const { child, bootstrapServers } = await started(dataDir)
  try {
    const admin = new Admin({ bootstrapServers })
    await admin.createTopics([{ topic: 'many', numPartitions: 1000, replicationFactor: 1 }])
    admin.close()
    const signalled = Date.now()
    child.signal('SIGTERM')
    const { code } = await child.exited
    const stopMs = Date.now() - signalled
    assert.equal(code, 0, child.tail())
    assert.ok(stopMs < 30000, `stopped in ${stopMs} ms`)
    assert.match(child.lines.join('\n'), /"msg":"broker stopped"/)
  } finally {
    await child.terminate()
    await rm(dataDir, { recursive: true, force: true })
  }
})

test('a shutdown longer than tidelog.shutdown.timeout.ms exits with status 1 and says why', {
  timeout: 60000,
}, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-shutdown-'))
  // 1 ms: a clean shutdown (fsyncs, the metadata journal) cannot finish that soon.
  const { child } = await started(dataDir, ['tidelog.shutdown.timeout.ms=1'])
  try {
    child.signal('SIGTERM')
    const { code } = await child.exited
    assert.equal(code, 1, child.tail())
    assert.match(
      child.lines.join('\n'),
      /shutdown did not finish within tidelog.shutdown.timeout.ms=1; exiting now/,
    )
  } finally {
    await child.terminate()
    await rm(dataDir, { recursive: true, force: true })
  }
})

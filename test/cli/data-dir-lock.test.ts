/**
 * Issue 41 item 2, across processes: a second `tidelog start` (or `tidelog broker`) on a data
 * directory in use exits with status 1 after one line naming the directory, as Kafka refuses
 * with "Failed to acquire lock on file .lock in <dir>"; two brokers once appended to one
 * metadata journal side by side and left it unreadable. The lock is the kernel's: after a
 * kill -9 of the first, the next start on the directory runs at once, on the same data.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { type ChildOutput, spawnTidelog } from '../helpers/broker-process.js'

async function started(dataDir: string): Promise<{ child: ChildOutput; bootstrapServers: string }> {
  const child = spawnTidelog(['start', '--port', '0', '--data-dir', dataDir], {}, 'tidelog start')
  const { line } = await child.waitForLine(/^bootstrap servers: /, 20000)
  return { child, bootstrapServers: line.replace('bootstrap servers: ', '').trim() }
}

/** Runs a command expected to be refused; its whole output, and its exit. */
async function refused(args: readonly string[]): Promise<{ lines: string[]; code: number | null }> {
  const child = spawnTidelog(args, {}, `refused ${args[0]}`)
  try {
    const { code } = await child.exited
    return { lines: child.lines, code }
  } finally {
    await child.terminate()
  }
}

function lockedLine(dir: string): string {
  return (
    `tidelog: Failed to acquire lock on file .lock in ${dir}. ` +
    'A tidelog broker in another process or in this one is using this directory.'
  )
}

test('a second tidelog start or broker on a data directory in use: one line naming it, exit 1', {
  timeout: 60000,
}, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-lock-'))
  const first = await started(dataDir)
  try {
    const second = await refused(['start', '--port', '0', '--data-dir', dataDir])
    assert.equal(second.code, 1, second.lines.join('\n'))
    assert.deepEqual(second.lines, [lockedLine(dataDir)])
    const broker = await refused([
      'broker',
      '--set',
      `log.dirs=${dataDir}`,
      '--set',
      'listeners=PLAINTEXT://127.0.0.1:0',
    ])
    assert.equal(broker.code, 1, broker.lines.join('\n'))
    assert.deepEqual(broker.lines, [lockedLine(dataDir)])
    assert.ok(first.child.isRunning, 'the first broker runs on')
  } finally {
    await first.child.terminate()
    await rm(dataDir, { recursive: true, force: true })
  }
})

test('after kill -9 of the broker holding a data directory, the next start runs on it at once', {
  timeout: 60000,
}, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-lock-'))
  const first = await started(dataDir)
  let next: ChildOutput | undefined
  try {
    const admin = new Admin({ bootstrapServers: first.bootstrapServers })
    await admin.createTopics([{ topic: 'kept', numPartitions: 1, replicationFactor: 1 }])
    admin.close()
    first.child.signal('SIGKILL')
    assert.equal((await first.child.exited).signal, 'SIGKILL')
    const restarted = await started(dataDir)
    next = restarted.child
    const again = new Admin({ bootstrapServers: restarted.bootstrapServers })
    try {
      assert.ok((await again.listTopics()).includes('kept'), 'the same data')
    } finally {
      again.close()
    }
  } finally {
    await first.child.terminate()
    await next?.terminate()
    await rm(dataDir, { recursive: true, force: true })
  }
})

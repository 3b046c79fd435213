/**
 * Issue 5: `tidelog start --brokers 3` runs three brokers in one process on the embedded
 * store. Spawned from the CLI it prints the three bootstrap addresses, kcat lists three
 * brokers, replicated topics work, SIGTERM stops it cleanly (exit code 0), and a restart
 * on the same data directory has the same topics and records.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { type ChildOutput, freePort, spawnTidelog } from '../helpers/broker-process.js'
import { assertReadBack, kafka, produceOnePerPartition } from '../helpers/cluster-clients.js'
import { kcatMetadata } from '../helpers/metadata-view.js'

const TOPIC = 'cli-rf3'

/** Starts `tidelog start --brokers 3` and returns the process and its bootstrap servers. */
async function startCli(dataDir: string): Promise<{ cli: ChildOutput; bootstrap: string }> {
  const cli = spawnTidelog(
    [
      'start',
      '--brokers',
      '3',
      '--port',
      '0',
      '--data-dir',
      dataDir,
      '--set',
      'broker.session.timeout.ms=3000',
    ],
    { TIDELOG_LOG_LEVEL: 'warn' },
  )
  const { line } = await cli.waitForLine(/^bootstrap servers: /, 20000)
  return { cli, bootstrap: line.replace(/^bootstrap servers: /, '').trim() }
}

async function stopCli(cli: ChildOutput): Promise<void> {
  cli.signal('SIGTERM')
  const { code, signal } = await cli.exited
  assert.equal(signal, null, `tidelog start ended by ${signal}:\n${cli.tail()}`)
  assert.equal(code, 0, `tidelog start exited ${code}:\n${cli.tail()}`)
  assert.ok(cli.lines.includes('tidelog stopping'), cli.tail())
}

test('tidelog start --brokers 3: three bootstrap addresses, three brokers in kcat -L, SIGTERM exits 0, restart keeps topics and records', {
  timeout: 60000,
}, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-cli-cluster-'))
  let running: ChildOutput | null = null
  try {
    const first = await startCli(dataDir)
    running = first.cli
    assert.ok(
      first.cli.lines.some((l) => l.startsWith('tidelog started: 3 broker(s)')),
      first.cli.tail(),
    )
    const addresses = first.bootstrap.split(',')
    assert.equal(addresses.length, 3, first.bootstrap)
    for (const address of addresses) assert.match(address, /^127\.0\.0\.1:\d+$/)
    assert.equal(new Set(addresses).size, 3)
    for (const address of addresses) {
      const view = await kcatMetadata(address)
      assert.deepEqual(view.brokers, [0, 1, 2], `kcat -L via ${address}`)
      assert.ok(view.brokers.includes(view.controllerId))
    }
    const admin = kafka(first.bootstrap).admin()
    await admin.connect()
    try {
      await admin.createTopics({
        topics: [{ topic: TOPIC, numPartitions: 3, replicationFactor: 3 }],
        waitForLeaders: true,
      })
    } finally {
      await admin.disconnect()
    }
    const values = await produceOnePerPartition(first.bootstrap, TOPIC, [0, 1, 2], 'cli')
    const expected = new Map([...values].map(([p, v]) => [p, [v]]))
    await assertReadBack(first.bootstrap, TOPIC, expected, 3)
    const placement = (await kcatMetadata(first.bootstrap, TOPIC)).topics.get(TOPIC)!.map((p) => p.replicas)
    await stopCli(first.cli)
    running = null

    const second = await startCli(dataDir)
    running = second.cli
    const view = await kcatMetadata(second.bootstrap, TOPIC)
    assert.deepEqual(view.brokers, [0, 1, 2])
    assert.deepEqual(
      view.topics.get(TOPIC)!.map((p) => p.replicas),
      placement,
    )
    await assertReadBack(second.bootstrap, TOPIC, expected, 3)
    await stopCli(second.cli)
    running = null
  } finally {
    if (running) await running.terminate(2000)
    await rm(dataDir, { recursive: true, force: true })
  }
})

test('tidelog broker --node-id N: a broker with that id on its own embedded store; SIGTERM exits 0', {
  timeout: 30000,
}, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-cli-broker-'))
  const port = await freePort()
  const cli = spawnTidelog(
    [
      'broker',
      '--node-id',
      '7',
      '--set',
      `listeners=PLAINTEXT://127.0.0.1:${port}`,
      '--set',
      `log.dirs=${dataDir}`,
    ],
    { TIDELOG_LOG_LEVEL: 'warn' },
  )
  try {
    await cli.waitForLine(/^tidelog broker 7 listening on 127\.0\.0\.1:\d+$/, 20000)
    const view = await kcatMetadata(`127.0.0.1:${port}`)
    assert.deepEqual(view.brokers, [7])
    assert.equal(view.controllerId, 7)
    cli.signal('SIGTERM')
    assert.deepEqual(await cli.exited, { code: 0, signal: null }, cli.tail())
  } finally {
    await cli.terminate(2000)
    await rm(dataDir, { recursive: true, force: true })
  }
})

test('tidelog start --set listeners=PLAINTEXT://HOST:PORT listens there; a contradicting --port or --host is refused', {
  timeout: 60000,
}, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-cli-listeners-'))
  const port = await freePort()
  const listeners = `listeners=PLAINTEXT://127.0.0.1:${port}`
  const cli = spawnTidelog(['start', '--data-dir', dataDir, '--set', listeners], {
    TIDELOG_LOG_LEVEL: 'warn',
  })
  try {
    const { line } = await cli.waitForLine(/^bootstrap servers: /, 20000)
    assert.equal(line.trim(), `bootstrap servers: 127.0.0.1:${port}`)
    assert.deepEqual((await kcatMetadata(`127.0.0.1:${port}`)).brokers, [0])
    await stopCli(cli)
  } finally {
    await cli.terminate(2000)
  }
  try {
    for (const flags of [
      ['--port', String(port + 1)],
      ['--host', 'localhost'],
    ]) {
      const refused = spawnTidelog(['start', '--data-dir', dataDir, ...flags, '--set', listeners])
      const { code } = await refused.exited
      assert.equal(code, 2, refused.tail())
      assert.match(
        refused.tail(),
        new RegExp(`${flags[1]} contradicts listeners=PLAINTEXT://127\\.0\\.0\\.1:${port}`),
      )
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true })
  }
})

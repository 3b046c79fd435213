/**
 * The test-only fault hook of `tidelog broker` (src/testing/process-faults.ts), which the
 * netfault suite drives: off without its environment variable; with it, SIGUSR2 applies the
 * control file's command. One broker process, its own embedded store: a power loss cuts
 * what was not fsynced and kills the process, which recovers on restart; a clock jump moves
 * LogAppendTime timestamps; a full disk fails the write with a Kafka error (never an ack)
 * and the broker, its only log dir offline, stops itself.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { silentLogger } from '../../src/common/logger.js'
import { FAULT_CONTROL_ENV, processFaultParts } from '../../src/testing/process-faults.js'
import { type ChildOutput, freePort, spawnTidelog } from '../helpers/broker-process.js'
import { kcatConsume } from '../helpers/compat-clients.js'
import { allowErrorLogs } from '../helpers/log-guard.js'

const START_TIMEOUT_MS = 60000

test('the hook refuses to build its parts without its environment variable', () => {
  const saved = process.env[FAULT_CONTROL_ENV]
  delete process.env[FAULT_CONTROL_ENV]
  try {
    assert.throws(() => processFaultParts(silentLogger), /TIDELOG_TEST_FAULT_CONTROL is not set/)
  } finally {
    if (saved !== undefined) process.env[FAULT_CONTROL_ENV] = saved
  }
})

describe('tidelog broker with the test fault hook', { timeout: 240000 }, () => {
  let dir = ''
  let port = 0
  let broker: ChildOutput | null = null
  let seq = 0
  const controlPath = () => join(dir, 'control.json')
  const bootstrap = () => `127.0.0.1:${port}`

  const startBroker = async (): Promise<ChildOutput> => {
    const args = ['broker', '--set', 'node.id=1', '--set', `log.dirs=${join(dir, 'data')}`]
    args.push('--set', `listeners=PLAINTEXT://127.0.0.1:${port}`, '--set', 'offsets.topic.num.partitions=1')
    const output = spawnTidelog(args, { [FAULT_CONTROL_ENV]: controlPath() }, 'broker 1')
    await output.waitForLine(/listening on/, START_TIMEOUT_MS)
    broker = output
    return output
  }

  /** Writes the command, signals, and returns the line that says it was applied. */
  const send = async (command: Record<string, unknown>): Promise<string> => {
    const output = broker!
    const from = output.lines.length
    seq++
    await writeFile(controlPath(), JSON.stringify({ ...command, seq }))
    output.signal('SIGUSR2')
    return (await output.waitForLine(new RegExp(`test fault ${seq} applied`), 30000, from)).line
  }

  const kafka = () =>
    new Kafka({
      clientId: 'process-faults',
      brokers: [bootstrap()],
      logLevel: logLevel.NOTHING,
      retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 1000 },
    })

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tidelog-process-faults-'))
    port = await freePort()
    await startBroker()
  })
  after(async () => {
    await broker?.terminate()
    await rm(dir, { recursive: true, force: true })
  })

  test('power loss: the unsynced tail is cut, the process dies, and the log recovers on restart', async () => {
    const admin = kafka().admin()
    await admin.connect()
    await admin.createTopics({ topics: [{ topic: 'pl', numPartitions: 1, replicationFactor: 1 }] })
    await admin.disconnect()
    const producer = kafka().producer({ allowAutoTopicCreation: false })
    await producer.connect()
    for (let i = 0; i < 20; i++)
      await producer.send({ topic: 'pl', acks: -1, messages: [{ value: `before-${i}` }] })
    await producer.disconnect()
    const segment = join(dir, 'data', 'pl-0', '00000000000000000000.log')
    const sizeBefore = (await stat(segment)).size
    assert.ok(sizeBefore > 0)

    const output = broker!
    const line = await send({ op: 'power-loss' })
    const { signal } = await output.exited
    assert.equal(signal, 'SIGKILL', 'a power loss ends the process at once')
    const lost = JSON.parse(line) as { files: number; bytes: number }
    assert.ok(lost.files > 0 && lost.bytes > 0, line)
    // No flush per append (Kafka's default flush.messages): acks=all on a broker alone is
    // not durable against a power loss; replicas are what make it so.
    assert.ok((await stat(segment)).size < sizeBefore, 'the unsynced records were cut')

    await startBroker()
    const producerAfter = kafka().producer({ allowAutoTopicCreation: false })
    await producerAfter.connect()
    await producerAfter.send({ topic: 'pl', acks: -1, messages: [{ value: 'after' }] })
    await producerAfter.disconnect()
    const { records } = await kcatConsume(bootstrap(), 'pl', { partition: 0 })
    assert.deepEqual(
      records.map((r) => r.offset),
      records.map((_, i) => i),
      'offsets contiguous from 0 after recovery',
    )
    assert.equal(records.at(-1)?.value, 'after')
  })

  test('clock jump: LogAppendTime follows the broker wall clock, forward and back', async () => {
    const admin = kafka().admin()
    await admin.connect()
    await admin.createTopics({
      topics: [
        {
          topic: 'clock',
          numPartitions: 1,
          replicationFactor: 1,
          configEntries: [{ name: 'message.timestamp.type', value: 'LogAppendTime' }],
        },
      ],
    })
    await admin.disconnect()
    const producer = kafka().producer({ allowAutoTopicCreation: false })
    await producer.connect()
    const JUMP_MS = 600_000
    await producer.send({ topic: 'clock', acks: -1, messages: [{ value: 'now' }] })
    await send({ op: 'clock-offset', offsetMs: JUMP_MS })
    await producer.send({ topic: 'clock', acks: -1, messages: [{ value: 'forward' }] })
    await send({ op: 'clock-offset', offsetMs: 0 })
    await producer.send({ topic: 'clock', acks: -1, messages: [{ value: 'back' }] })
    await producer.disconnect()
    const { records, timestamps } = await kcatConsume(bootstrap(), 'clock', { partition: 0 })
    assert.deepEqual(
      records.map((r) => r.value),
      ['now', 'forward', 'back'],
    )
    const [now, forward, back] = timestamps
    assert.ok(forward - now >= JUMP_MS, `forward ${forward - now} ms after`)
    assert.ok(back < forward && back - now < JUMP_MS, `back ${back - now} ms after the first`)
  })

  test('full disk: a write fails with a Kafka error, never acknowledged, and the broker stops itself', async () => {
    // The point of the test: the failed write, the log dir offline, the broker stopping.
    allowErrorLogs(/ENOSPC/, /every log dir is offline: stopping the broker/)
    const output = broker!
    const producer = kafka().producer({ allowAutoTopicCreation: false })
    await producer.connect()
    await producer.send({ topic: 'pl', acks: -1, messages: [{ value: 'before full' }] })
    await send({ op: 'disk-full', full: true })
    await assert.rejects(
      producer.send({ topic: 'pl', acks: -1, messages: [{ value: 'while full' }] }),
      'a write to a full disk is not acknowledged',
    )
    await producer.disconnect().catch(() => undefined)
    const { code } = await output.exited
    assert.equal(code, 1, 'every log dir offline: the broker stops itself, exit status 1')
    assert.ok(output.lines.some((l) => l.includes('KAFKA_STORAGE_ERROR') || l.includes('ENOSPC')))
    // Restarted with room again, it serves what it had; the failed record is not there.
    await startBroker()
    const { records } = await kcatConsume(bootstrap(), 'pl', { partition: 0 })
    const values = records.map((r) => r.value)
    assert.ok(values.includes('before full'))
    assert.ok(!values.includes('while full'), 'the write that failed is not in the log')
  })
})

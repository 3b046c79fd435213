/**
 * Issue 40 item 3 with the client that met it: confluent-kafka on Debian's librdkafka 2.0.2,
 * a transactional producer whose coordinator is killed (kill -9) with a transaction open, on
 * three in-process brokers (RF 3, min ISR 2). Restarted within the transaction's timeout,
 * the commit completes on the next coordinator and the next transaction commits too. Left
 * past its timeout, the transaction is aborted by the next coordinator with the epoch
 * bumped, so the commit fails as Kafka fails it: fatal, fenced (librdkafka's _FENCED for
 * INVALID_PRODUCER_EPOCH), never INVALID_TXN_STATE.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { TRANSACTION_STATE_TOPIC } from '../../src/coordinator/transaction/transaction-log.js'
import { partitionForTransactionalId } from '../../src/coordinator/transaction/transaction-state-manager.js'
import { PYTHON, repoRoot } from '../helpers/compat-clients.js'
import { startCluster, type TestCluster } from '../helpers/testing.js'
import { waitUntil } from '../helpers/wait.js'

const TOPIC = 'ck-txn-failover'
const PARTITIONS = 3
const TXN_PARTITIONS = 5
/** Short, so the timed-out case takes seconds; the broker checks every 500 ms. */
const SHORT_TIMEOUT_MS = 4000

type Outcome = 'ok' | { name: string; code: number; fatal: boolean; text: string }

/**
 * Runs confluent_txn_failover.py: once its transaction is open and flushed, `meanwhile`
 * runs (the kill), then the script commits. Resolves with its outcome line.
 */
async function runProducer(
  spec: Record<string, unknown>,
  meanwhile: () => Promise<void>,
): Promise<{ commit: Outcome; next?: Outcome }> {
  const script = join(repoRoot(), 'test', 'transactions', 'confluent_txn_failover.py')
  const child = spawn(PYTHON, [script], { stdio: ['pipe', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const exited = new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? -1)))
  const killer = setTimeout(() => child.kill('SIGKILL'), 180_000)
  try {
    child.stdin.write(`${JSON.stringify(spec)}\n`)
    await waitUntil('the producer to open its transaction', 90_000, () => stdout.includes('"ready"'), 100)
    await meanwhile()
    child.stdin.write('go\n')
    const code = await exited
    assert.equal(code, 0, stderr)
    return JSON.parse(stdout.trim().split('\n').pop() ?? '')
  } finally {
    clearTimeout(killer)
    if (child.exitCode === null) child.kill('SIGKILL')
  }
}

describe('confluent-kafka (librdkafka 2.0.2): a transaction whose coordinator is killed', () => {
  let cluster: TestCluster
  before(async () => {
    cluster = await startCluster({
      brokers: 3,
      properties: {
        'transaction.state.log.num.partitions': TXN_PARTITIONS,
        'transaction.abort.timed.out.transaction.cleanup.interval.ms': 500,
      },
      topics: [{ name: TOPIC, partitions: PARTITIONS, configs: { 'min.insync.replicas': 2 } }],
    })
  })
  after(async () => {
    await cluster?.stop()
  })

  const coordinatorOf = (transactionalId: string) =>
    cluster.leaderOf(TRANSACTION_STATE_TOPIC, partitionForTransactionalId(transactionalId, TXN_PARTITIONS))

  it('restarted within the timeout: the commit completes, and the next one', {
    timeout: 240_000,
  }, async () => {
    const transactionalId = 'ck-fo-commit'
    let killed = -1
    const outcome = await runProducer(
      {
        bootstrap: cluster.bootstrapServers,
        topic: TOPIC,
        partitions: PARTITIONS,
        transactionalId,
        timeoutMs: 60_000,
      },
      async () => {
        killed = coordinatorOf(transactionalId)
        cluster.kill(killed)
        await sleep(4000)
        await cluster.restart(killed)
      },
    )
    assert.deepEqual(outcome, { commit: 'ok', next: 'ok' })
  })

  it('left past its timeout: fenced (fatal), not INVALID_TXN_STATE', { timeout: 240_000 }, async () => {
    const transactionalId = 'ck-fo-timeout'
    const outcome = await runProducer(
      {
        bootstrap: cluster.bootstrapServers,
        topic: TOPIC,
        partitions: PARTITIONS,
        transactionalId,
        timeoutMs: SHORT_TIMEOUT_MS,
      },
      async () => {
        const killed = coordinatorOf(transactionalId)
        cluster.kill(killed)
        // The next coordinator loads the state and aborts the transaction once it is too old.
        await waitUntil('another coordinator', 60_000, () => coordinatorOf(transactionalId) !== killed, 100)
        await sleep(SHORT_TIMEOUT_MS + 3000)
        await cluster.restart(killed)
      },
    )
    assert.equal(typeof outcome.commit, 'object', `the commit failed: ${JSON.stringify(outcome)}`)
    const failure = outcome.commit as Exclude<Outcome, 'ok'>
    assert.notEqual(failure.name, 'INVALID_TXN_STATE', failure.text)
    assert.equal(failure.name, '_FENCED', failure.text)
    assert.equal(failure.fatal, true)
  })
})

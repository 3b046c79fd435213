/**
 * The CLI's transaction commands (issue 15 item 6), as the real binary against an
 * in-process broker, with an open transaction of tidelog's producer: `topics describe`
 * shows the LSO behind the HW while it is open, `transactions list|describe` show it
 * Ongoing with its partitions and then CompleteCommit, and `consume --isolation-level
 * read_committed` prints only committed records (read_uncommitted the aborted ones too);
 * `bench produce --transaction-size` commits its transactions and reports their latency.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Producer } from '../../src/client/producer.js'
import { createTopics } from '../client/helpers.js'
import { tidelogBin } from '../helpers/broker-process.js'
import { type RunResult, run, withBroker } from '../helpers/cluster.js'
import { waitUntil } from '../helpers/wait.js'

function tidelog(args: readonly string[]): Promise<RunResult> {
  return run(process.execPath, [tidelogBin(), ...args], { timeoutMs: 30000 })
}

function ok(result: RunResult, what: string): string {
  assert.equal(result.code, 0, `${what}: exit ${result.code}\n${result.stderr}`)
  return result.stdout
}

/**
 * Polls until `check` holds: EndTxn answers once the commit is decided, the markers (and
 * with them the LSO and the Complete state) follow within milliseconds, as in Kafka.
 */
function eventually(what: string, check: () => Promise<boolean>): Promise<void> {
  return waitUntil(what, 15_000, check, 100)
}

test('topics describe shows the LSO of an open transaction; transactions list/describe; consume --isolation-level', {
  timeout: 120000,
}, async () => {
  await withBroker(
    async (cluster) => {
      const b = ['--bootstrap-server', cluster.bootstrapServers]
      await createTopics(cluster.bootstrapServers, [{ topic: 'tx-cli' }])
      const producer = new Producer({
        bootstrapServers: cluster.bootstrapServers,
        transactionalId: 'cli-tx',
        lingerMs: 0,
      })
      try {
        await producer.initTransactions()
        producer.beginTransaction()
        await producer.send({ topic: 'tx-cli', value: 'aborted' })
        await producer.abortTransaction()
        producer.beginTransaction()
        await producer.send({ topic: 'tx-cli', value: 'committed-1' })
        await producer.commitTransaction()
        producer.beginTransaction()
        await producer.send({ topic: 'tx-cli', value: 'open' })

        // aborted(0) ABORT(1) committed-1(2) COMMIT(3) open(4): HW 5, LSO 4.
        const described = JSON.parse(
          ok(await tidelog(['topics', 'describe', 'tx-cli', '--json', ...b]), 'describe'),
        )
        assert.equal(described[0].partitions[0].highWatermark, 5)
        assert.equal(described[0].partitions[0].lastStableOffset, 4)
        assert.match(
          ok(await tidelog(['topics', 'describe', 'tx-cli', ...b]), 'describe'),
          /1 with open transactions/,
        )

        const open = JSON.parse(
          ok(
            await tidelog(['transactions', 'describe', '--transactional-id', 'cli-tx', '--json', ...b]),
            'describe',
          ),
        )
        assert.equal(open.state, 'Ongoing')
        assert.deepEqual(open.partitions, [{ topic: 'tx-cli', partition: 0 }])
        assert.ok(open.transactionStartTimeMs > 0)
        const listed = JSON.parse(ok(await tidelog(['transactions', 'list', '--json', ...b]), 'list'))
        assert.deepEqual(
          listed.map((t: { transactionalId: string; state: string }) => [t.transactionalId, t.state]),
          [['cli-tx', 'Ongoing']],
        )
        const table = ok(await tidelog(['transactions', 'list', ...b]), 'list')
        assert.match(table, /^TRANSACTIONAL ID\s+COORDINATOR\s+PRODUCER ID\s+STATE\n/)
        assert.match(table, /cli-tx\s+0\s+\d+\s+Ongoing/)

        // read_committed stops at the LSO: the open transaction's record is not printed.
        const committed = ok(
          await tidelog([
            'consume',
            'tx-cli',
            '--from-beginning',
            '--exit-at-end',
            '--isolation-level',
            'read_committed',
            ...b,
          ]),
          'consume read_committed',
        )
        assert.equal(committed, 'committed-1\n')
        const uncommitted = ok(
          await tidelog(['consume', 'tx-cli', '--from-beginning', '--exit-at-end', ...b]),
          'consume read_uncommitted',
        )
        assert.equal(uncommitted, 'aborted\ncommitted-1\nopen\n')
        await producer.commitTransaction()
        await eventually('CompleteCommit', async () => {
          const done = JSON.parse(
            ok(
              await tidelog(['transactions', 'describe', '--transactional-id', 'cli-tx', '--json', ...b]),
              'describe',
            ),
          )
          return done.state === 'CompleteCommit'
        })
        // bench produce --transaction-size: committed transactions and their commit latency.
        const bench = JSON.parse(
          ok(
            await tidelog([
              'bench',
              'produce',
              'tx-bench',
              '--partitions',
              '2',
              '--num-records',
              '50',
              '--record-size',
              '100',
              '--transaction-size',
              '10',
              '--json',
              ...b,
            ]),
            'bench --transaction-size',
          ),
        )
        assert.equal(bench.records, 50)
        assert.equal(bench.transactions.committed, 5)
        assert.equal(bench.transactions.failed, 0)
        assert.ok(bench.transactions.commitLatencyMs.p50 > 0)
        await eventually('tx-bench stable', async () => {
          const topics = JSON.parse(
            ok(await tidelog(['topics', 'describe', 'tx-bench', '--json', ...b]), 'describe'),
          )
          return topics[0].partitions.every(
            (p: { highWatermark: number; lastStableOffset: number }) =>
              p.lastStableOffset === p.highWatermark,
          )
        })
        const benchRead = ok(
          await tidelog([
            'consume',
            'tx-bench',
            '--from-beginning',
            '--exit-at-end',
            '--isolation-level',
            'read_committed',
            '--json',
            ...b,
          ]),
          'consume bench',
        )
        assert.equal(benchRead.trim().split('\n').length, 50)
        const bad = await tidelog(['consume', 'tx-cli', '--isolation-level', 'serializable', ...b])
        assert.equal(bad.code, 2)
        const missing = await tidelog(['transactions', 'describe', ...b])
        assert.equal(missing.code, 2)
      } finally {
        await producer.close()
      }
    },
    {
      properties: {
        'transaction.state.log.replication.factor': 1,
        'transaction.state.log.min.isr': 1,
        'transaction.state.log.num.partitions': 1,
      },
    },
  )
})

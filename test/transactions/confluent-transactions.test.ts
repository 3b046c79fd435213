/**
 * Issue 15 with librdkafka: confluent-kafka's init_transactions, commit_transaction and
 * abort_transaction against three in-process brokers, read back by confluent-kafka
 * consumers: read_committed sees the committed records once each, in order per partition,
 * and none of the aborted ones; read_uncommitted sees both. Then consume-transform-produce
 * with send_offsets_to_transaction: after an abort the group's offset did not move, after a
 * commit it did.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import type { Cluster } from '../../src/server/cluster.js'
import { run, startCluster } from '../helpers/cluster.js'
import { PYTHON, repoRoot } from '../helpers/compat-clients.js'

const TOPIC = 'txn-confluent'
const INPUT = 'txn-confluent-in'
const PARTITIONS = 3

interface Seen {
  partition: number
  offset: number
  value: string
}

interface Outcome {
  sent: { commit: string[]; abort: string[] }
  committed: Seen[]
  uncommitted: Seen[]
  ctp: { inputs: number; after_abort: number; after_commit: number }
}

describe('confluent-kafka transactions on 3 brokers', () => {
  let cluster: Cluster
  before(async () => {
    cluster = await startCluster({
      brokers: 3,
      port: 0,
      properties: { 'transaction.state.log.num.partitions': 5, 'broker.session.timeout.ms': 3000 },
    })
    const [admin] = cluster.brokers
    const created = await admin.topicAdmin.createTopics(
      [
        { name: TOPIC, numPartitions: PARTITIONS, replicationFactor: 3, assignments: [], configs: {} },
        { name: INPUT, numPartitions: 1, replicationFactor: 3, assignments: [], configs: {} },
      ],
      { validateOnly: false, timeoutMs: 10000 },
    )
    assert.deepEqual(
      created.map((t) => t.errorCode),
      [0, 0],
    )
  })
  after(async () => {
    await cluster?.stop()
  })

  it('init, commit, abort, commit: read_committed sees only the committed records', async () => {
    // The script lives in the source tree (not compiled into dist).
    const script = join(repoRoot(), 'test', 'transactions', 'confluent_txn.py')
    const result = await run(PYTHON, [script], {
      input: JSON.stringify({
        bootstrap: cluster.bootstrapServers,
        topic: TOPIC,
        inputTopic: INPUT,
        transactionalId: 'ck-tx',
        partitions: PARTITIONS,
      }),
      timeoutMs: 120_000,
    })
    assert.equal(result.code, 0, result.stderr)
    const outcome = JSON.parse(result.stdout.trim().split('\n').pop() ?? '') as Outcome
    const values = (seen: Seen[]) => seen.map((s) => s.value).sort()
    assert.deepEqual(values(outcome.committed), [...outcome.sent.commit].sort())
    for (let p = 0; p < PARTITIONS; p++)
      assert.deepEqual(
        outcome.committed.filter((s) => s.partition === p).map((s) => s.value),
        outcome.sent.commit.filter((_, i) => (i % 6) % PARTITIONS === p),
        `order in partition ${p}`,
      )
    assert.deepEqual(values(outcome.uncommitted), [...outcome.sent.commit, ...outcome.sent.abort].sort())
    // librdkafka's "no committed offset" is OFFSET_INVALID (-1001).
    assert.deepEqual(outcome.ctp, { inputs: 4, after_abort: -1001, after_commit: 4 })
  })
})

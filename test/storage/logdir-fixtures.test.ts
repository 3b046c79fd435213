/**
 * Issue 35 item 4: data directories written by tidelog's earlier commits (test/fixtures/logdir,
 * made by scripts/make-logdir-fixture.sh: `2026-12-02` by that day's last commit, `current` by
 * the code of this change) are opened by today's tidelog and served as the broker that wrote
 * them served them (its Java client printout, served.txt): every record as both isolation
 * levels read it, offsets, timestamps, headers, ListOffsets earliest/latest/max-timestamp,
 * the group's committed offsets.
 *
 * DescribeProducers is not compared through a broker: a producer idle longer than
 * producer.id.expiration.ms (a day) by its last timestamp is dropped when a log loads, and
 * the fixtures' timestamps are fixed. Instead each partition's newest producer snapshot
 * (Kafka's format) is decoded and must name the producers, epochs and sequences printed.
 */
import assert from 'node:assert/strict'
import { cp, mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { listSnapshotOffsets, readSnapshot } from '../../src/storage/producer-state-snapshot.js'
import { startBroker } from '../helpers/cluster.js'
import { repoRoot } from '../helpers/compat-clients.js'
import { compileJava, exec, JVM_FLAGS } from '../helpers/java.js'

const FIXTURES = join(repoRoot(), 'test', 'fixtures', 'logdir')
const TOPIC = 'fixture'
const PARTITIONS = 2

function producerSummary(line: string): string {
  // PRODUCER <tp> id=.. epoch=.. lastSequence=.. lastTimestamp=.. coordinatorEpoch=.. txnStart=..
  const m =
    /^PRODUCER (\S+) id=(-?\d+) epoch=(-?\d+) lastSequence=(-?\d+) lastTimestamp=(-?\d+) coordinatorEpoch=(-?\d+)/.exec(
      line,
    )
  assert.ok(m, line)
  return `${m[1]} ${m[2]} ${m[3]} ${m[4]} ${m[5]} ${m[6]}`
}

for (const fixture of (await readdir(FIXTURES)).sort()) {
  test(`the data dir of tidelog ${fixture} is served as it was`, { timeout: 180_000 }, async () => {
    const served = (await readFile(join(FIXTURES, fixture, 'served.txt'), 'utf8')).trim().split('\n')
    const dataDir = await mkdtemp(join(tmpdir(), `tidelog-fixture-${fixture}-`))
    try {
      await cp(join(FIXTURES, fixture, 'data'), dataDir, { recursive: true })

      const printed = served.filter((line) => line.startsWith('PRODUCER ')).map(producerSummary)
      assert.ok(printed.length > 0)
      const inSnapshots: string[] = []
      for (let partition = 0; partition < PARTITIONS; partition++) {
        const dir = join(dataDir, `${TOPIC}-${partition}`)
        const newest = (await listSnapshotOffsets(nodeFileSystem, dir)).at(-1)
        assert.notEqual(newest, undefined, `${dir} has a producer snapshot`)
        for (const e of await readSnapshot(nodeFileSystem, dir, newest!)) {
          inSnapshots.push(
            `${TOPIC}-${partition} ${e.producerId} ${e.producerEpoch} ${e.lastSequence} ${e.timestamp} ${e.coordinatorEpoch}`,
          )
        }
      }
      assert.deepEqual(inSnapshots.sort(), printed.sort())

      const classpath = await compileJava('LogDirInterop', 'clients')
      const broker = await startBroker({
        port: 0,
        dataDir,
        properties: { 'offsets.topic.num.partitions': 5, 'transaction.state.log.num.partitions': 5 },
      })
      try {
        const { stdout } = await exec(
          'java',
          [...JVM_FLAGS, '-cp', classpath, 'LogDirInterop', 'dump', broker.bootstrapServers, TOPIC],
          120_000,
        )
        // ListOffsets by timestamp (BYTIME) is left out: it now names the record inside a
        // compressed batch, as Kafka does, where the fixtures' writers named the batch.
        const compared = (lines: readonly string[]) =>
          lines.filter((line) => !line.startsWith('PRODUCER ') && !line.startsWith('BYTIME '))
        assert.deepEqual(compared(stdout.trim().split('\n')), compared(served))
      } finally {
        await broker.stop()
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true })
    }
  })
}

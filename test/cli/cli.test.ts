/**
 * The `tidelog` client commands, run as the real binary (`node bin/tidelog.js`, built in
 * dist/) against in-process brokers: output (aligned tables, no colour off a terminal,
 * --json) and exit codes (0 ok, 1 failed, 2 usage, 3 unreachable, 4 unsupported).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startFakeBroker } from '../client/fake-broker.js'
import { withBroker } from '../client/helpers.js'
import { SESSION_TIMEOUT_MS, tidelogBin } from '../helpers/broker-process.js'
import { type RunResult, run, startCluster } from '../helpers/cluster.js'

function tidelog(args: readonly string[], input?: string, timeoutMs = 30000): Promise<RunResult> {
  return run(process.execPath, [tidelogBin(), ...args], {
    ...(input !== undefined ? { input } : {}),
    timeoutMs,
  })
}

const ESC = String.fromCharCode(27)

function ok(result: RunResult, what: string): string {
  assert.equal(result.code, 0, `${what}: exit ${result.code}\n${result.stderr}`)
  assert.ok(!result.stdout.includes(ESC), 'no colour codes when stdout is not a terminal')
  return result.stdout
}

test('topics create, list, describe, alter and delete, with exit codes for failures', {
  timeout: 120000,
}, async () => {
  await withBroker(async (cluster) => {
    const b = ['--bootstrap-server', cluster.bootstrapServers]
    assert.equal(
      ok(
        await tidelog([
          'topics',
          'create',
          '--topic',
          'orders',
          '--partitions',
          '3',
          '--config',
          'retention.ms=86400000',
          ...b,
        ]),
        'create',
      ),
      'Created topic orders.\n',
    )
    const again = await tidelog(['topics', 'create', '--topic', 'orders', ...b])
    assert.equal(again.code, 1)
    assert.match(again.stderr, /TOPIC_ALREADY_EXISTS/)
    assert.match(
      ok(await tidelog(['topics', 'create', 'orders', '--if-not-exists', ...b]), 'if-not-exists'),
      /already exists/,
    )
    assert.equal(ok(await tidelog(['topics', 'list', ...b]), 'list'), 'orders\n')

    const lines = ok(await tidelog(['topics', 'describe', '--topic', 'orders', ...b]), 'describe')
      .trimEnd()
      .split('\n')
    assert.match(lines[0], /^Topic: orders {2}TopicId: \S+ {2}PartitionCount: 3 {2}ReplicationFactor: 1$/)
    assert.equal(lines[1], 'PARTITION  LEADER  EPOCH  REPLICAS  ISR  OFFLINE  HW  LSO  STATUS')
    assert.deepEqual(lines.slice(2), [
      '0          0       0      0         0    -        0   0    ok',
      '1          0       0      0         0    -        0   0    ok',
      '2          0       0      0         0    -        0   0    ok',
    ])
    const json = JSON.parse(
      ok(await tidelog(['topics', 'describe', '--topic', 'orders', '--json', ...b]), 'describe --json'),
    )
    assert.equal(json[0].partitions.length, 3)
    assert.equal(json[0].partitions[0].state, 'ok')
    assert.equal(json[0].partitions[0].highWatermark, 0)
    assert.equal(json[0].partitions[0].lastStableOffset, 0)

    assert.match(
      ok(
        await tidelog([
          'topics',
          'alter',
          '--topic',
          'orders',
          '--partitions',
          '4',
          '--config',
          'cleanup.policy=compact',
          ...b,
        ]),
        'alter',
      ),
      /partitions=4, cleanup.policy=compact/,
    )
    const altered = JSON.parse(
      ok(await tidelog(['topics', 'describe', 'orders', '--json', ...b]), 'describe after alter'),
    )
    assert.equal(altered[0].partitions.length, 4)
    const shrink = await tidelog(['topics', 'alter', '--topic', 'orders', '--partitions', '2', ...b])
    assert.equal(shrink.code, 1)
    assert.match(shrink.stderr, /INVALID_PARTITIONS/)

    assert.equal(
      ok(await tidelog(['topics', 'delete', '--topic', 'orders', ...b]), 'delete'),
      'Deleted topic orders.\n',
    )
    const missing = await tidelog(['topics', 'delete', '--topic', 'orders', ...b])
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /UNKNOWN_TOPIC_OR_PARTITION/)
    assert.match(
      ok(await tidelog(['topics', 'delete', 'orders', '--if-exists', ...b]), 'if-exists'),
      /does not exist/,
    )
    const describeMissing = await tidelog(['topics', 'describe', '--topic', 'orders', ...b])
    assert.equal(describeMissing.code, 1)
  })
})

test('produce lines with keys and headers; consume from the beginning, an offset, a time, one partition, as text, JSON or a format', {
  timeout: 120000,
}, async () => {
  await withBroker(async (cluster) => {
    const b = ['--bootstrap-server', cluster.bootstrapServers]
    ok(await tidelog(['topics', 'create', '--topic', 'events', '--partitions', '2', ...b]), 'create')
    const input = Array.from({ length: 10 }, (_, i) => `user-${i % 3}|event ${i}`).join('\n')
    const produced = await tidelog(
      [
        'produce',
        '--topic',
        'events',
        '--key-separator',
        '|',
        '--header',
        'source=cli',
        '--header',
        'v=1',
        ...b,
      ],
      `${input}\n`,
    )
    ok(produced, 'produce')
    assert.match(produced.stderr, /Produced 10 of 10 record\(s\) to events/)

    const all = ok(
      await tidelog([
        'consume',
        '--topic',
        'events',
        '--from-beginning',
        '--max-messages',
        '10',
        '--json',
        ...b,
      ]),
      'consume --json',
    )
    const records = all
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line))
    assert.equal(records.length, 10)
    for (const r of records) {
      const i = Number(r.value.split(' ')[1])
      assert.equal(r.key, `user-${i % 3}`)
      assert.deepEqual(r.headers, [
        ['source', 'cli'],
        ['v', '1'],
      ])
    }
    // One key, one partition (murmur2), so per-key order holds.
    const byKey = new Map<string, number[]>()
    for (const r of records) byKey.set(r.key, [...(byKey.get(r.key) ?? []), Number(r.value.split(' ')[1])])
    for (const order of byKey.values())
      assert.deepEqual(
        order,
        [...order].sort((x, y) => x - y),
      )

    const p0 = records.filter((r) => r.partition === 0)
    const text = ok(
      await tidelog([
        'consume',
        '--topic',
        'events',
        '--partition',
        '0',
        '--offset',
        '1',
        '--exit-at-end',
        '--print-key',
        '--print-offset',
        ...b,
      ]),
      'consume --offset',
    )
    assert.equal(
      text,
      p0
        .slice(1)
        .map((r) => `Offset:${r.offset}\t${r.key}\t${r.value}\n`)
        .join(''),
    )

    const formatted = ok(
      await tidelog([
        'consume',
        '--topic',
        'events',
        '--from-beginning',
        '-e',
        '--format',
        '%p:%o %k=%s [%h]\\n',
        ...b,
      ]),
      'consume --format',
    )
    assert.equal(formatted.trim().split('\n').length, 10)
    assert.match(formatted, /^\d:\d+ user-\d=event \d \[source:cli,v:1\]$/m)

    // Records at known times, one batch each: --timestamp starts at the first at or after it.
    // An hour back: message.timestamp.after.max.ms (one hour) refuses records further ahead.
    const base = Date.now() - 3_600_000
    ok(await tidelog(['topics', 'create', '--topic', 'timed', ...b]), 'create timed')
    const { Producer } = await import('../../src/client/producer.js')
    const producer = new Producer({ bootstrapServers: cluster.bootstrapServers })
    for (let i = 0; i < 5; i++)
      await producer.send({ topic: 'timed', value: `t${i}`, timestamp: base + i * 1000 })
    await producer.close()
    const fromTime = ok(
      await tidelog([
        'consume',
        '--topic',
        'timed',
        '--timestamp',
        new Date(base + 2000).toISOString(),
        '-e',
        ...b,
      ]),
      'consume --timestamp',
    )
    assert.equal(fromTime, 't2\nt3\nt4\n')

    const idle = await tidelog(['consume', '--topic', 'events', '--timeout-ms', '700', ...b])
    ok(idle, 'consume --timeout-ms from the end')
    assert.equal(idle.stdout, '')
    assert.match(idle.stderr, /Processed a total of 0 messages/)
  })
})

test('cluster describe, topics describe on a degraded 3-broker cluster shows offline and under-replicated partitions', {
  timeout: 120000,
}, async () => {
  const cluster = await startCluster({
    brokers: 3,
    port: 0,
    properties: { 'broker.session.timeout.ms': SESSION_TIMEOUT_MS },
  })
  try {
    const b = ['--bootstrap-server', cluster.bootstrapServers]
    ok(
      await tidelog([
        'topics',
        'create',
        '--topic',
        'replicated',
        '--partitions',
        '3',
        '--replication-factor',
        '3',
        ...b,
      ]),
      'create rf3',
    )
    ok(
      await tidelog([
        'topics',
        'create',
        '--topic',
        'single',
        '--partitions',
        '3',
        '--replication-factor',
        '1',
        ...b,
      ]),
      'create rf1',
    )
    const healthy = ok(await tidelog(['cluster', 'describe', ...b]), 'cluster describe')
    const lines = healthy.trimEnd().split('\n')
    assert.match(lines[0], /^Cluster: \S+ {3}Controller: \d$/)
    assert.equal(lines[1], 'ID  HOST       PORT   RACK  ROLE')
    assert.equal(lines.length, 6)
    assert.match(
      lines[5],
      /^Topics: 2 {3}Partitions: 6 \(0 offline, 0 under-replicated\) {3}Consumer groups: (supported|not supported by this broker yet)$/,
    )

    const victim = cluster.brokers[2]
    await victim.stop()
    const survivors = [
      '--bootstrap-server',
      cluster.brokers
        .slice(0, 2)
        .map((x) => x.bootstrapServers)
        .join(','),
    ]
    const deadline = Date.now() + 20000
    let degraded: { name: string; partitions: { state: string; leader: number }[] }[] = []
    // The ISR shrink is a controller decision: wait for it to show.
    while (Date.now() < deadline) {
      degraded = JSON.parse(
        ok(await tidelog(['topics', 'describe', '--json', ...survivors]), 'describe degraded'),
      )
      const states = degraded.flatMap((t) => t.partitions.map((p) => p.state))
      if (states.includes('under-replicated') && states.includes('offline')) break
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    const single = degraded.find((t) => t.name === 'single')!
    assert.equal(
      single.partitions.filter((p) => p.state === 'offline').length,
      1,
      'the RF 1 partition on the stopped broker is offline',
    )
    const replicated = degraded.find((t) => t.name === 'replicated')!
    assert.ok(replicated.partitions.every((p) => p.state === 'under-replicated'))

    const table = ok(
      await tidelog(['topics', 'describe', '--topic', 'single', ...survivors]),
      'describe table',
    )
    assert.match(table.split('\n')[0], /1 offline/)
    assert.match(table, /^\d +none .* offline$/m)
    const onlyOffline = JSON.parse(
      ok(
        await tidelog(['topics', 'describe', '--unavailable-partitions', '--json', ...survivors]),
        'unavailable',
      ),
    )
    assert.deepEqual(onlyOffline.flatMap((t: { partitions: unknown[] }) => t.partitions).length, 1)
    const under = ok(
      await tidelog(['topics', 'describe', '--under-replicated-partitions', ...survivors]),
      'under-replicated',
    )
    assert.match(
      under,
      /^Topic: replicated .*PartitionCount: 3 {2}ReplicationFactor: 3 {2}3 under-replicated$/m,
    )
    assert.doesNotMatch(under, /Topic: single/, 'topics without such partitions are left out')
    const summary = ok(await tidelog(['cluster', 'describe', ...survivors]), 'cluster describe degraded')
    assert.match(summary, /Partitions: 6 \(1 offline, [2-5] under-replicated\)/)
  } finally {
    await cluster.stop()
  }
})

test('groups answer "not supported" on a broker without the group APIs (exit 4)', {
  timeout: 60000,
}, async () => {
  const fake = await startFakeBroker()
  try {
    const b = ['--bootstrap-server', fake.bootstrap]
    const groups = await tidelog(['groups', 'list', ...b])
    assert.equal(groups.code, 4)
    assert.match(groups.stderr, /consumer groups are not supported by this broker yet/)
    const group = await tidelog(['consume', '--topic', 'x', '--group', 'g', ...b])
    assert.equal(group.code, 4)
    assert.match(group.stderr, /not supported by this broker yet/)
    assert.match(
      ok(await tidelog(['cluster', 'describe', ...b]), 'cluster describe'),
      /Consumer groups: not supported by this broker yet/,
    )
  } finally {
    await fake.close()
  }
})

test('usage errors, unreachable clusters and help have their exit codes; groups on a tidelog broker', {
  timeout: 60000,
}, async () => {
  await withBroker(async (cluster) => {
    const b = ['--bootstrap-server', cluster.bootstrapServers]
    // With the group coordinator served, list works; --group cannot be mixed with --partition.
    const groups = await tidelog(['groups', 'list', ...b])
    assert.ok(groups.code === 0 || groups.code === 4, groups.stderr)
    const group = await tidelog(['consume', '--topic', 'x', '--group', 'g', '--partition', '0', ...b])
    assert.equal(group.code, 2)
    const usage = await tidelog(['topics', 'create', ...b])
    assert.equal(usage.code, 2)
    assert.match(usage.stderr, /name exactly one topic/)
    const badFlag = await tidelog(['produce', '--topic', 't', '--nope', ...b])
    assert.equal(badFlag.code, 2)
    const unknown = await tidelog(['topics', 'frobnicate', ...b])
    assert.equal(unknown.code, 2)
    const help = await tidelog(['consume', '--help'])
    assert.equal(help.code, 0)
    assert.match(help.stdout, /--from-beginning/)
    for (const command of ['start', 'broker']) {
      const asked = await tidelog([command, '--help'])
      assert.equal(asked.code, 0, `${command} --help: ${asked.stderr}`)
      assert.match(asked.stdout, new RegExp(`tidelog ${command} options:`))
    }
    for (const command of ['topics', 'cluster', 'groups', 'produce', 'bench']) {
      for (const flag of ['--help', '-h']) {
        const asked = await tidelog([command, flag])
        assert.equal(asked.code, 0, `${command} ${flag}: ${asked.stderr}`)
        assert.match(asked.stdout, new RegExp(`^Usage: tidelog ${command}`), `${command} ${flag}`)
      }
    }
    assert.match(ok(await tidelog(['help']), 'help'), /topics +create\|list\|describe\|alter\|delete/)
  })
  const unreachable = await tidelog(['topics', 'list', '--bootstrap-server', '127.0.0.1:1'])
  assert.equal(unreachable.code, 3)
  assert.match(unreachable.stderr, /cannot reach the cluster/)
})

test('bench produce, consume and e2e report throughput, latency percentiles and their own CPU', {
  timeout: 120000,
}, async () => {
  await withBroker(async (cluster) => {
    const b = ['--bootstrap-server', cluster.bootstrapServers]
    const produce = await tidelog([
      'bench',
      'produce',
      '--topic',
      'bench',
      '--num-records',
      '5000',
      '--record-size',
      '100',
      '--partitions',
      '2',
      '--json',
      ...b,
    ])
    const p = JSON.parse(ok(produce, 'bench produce'))
    assert.equal(p.records, 5000)
    assert.equal(p.failed, 0)
    assert.ok(p.recordsPerSec > 0 && p.mbPerSec > 0)
    for (const key of ['p50', 'p95', 'p99', 'p999', 'max']) assert.ok(p.latencyMs[key] > 0, key)
    assert.ok(p.latencyMs.p50 <= p.latencyMs.p99 && p.latencyMs.p99 <= p.latencyMs.max)
    assert.ok(p.cpu.userMs > 0 && p.cpu.percentOfOneCore > 0)
    const consume = JSON.parse(
      ok(
        await tidelog(['bench', 'consume', '--topic', 'bench', '--num-records', '5000', '--json', ...b]),
        'bench consume',
      ),
    )
    assert.equal(consume.records, 5000)
    const e2e = await tidelog([
      'bench',
      'e2e',
      '--num-records',
      '500',
      '--throughput',
      '1000',
      '--interval-ms',
      '200',
      ...b,
    ])
    const text = ok(e2e, 'bench e2e')
    assert.match(
      text,
      /^500 records sent in [\d.]+ s: \d+ records\/sec \([\d.]+ MB\/sec\), latency ms p50 [\d.]+, p95 [\d.]+, p99 [\d.]+, p99.9 [\d.]+, max [\d.]+\nclient CPU: \d+ ms user \+ \d+ ms system = \d+% of one core; event loop \d+% busy\n$/,
    )
    assert.match(e2e.stderr, /records\/sec .*client CPU \d+%/)
  })
})

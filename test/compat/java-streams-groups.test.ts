/**
 * Issue 33 item 4, streams groups (KIP-1071): Kafka Streams 4.4 with group.protocol=streams
 * (test/compat/java/StreamsWordCount.java: a repartition topic, a count store with its
 * changelog, processing.guarantee=exactly_once_v2). One instance starts alone (the broker
 * creates its repartition and changelog topics from the heartbeat's MISSING_INTERNAL_TOPICS);
 * once it has committed output a second instance joins, and the group must end with both
 * holding active tasks (tasks moved) and no task active on both (Admin
 * describeStreamsGroups, i.e. StreamsGroupDescribe); then every word's committed counts must
 * rise strictly and end exact (no record lost or counted twice across the move). Run against
 * tidelog (1 broker) and, the same way, against Apache Kafka 4.4 (1 node; a failure there is a
 * bad test).
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Cluster } from '../../src/server/cluster.js'
import { startCluster } from '../helpers/cluster.js'
import { recordCompatResults } from '../helpers/compat-results.js'
import { compileJava, exec, JVM_FLAGS } from '../helpers/java.js'
import {
  KAFKA_REFERENCE_VERSION,
  type KafkaReference,
  startKafkaReference,
  TIDELOG_AS_REFERENCE,
} from '../helpers/kafka-reference.js'

/** At about 1 ms a line, long enough for the second instance to join mid-stream. */
const LINES = 4000

let classpath = ''

async function java(args: string[], timeoutMs: number): Promise<string> {
  return (await exec('java', [...JVM_FLAGS, '-cp', classpath, 'StreamsWordCount', ...args], timeoutMs)).stdout
}

/** One instance of the application; its output kept for the failure message. */
class App {
  readonly child: ChildProcess
  output = ''

  constructor(bootstrap: string, prefix: string, stateDir: string) {
    this.child = spawn(
      'java',
      [...JVM_FLAGS, '-cp', classpath, 'StreamsWordCount', 'run', bootstrap, prefix, stateDir, 'streams'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    const keep = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString()).slice(-20_000)
    }
    this.child.stdout?.on('data', keep)
    this.child.stderr?.on('data', keep)
  }

  kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve()
    return new Promise((resolve) => {
      this.child.once('exit', () => resolve())
      this.child.kill('SIGKILL')
    })
  }
}

async function outputCount(bootstrap: string, prefix: string): Promise<number> {
  const m = /^OUTPUT (\d+)$/m.exec(await java(['progress', bootstrap, prefix], 60_000))
  return m ? Number(m[1]) : 0
}

/** The whole scenario against `bootstrap`; returns the verdicts for the assertions. */
async function secondInstanceJoins(
  bootstrap: string,
  label: 'tidelog' | 'kafka',
): Promise<{ verify: string; group: string }> {
  const startedMs = Date.now()
  const prefix = `streams-group-${label}-${Date.now().toString(36)}`
  const dirs = [mkdtempSync(join(tmpdir(), 'streams-a-')), mkdtempSync(join(tmpdir(), 'streams-b-'))]
  const apps: App[] = []
  const failure = (why: string) =>
    `${why}\n${apps.map((a, i) => `instance ${i}:\n${a.output.slice(-4000)}`).join('\n')}`
  try {
    await java(['setup', bootstrap, prefix, String(LINES)], 120_000)
    const first = new App(bootstrap, prefix, dirs[0] ?? '')
    apps.push(first)
    const deadline = Date.now() + 120_000
    while ((await outputCount(bootstrap, prefix)) === 0) {
      assert.ok(Date.now() < deadline, failure('no committed output within 120 s'))
      assert.equal(first.child.exitCode, null, failure('the first instance exited'))
      await sleep(500)
    }
    apps.push(new App(bootstrap, prefix, dirs[1] ?? ''))
    // Both instances hold active tasks, none on both (tasks moved from the first to the second).
    let group = ''
    const joinDeadline = Date.now() + 120_000
    for (;;) {
      group = /^STREAMS-GROUP .*$/m.exec(await java(['describe', bootstrap, prefix], 60_000))?.[0] ?? ''
      const counts = /ACTIVE \[(\d+), (\d+)\]/.exec(group)
      if (counts && Number(counts[1]) > 0 && Number(counts[2]) > 0) break
      assert.ok(Date.now() < joinDeadline, failure(`tasks never moved to the second instance: ${group}`))
      for (const app of apps) assert.equal(app.child.exitCode, null, failure('an instance exited'))
      await sleep(1000)
    }
    console.log(`${label}: ${group}`)
    const verify =
      /^VERIFY .*$/m.exec(await java(['verify', bootstrap, prefix, String(LINES), '180000'], 240_000))?.[0] ??
      ''
    console.log(`${label}: ${verify}`)
    recordCompatResults('Kafka Streams (Java)', KAFKA_REFERENCE_VERSION, label, [
      {
        check: 'streams-group-protocol-second-instance-joins',
        pass: verify.startsWith('VERIFY PASS') && / SHARED 0$/.test(group),
        ms: Date.now() - startedMs,
        detail: `${group}; ${verify}`,
      },
    ])
    return { verify: verify.startsWith('VERIFY PASS') ? verify : failure(verify), group }
  } finally {
    for (const app of apps) await app.kill()
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  }
}

describe('Kafka Streams 4.4 with group.protocol=streams: a second instance joins mid-stream', () => {
  before(async () => {
    classpath = await compileJava('StreamsWordCount', 'streams')
  })

  describe('tidelog', () => {
    let cluster: Cluster | undefined
    before(async () => {
      // One broker: new topics (the internal ones too) get 1 replica, as on the 1-node Kafka.
      cluster = await startCluster({
        brokers: 1,
        port: 0,
        properties: { ...TIDELOG_AS_REFERENCE, 'default.replication.factor': 1 },
      })
    })
    after(async () => {
      await cluster?.stop()
    })

    it('moves tasks to the new instance and counts every word exactly once', async () => {
      assert.ok(cluster)
      const { verify, group } = await secondInstanceJoins(cluster.bootstrapServers, 'tidelog')
      assert.match(group, / SHARED 0$/)
      assert.match(verify, /^VERIFY PASS/)
    })
  })

  describe('Apache Kafka 4.4 (the reference)', () => {
    let kafka: KafkaReference | undefined
    before(async () => {
      kafka = await startKafkaReference({ nodes: 1 })
    })
    after(async () => {
      await kafka?.stop()
    })

    it('moves tasks to the new instance and counts every word exactly once', async () => {
      assert.ok(kafka)
      const { verify, group } = await secondInstanceJoins(kafka.bootstrap, 'kafka')
      assert.match(group, / SHARED 0$/)
      assert.match(verify, /^VERIFY PASS/)
    })
  })
})

/**
 * Issue 32, Kafka Streams 4.4 (org.apache.kafka:kafka-streams 4.4.0): a stateful word count
 * (test/compat/java/StreamsWordCount.java: a repartition topic, a count store with its
 * changelog) under processing.guarantee=exactly_once_v2, killed with SIGKILL mid-stream and
 * started again on the same state directory; then every word's committed counts must rise
 * strictly and end exact. Run against tidelog on 3 brokers and, the same way, against Apache
 * Kafka 4.4 on 3 nodes (a failure there is a bad test). Both run transaction version 2
 * (KIP-890 part 2: Produce v12, EndTxn v5, TxnOffsetCommit v5), the default of both; the
 * Java conformance suite covers version 1.
 * With a planted tidelog bug
 * (read_committed fetches serving aborted records) it failed: after the kill every word's
 * count ended 5-8 above the exact one (records of aborted transactions read back).
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

/** Lines of 3 words: at about 1 ms a line the application runs some seconds, long enough to be killed. */
const LINES = 6000

let classpath = ''

async function java(args: string[], timeoutMs: number): Promise<string> {
  return (await exec('java', [...JVM_FLAGS, '-cp', classpath, 'StreamsWordCount', ...args], timeoutMs)).stdout
}

/** One run of the application; its output kept for the failure message. */
class App {
  readonly child: ChildProcess
  output = ''
  exited: Promise<number | null>

  constructor(bootstrap: string, prefix: string, stateDir: string) {
    this.child = spawn(
      'java',
      [...JVM_FLAGS, '-cp', classpath, 'StreamsWordCount', 'run', bootstrap, prefix, stateDir],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    const keep = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString()).slice(-20_000)
    }
    this.child.stdout?.on('data', keep)
    this.child.stderr?.on('data', keep)
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)))
  }

  kill(signal: NodeJS.Signals): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal)
    return this.exited
  }
}

async function outputCount(bootstrap: string, prefix: string): Promise<number> {
  const out = await java(['progress', bootstrap, prefix], 60_000)
  const m = /^OUTPUT (\d+)$/m.exec(out)
  assert.ok(m, out)
  return Number(m[1])
}

/** The whole scenario against `bootstrap`; returns VERIFY's line. */
async function wordCountKilledMidStream(bootstrap: string, label: 'tidelog' | 'kafka'): Promise<string> {
  const startedMs = Date.now()
  const prefix = `streams-${label}-${Date.now().toString(36)}`
  const stateDir = mkdtempSync(join(tmpdir(), 'streams-state-'))
  const apps: App[] = []
  try {
    await java(['setup', bootstrap, prefix, String(LINES)], 120_000)
    const first = new App(bootstrap, prefix, stateDir)
    apps.push(first)
    // Killed once some counts are committed, long before the 6000 lines are through.
    const deadline = Date.now() + 120_000
    let seen = 0
    while (seen === 0) {
      assert.ok(Date.now() < deadline, `no committed output within 120 s:\n${first.output}`)
      assert.equal(first.child.exitCode, null, `the application exited:\n${first.output}`)
      await sleep(500)
      seen = await outputCount(bootstrap, prefix)
    }
    await first.kill('SIGKILL')
    console.log(`${label}: killed after ${seen} committed output records`)
    const second = new App(bootstrap, prefix, stateDir)
    apps.push(second)
    const verdict = await java(['verify', bootstrap, prefix, String(LINES), '180000'], 240_000)
    const line = /^VERIFY .*$/m.exec(verdict)?.[0] ?? verdict
    console.log(`${label}: ${line}`)
    recordCompatResults('Kafka Streams (Java)', KAFKA_REFERENCE_VERSION, label, [
      {
        check: 'streams-exactly-once-v2-killed-mid-stream',
        pass: line.startsWith('VERIFY PASS'),
        ms: Date.now() - startedMs,
        detail: line,
      },
    ])
    if (!line.startsWith('VERIFY PASS')) {
      return `${line}\nfirst run:\n${first.output.slice(-3000)}\nsecond run:\n${second.output.slice(-5000)}`
    }
    return line
  } finally {
    for (const app of apps) await app.kill('SIGKILL')
    rmSync(stateDir, { recursive: true, force: true })
  }
}

describe('Kafka Streams 4.4 word count, exactly_once_v2, killed mid-stream', () => {
  before(async () => {
    classpath = await compileJava('StreamsWordCount', 'streams')
  })

  describe('tidelog on 3 brokers', () => {
    let cluster: Cluster | undefined
    before(async () => {
      cluster = await startCluster({
        brokers: 3,
        port: 0,
        properties: TIDELOG_AS_REFERENCE,
      })
    })
    after(async () => {
      await cluster?.stop()
    })

    it('counts every word exactly once', async () => {
      assert.ok(cluster)
      const line = await wordCountKilledMidStream(cluster.bootstrapServers, 'tidelog')
      assert.match(line, /^VERIFY PASS/)
    })
  })

  describe('Apache Kafka 4.4 on 3 nodes (the reference)', () => {
    let kafka: KafkaReference | undefined
    before(async () => {
      kafka = await startKafkaReference({ nodes: 3, shared: true })
    })
    after(async () => {
      await kafka?.stop()
    })

    it('counts every word exactly once', async () => {
      assert.ok(kafka)
      const line = await wordCountKilledMidStream(kafka.bootstrap, 'kafka')
      assert.match(line, /^VERIFY PASS/)
    })
  })
})

/**
 * Issue 32, Kafka Connect 4.4 (org.apache.kafka:connect-runtime 4.4.0): one distributed
 * worker (test/compat/java/ConnectCheck.java) makes its compacted internal topics, runs a
 * source connector into a topic and a sink connector out of it to a file, reports the
 * source offset (KIP-875) and the sink group's committed offset, restarts the source
 * without writing a record twice, and deletes both. Then a standalone worker (source offsets
 * in a file) runs the same source and sink, and a second standalone worker on that file
 * resumes the source without writing a record twice. The connectors are the program's own:
 * Connect's FileStream connectors (connect-file 4.4.0) are not served by the registry here.
 * Run against tidelog on 3 brokers and against Apache Kafka 4.4 on 3 nodes (a failure there
 * is a bad check). Planted bug tried: the second standalone worker on a fresh offsets file
 * failed connect-standalone-resumes-from-offsets-file (1000 records for 500).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import type { Cluster } from '../../src/server/cluster.js'
import { startCluster } from '../helpers/cluster.js'
import { recordCompatResults } from '../helpers/compat-results.js'
import { compileJava, exec, JVM_FLAGS, parseChecks } from '../helpers/java.js'
import {
  KAFKA_REFERENCE_VERSION,
  type KafkaReference,
  REFERENCE_STREAMS_HEARTBEAT,
  startKafkaReference,
  TIDELOG_AS_REFERENCE,
} from '../helpers/kafka-reference.js'

const CHECKS = [
  'connect-worker-starts',
  'connect-internal-topics-compacted',
  'connect-source-connector',
  'connect-sink-connector',
  'connect-restart-and-delete',
  'connect-standalone-worker-starts',
  'connect-standalone-source-connector',
  'connect-standalone-sink-connector',
  'connect-standalone-resumes-from-offsets-file',
]
const RECORDS = 500

let classpath = ''

async function runConnect(bootstrap: string, label: 'tidelog' | 'kafka'): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'connect-'))
  try {
    const prefix = `connect-${label}-${Date.now().toString(36)}`
    const { stdout, stderr } = await exec(
      'java',
      [...JVM_FLAGS, '-cp', classpath, 'ConnectCheck', bootstrap, prefix, work, String(RECORDS)],
      10 * 60_000,
    )
    const outcomes = parseChecks(stdout, stderr)
    recordCompatResults(
      'Kafka Connect (Java)',
      KAFKA_REFERENCE_VERSION,
      label,
      [...outcomes].map(([check, o]) => ({ check, pass: o.pass, ms: o.ms, detail: o.reason })),
    )
    for (const [name, o] of outcomes)
      console.log(`${label} ${name}: ${o.pass ? 'pass' : `FAIL ${o.reason}`} (${o.ms} ms)`)
    assert.deepEqual([...outcomes.keys()], CHECKS, `every check ran:\n${stderr.slice(-4000)}`)
    const failed = [...outcomes].filter(([, o]) => !o.pass).map(([name, o]) => `${name}: ${o.reason}`)
    assert.deepEqual(failed, [], `worker log:\n${stderr.slice(-4000)}`)
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

describe('Kafka Connect 4.4 distributed and standalone workers', () => {
  before(async () => {
    classpath = await compileJava('ConnectCheck', 'connect')
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

    it('runs a source and a sink connector', async () => {
      assert.ok(cluster)
      await runConnect(cluster.bootstrapServers, 'tidelog')
    })
  })

  describe('Apache Kafka 4.4 on 3 nodes (the reference)', () => {
    let kafka: KafkaReference | undefined
    before(async () => {
      // java-streams.test.ts' options (its heartbeats do nothing here), so both share one cluster.
      kafka = await startKafkaReference({ nodes: 3, properties: REFERENCE_STREAMS_HEARTBEAT, shared: true })
    })
    after(async () => {
      await kafka?.stop()
    })

    it('runs a source and a sink connector', async () => {
      assert.ok(kafka)
      await runConnect(kafka.bootstrap, 'kafka')
    })
  })
})

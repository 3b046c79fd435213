/**
 * Issue 32, the Go clients: franz-go 1.22.3 (kgo, kadm 1.20.0) and sarama 1.61.1 run the
 * same checks (test/compat/go, built by scripts/build-go-clients.sh) against tidelog on 3
 * in-process brokers and against Apache Kafka 4.4.0 on 3 KRaft nodes (the reference broker,
 * scripts/kafka-reference.sh). Every check must pass on both: one that fails on Kafka is a
 * bad check.
 *
 * Both brokers run the StandardAuthorizer with the PLAINTEXT principal User:ANONYMOUS as
 * super user, so that the ACL checks have an authorizer to talk to.
 *
 * Planted bugs tried, each failed its checks on tidelog: MESSAGE_TOO_LARGE never returned
 * (record-too-large of both clients), and read_committed serving aborted records
 * (transactions-commit-abort of both clients).
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { after, before, describe, it } from 'node:test'
import type { Cluster } from '../../src/server/cluster.js'
import { startCluster } from '../helpers/cluster.js'
import { repoRoot } from '../helpers/compat-clients.js'
import { recordCompatResults } from '../helpers/compat-results.js'
import { type KafkaReference, startKafkaReference, TIDELOG_AS_REFERENCE } from '../helpers/kafka-reference.js'

const CLIENTS = ['franz', 'sarama'] as const
type Client = (typeof CLIENTS)[number]

/** Each client's name and version (test/compat/go/go.mod) for the compatibility table. */
const CLIENT_VERSIONS: Readonly<Record<Client, [string, string]>> = {
  franz: ['franz-go (Go)', '1.22.3'],
  sarama: ['sarama (Go)', '1.61.1'],
}

/** Every check of each client, in its order (test/compat/go/franz.go and sarama.go). */
const CHECKS: Readonly<Record<Client, readonly string[]>> = {
  franz: [
    'produce-acks-0',
    'produce-acks-1',
    'produce-acks-all',
    'producer-idempotent',
    'transactions-commit-abort',
    'transactions-group-session',
    'headers',
    'compression-gzip',
    'compression-snappy',
    'compression-lz4',
    'compression-zstd',
    'record-near-message-max-bytes',
    'record-too-large',
    'consumer-group-classic-range',
    'consumer-group-classic-roundrobin',
    'consumer-group-classic-sticky',
    'consumer-group-classic-cooperative-sticky',
    'consumer-group-protocol-consumer',
    'admin-describe-cluster',
    'admin-topics',
    'admin-create-partitions',
    'admin-configs',
    'admin-acls',
    'admin-list-offsets',
    'admin-delete-records',
    'admin-group-offsets',
  ],
  sarama: [
    'produce-acks-0',
    'produce-acks-1',
    'produce-acks-all',
    'producer-idempotent',
    'transactions-commit-abort',
    'transactions-send-offsets',
    'headers',
    'compression-gzip',
    'compression-snappy',
    'compression-lz4',
    'compression-zstd',
    'record-near-message-max-bytes',
    'record-too-large',
    'consumer-group-range',
    'consumer-group-roundrobin',
    'consumer-group-sticky',
    'admin-describe-cluster',
    'admin-topics',
    'admin-create-partitions',
    'admin-configs',
    'admin-acls',
    'admin-delete-records',
    'admin-consumer-groups',
  ],
}

const AUTHORIZER: Readonly<Record<string, string>> = {
  'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
  'super.users': 'User:ANONYMOUS',
}

interface Outcome {
  readonly check: string
  readonly ok: boolean
  readonly detail: string
  readonly ms: number
}

function exec(
  command: string,
  args: readonly string[],
  timeoutMs: number,
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      [...args],
      { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        // The program exits 0 whatever its checks say; a failure here is a crash or a hang.
        if (error) reject(new Error(`${command} failed: ${error.message}\n${String(stderr).slice(-4000)}`))
        else resolve({ stdout: String(stdout), stderr: String(stderr) })
      },
    )
  })
}

let goconf = ''

/** Runs every check of `client` against `bootstrap`; returns the outcomes by check. */
async function runChecks(client: Client, bootstrap: string): Promise<Map<string, Outcome>> {
  // Each check bounds itself to 90 s; all of one client take about 15 s on a quiet machine.
  const { stdout, stderr } = await exec(goconf, [client, bootstrap], 10 * 60_000)
  const outcomes = new Map<string, Outcome>()
  let done = false
  for (const line of stdout.split('\n')) {
    if (line.trim() === '') continue
    const parsed = JSON.parse(line) as Outcome & { done?: boolean }
    if (parsed.done) done = true
    else outcomes.set(parsed.check, parsed)
  }
  assert.ok(done, `the ${client} checks did not finish:\n${stdout}\n${stderr.slice(-4000)}`)
  return outcomes
}

function assertAllPassed(label: string, client: Client, outcomes: Map<string, Outcome>): void {
  recordCompatResults(
    ...CLIENT_VERSIONS[client],
    label === 'tidelog' ? 'tidelog' : 'kafka',
    [...outcomes.values()].map((o) => ({ check: o.check, pass: o.ok, ms: o.ms, detail: o.detail })),
  )
  for (const o of outcomes.values()) {
    console.log(`${label} ${client} ${o.check}: ${o.ok ? 'pass' : `FAIL ${o.detail}`} (${o.ms} ms)`)
  }
  assert.deepEqual([...outcomes.keys()], CHECKS[client], 'every check ran')
  const failed = [...outcomes.values()].filter((o) => !o.ok).map((o) => `${o.check}: ${o.detail}`)
  assert.deepEqual(failed, [], `${client} checks failing on ${label}`)
}

/**
 * Runs both clients' checks side by side (each on topics and groups of its own; most of their
 * time is waiting on the brokers), then asserts that each passed all of them.
 */
async function runBoth(label: string, bootstrap: string): Promise<void> {
  const runs = await Promise.all(CLIENTS.map((client) => runChecks(client, bootstrap)))
  const failures: string[] = []
  CLIENTS.forEach((client, i) => {
    try {
      assertAllPassed(label, client, runs[i])
    } catch (error) {
      failures.push(String(error))
    }
  })
  assert.deepEqual(failures, [])
}

describe('Go clients (franz-go 1.22, sarama 1.61) conformance', () => {
  before(async () => {
    // Built by scripts/test.sh already; this is a no-op then, else about 1.5 minutes.
    goconf = (await exec(`${repoRoot()}/scripts/build-go-clients.sh`, [], 600_000)).stdout.trim()
  })

  describe('tidelog on 3 brokers', () => {
    let cluster: Cluster | undefined
    before(async () => {
      cluster = await startCluster({
        brokers: 3,
        port: 0,
        properties: { ...TIDELOG_AS_REFERENCE, ...AUTHORIZER },
      })
    })
    after(async () => {
      await cluster?.stop()
    })
    it('passes every check of both clients', async () => {
      assert.ok(cluster)
      await runBoth('tidelog', cluster.bootstrapServers)
    })
  })

  describe('Apache Kafka 4.4 on 3 nodes (the reference)', () => {
    let kafka: KafkaReference | undefined
    before(async () => {
      kafka = await startKafkaReference({ nodes: 3, properties: AUTHORIZER, shared: true })
    })
    after(async () => {
      await kafka?.stop()
    })
    it('passes every check of both clients (a check failing here is a bad check)', async () => {
      assert.ok(kafka)
      await runBoth('kafka', kafka.bootstrap)
    })
  })
})

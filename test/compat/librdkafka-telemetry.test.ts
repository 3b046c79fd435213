/**
 * Client telemetry (KIP-714) with librdkafka 2.15.1 (scripts/build-librdkafka.sh), which
 * pushes metrics since 2.5: a subscription set with IncrementalAlterConfigs matches the
 * producer by client id, and its pushed metrics appear on /metrics with its labels; the
 * client reports no telemetry error. Fails (never skips) when the modern library is missing.
 */
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { test } from 'node:test'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey, type IncrementalAlterConfigsResponse } from '../../src/protocol/generated/index.js'
import { withBroker } from '../helpers/cluster.js'
import { PYTHON, pythonScript, repoRoot } from '../helpers/compat-clients.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { createTopic } from '../helpers/topics.js'
import { waitUntil } from '../helpers/wait.js'

const CLIENT_ID = 'rdkafka-telemetry'
const CLIENT_METRICS = 16
const OP_SET = 0

/** Builds (once, cached in .build/librdkafka) and returns the directory of librdkafka.so.1. */
function modernLibrdkafka(): string {
  const built = spawnSync(join(repoRoot(), 'scripts', 'build-librdkafka.sh'), { encoding: 'utf8' })
  assert.equal(built.status, 0, `scripts/build-librdkafka.sh failed: ${built.stderr}`)
  return built.stdout.trim().split('\n').at(-1) ?? ''
}

test('librdkafka 2.15 pushes its metrics to a matching subscription, served on /metrics with its labels', async () => {
  const libDir = modernLibrdkafka()
  const dir = mkdtempSync(join(tmpdir(), 'tidelog-rdkafka-telemetry-'))
  const stopFile = join(dir, 'stop')
  try {
    await withBroker(
      async (cluster) => {
        const topic = 'rdkafka-telemetry'
        await createTopic(cluster, topic, { partitions: 1 })
        const raw = await RawClient.connect(cluster.brokers[0].port)
        try {
          const altered = await rawCall<IncrementalAlterConfigsResponse>(
            raw,
            ApiKey.IncrementalAlterConfigs,
            1,
            {
              resources: [
                {
                  resourceType: CLIENT_METRICS,
                  resourceName: 'rdkafka',
                  configs: [
                    { name: 'metrics', configOperation: OP_SET, value: 'org.apache.kafka.' },
                    { name: 'interval.ms', configOperation: OP_SET, value: '1000' },
                    { name: 'match', configOperation: OP_SET, value: `client_id=${CLIENT_ID}` },
                  ],
                },
              ],
            },
          )
          assert.equal(
            altered.responses[0].errorCode,
            ErrorCode.NONE,
            altered.responses[0].errorMessage ?? '',
          )
        } finally {
          raw.close()
        }

        const child = spawn(
          PYTHON,
          [pythonScript('telemetry_producer.py'), cluster.bootstrapServers, topic, CLIENT_ID, stopFile],
          { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, LD_LIBRARY_PATH: libDir } },
        )
        const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
        let libversion = ''
        const errors: string[] = []
        createInterface({ input: child.stdout! }).on('line', (line) => {
          const event = JSON.parse(line) as { libversion?: string; error?: string }
          if (event.libversion !== undefined) libversion = event.libversion
          if (event.error !== undefined) errors.push(event.error)
        })
        try {
          const metricsUrl = `${cluster.brokers[0].httpUrl}metrics`
          let mine: string[] = []
          await waitUntil(
            "the producer's pushed metrics on /metrics",
            60_000,
            async () => {
              const body = await (await fetch(metricsUrl)).text()
              mine = body.split('\n').filter((l) => l.includes(`client_id="${CLIENT_ID}"`))
              return mine.some((l) => l.startsWith('org_apache_kafka_producer_'))
            },
            250,
          )
          assert.equal(libversion, '2.15.1', 'LD_LIBRARY_PATH must load librdkafka 2.15.1')
          console.log(`librdkafka: ${mine.length} series pushed, e.g. ${mine[0]}`)
          for (const line of mine) {
            assert.match(line, /client_instance_id="[A-Za-z0-9_-]{22}"/)
            assert.match(line, /client_software_name="[^"]+"/)
            assert.match(line, /client_source_address="127\.0\.0\.1"/)
          }
          assert.deepEqual(errors, [])
        } finally {
          writeFileSync(stopFile, '')
          const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
          await exited
          clearTimeout(timer)
        }
      },
      { properties: { 'tidelog.http.listener': '127.0.0.1:0' } },
    )
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

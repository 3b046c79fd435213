/**
 * A real client from PyPI, unchanged: confluent-kafka 2.16.1's SchemaRegistryClient and its
 * Avro, JSON Schema and Protobuf serializers and deserializers (test/compat/python/sr_ck.py),
 * producing to and consuming from tidelog with the same package's Producer and Consumer.
 * The Protobuf serializer registers a base64 FileDescriptorProto and its deserializer reads
 * the writer's schema with `format=serialized`. Then the same client over HTTPS with basic
 * auth (`basic.auth.user.info`, `ssl.ca.location`) against a broker with security on.
 *
 * scripts/install-python-clients.sh puts the packages, pinned with hashes in
 * test/compat/python/requirements.txt, in the virtualenv .build/pyenv.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { startCluster, type TestCluster } from '../../src/testing/index.js'
import { makeTestCerts, type TestCerts } from '../helpers/certs.js'
import { type Cluster, run, startBroker } from '../helpers/cluster.js'
import { pythonScript, repoRoot } from '../helpers/compat-clients.js'
import { guardedLogger } from '../helpers/log-guard.js'
import { securedBrokerProperties } from '../security/helpers.js'

let python = ''

interface Outcome {
  readonly check: string
  readonly ok: boolean
  readonly detail: string
}

/** Runs sr_ck.py with `spec`; every check it ran, by name. */
async function checks(spec: Record<string, unknown>): Promise<Map<string, Outcome>> {
  const result = await run(python, [pythonScript('sr_ck.py')], {
    input: JSON.stringify(spec),
    timeoutMs: 240_000,
  })
  const lines = result.stdout
    .trim()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Outcome & { done?: boolean })
  assert.ok(
    lines.at(-1)?.done,
    `sr_ck.py did not finish (exit ${result.code}):\n${result.stderr.slice(-4000)}`,
  )
  const outcomes = new Map(lines.filter((l) => !l.done).map((l) => [l.check, l]))
  for (const o of outcomes.values()) console.log(`${o.check}: ${o.ok ? 'pass' : 'FAIL'} ${o.detail}`)
  return outcomes
}

before(async () => {
  const installed = await new Promise<string>((resolve, reject) =>
    execFile(
      join(repoRoot(), 'scripts', 'install-python-clients.sh'),
      [],
      { timeout: 10 * 60_000, killSignal: 'SIGKILL' },
      (error, stdout, stderr) =>
        error
          ? reject(new Error(`${error.message}\n${String(stderr).slice(-4000)}`))
          : resolve(String(stdout)),
    ),
  )
  python = installed.trim().split('\n').pop() ?? ''
})

let cluster: TestCluster | undefined
let secure: Cluster | undefined
let certs: TestCerts | undefined

after(async () => {
  await cluster?.stop()
  await secure?.stop()
  await certs?.cleanup()
})

test('confluent-kafka (PyPI): registry client, Avro, JSON Schema and Protobuf serdes', {
  timeout: 300_000,
}, async () => {
  cluster = await startCluster({ brokers: 1, schemaRegistry: true, logger: guardedLogger('python-registry') })
  const outcomes = await checks({
    registry: cluster.schemaRegistryUrl,
    bootstrap: cluster.bootstrapServers,
    prefix: 'py',
  })
  assert.deepEqual([...outcomes.keys()], ['client-api', 'avro', 'json', 'protobuf'])
  for (const o of outcomes.values()) assert.ok(o.ok, `${o.check}: ${o.detail}`)
})

test('confluent-kafka (PyPI): the registry client over HTTPS with basic auth', {
  timeout: 120_000,
}, async () => {
  certs = await makeTestCerts()
  secure = await startBroker({
    properties: securedBrokerProperties(certs, { 'tidelog.schema.registry.listener': 'https://127.0.0.1:0' }),
  })
  const registry = secure.brokers[0].schemaRegistryUrl!
  const spec = { registry, bootstrap: '', prefix: 'secure', ca: certs.caFile, checks: ['client-api'] }
  const authenticated = await checks({ ...spec, auth: 'alice:alice-secret' })
  assert.ok(authenticated.get('client-api')?.ok, authenticated.get('client-api')?.detail)
  const refused = await checks({ ...spec, auth: 'alice:wrong' })
  assert.equal(refused.get('client-api')?.ok, false)
  assert.match(refused.get('client-api')?.detail ?? '', /Unauthorized.*401/)
})

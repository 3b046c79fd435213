/**
 * `--command-config FILE` (issue 16 item 6): topics, produce and consume against a broker's
 * SASL_SSL listener with Kafka's Java client properties and with librdkafka's spellings; a
 * wrong password and an unsupported property exit with a clear message.
 */
import assert from 'node:assert/strict'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { commandConfigOptions } from '../../src/cli/command-config.js'
import type { Cluster } from '../../src/server/cluster.js'
import { tidelogBin } from '../helpers/broker-process.js'
import { makeTestCerts, type TestCerts } from '../helpers/certs.js'
import { type RunResult, run, startBroker } from '../helpers/cluster.js'
import { createScramUser, securedBrokerProperties } from '../security/helpers.js'

let certs: TestCerts
let cluster: Cluster

before(async () => {
  certs = await makeTestCerts()
  cluster = await startBroker({ properties: securedBrokerProperties(certs) })
  await createScramUser(cluster, 'cli-user', 'cli-secret', ['SCRAM-SHA-512'])
})

after(async () => {
  await cluster?.stop()
  await certs?.cleanup()
})

function tidelog(args: readonly string[], input?: string): Promise<RunResult> {
  return run(process.execPath, [tidelogBin(), ...args], {
    ...(input !== undefined ? { input } : {}),
    timeoutMs: 30000,
  })
}

async function propertiesFile(name: string, lines: readonly string[]): Promise<string> {
  const path = join(certs.dir, name)
  await writeFile(path, `${lines.join('\n')}\n`)
  return path
}

function ok(result: RunResult, what: string): string {
  assert.equal(result.code, 0, `${what}: exit ${result.code}\n${result.stderr}`)
  return result.stdout
}

const javaScram = (password: string) => [
  'security.protocol=SASL_SSL',
  'sasl.mechanism=SCRAM-SHA-512',
  `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="cli-user" password="${password}";`,
  'ssl.truststore.type=PEM',
  `ssl.truststore.location=${certs.caFile}`,
]

test('topics, produce and consume over SASL_SSL with Java and librdkafka client properties', {
  timeout: 120000,
}, async () => {
  const b = ['--bootstrap-server', cluster.brokers[0].listenerAddress('SASL_SSL')]
  const java = ['--command-config', await propertiesFile('java.properties', javaScram('cli-secret'))]
  const librdkafka = [
    '--command-config',
    await propertiesFile('librdkafka.properties', [
      'security.protocol=sasl_ssl',
      'sasl.mechanisms=PLAIN',
      'sasl.username=alice',
      'sasl.password=alice-secret',
      `ssl.ca.location=${certs.caFile}`,
    ]),
  ]
  ok(await tidelog(['topics', 'create', '--topic', 'secure-cli', ...b, ...java]), 'topics create')
  assert.match(ok(await tidelog(['topics', 'list', ...b, ...librdkafka]), 'topics list'), /secure-cli/)
  const produced = await tidelog(['produce', '--topic', 'secure-cli', ...b, ...java], 'one\ntwo\nthree\n')
  ok(produced, 'produce')
  assert.match(produced.stderr, /Produced 3 of 3 record\(s\) to secure-cli/)
  const consumed = ok(
    await tidelog([
      'consume',
      '--topic',
      'secure-cli',
      '--from-beginning',
      '--max-messages',
      '3',
      ...b,
      ...librdkafka,
    ]),
    'consume',
  )
  assert.deepEqual(consumed.trim().split('\n'), ['one', 'two', 'three'])

  // Without the properties the SASL_SSL listener is unreachable: the flag is what made it work.
  const plain = await tidelog(['topics', 'list', ...b])
  assert.notEqual(plain.code, 0)
})

test('a wrong password exits 1 with SASL_AUTHENTICATION_FAILED; bad properties exit 2', {
  timeout: 60000,
}, async () => {
  const b = ['--bootstrap-server', cluster.brokers[0].listenerAddress('SASL_SSL')]
  const wrong = await tidelog([
    'topics',
    'list',
    ...b,
    '--command-config',
    await propertiesFile('wrong.properties', javaScram('not-the-password')),
  ])
  assert.equal(wrong.code, 1, wrong.stderr)
  assert.match(wrong.stderr, /SASL_AUTHENTICATION_FAILED/)

  const unknown = await tidelog([
    'topics',
    'list',
    ...b,
    '--command-config',
    await propertiesFile('unknown.properties', [...javaScram('cli-secret'), 'ssl.truststore.password=x']),
  ])
  assert.equal(unknown.code, 2, unknown.stderr)
  assert.match(unknown.stderr, /ssl.truststore.password is not supported/)

  const missing = await tidelog(['topics', 'list', ...b, '--command-config', join(certs.dir, 'nope')])
  assert.equal(missing.code, 2, missing.stderr)
  assert.match(missing.stderr, /--command-config .*nope/)
})

test('command config: a PEM key store file split into key and chain; GSSAPI, JKS and bad protocols refused', async () => {
  const keystore = await propertiesFile('client-keystore.pem', [
    certs.clientKeyPem.trim(),
    certs.clientCertPem.trim(),
  ])
  const options = commandConfigOptions(
    {
      'security.protocol': 'SSL',
      'ssl.keystore.type': 'PEM',
      'ssl.keystore.location': keystore,
      'ssl.truststore.certificates': certs.caPem,
      'ssl.endpoint.identification.algorithm': '',
    },
    'inline',
  )
  assert.equal(options.sasl, undefined)
  const ssl = options.ssl as { ca: string; key: string; cert: string; verifyHostname: boolean }
  assert.equal(ssl.ca, certs.caPem)
  assert.equal(ssl.verifyHostname, false)
  assert.match(ssl.key, /^-----BEGIN [A-Z ]*PRIVATE KEY-----/)
  assert.doesNotMatch(ssl.key, /CERTIFICATE/)
  assert.match(ssl.cert, /^-----BEGIN CERTIFICATE-----/)
  assert.doesNotMatch(ssl.cert, /PRIVATE KEY/)
  assert.equal(ssl.cert.trim(), certs.clientCertPem.trim())
  assert.throws(
    () => commandConfigOptions({ 'security.protocol': 'SASL_PLAINTEXT' }, 'f'),
    /sasl.mechanism GSSAPI is not supported/,
  )
  assert.throws(
    () => commandConfigOptions({ 'security.protocol': 'SSL', 'ssl.truststore.type': 'JKS' }, 'f'),
    /JKS is not supported: tidelog reads PEM/,
  )
  assert.throws(
    () => commandConfigOptions({ 'security.protocol': 'TLS' }, 'f'),
    /security.protocol must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL/,
  )
})

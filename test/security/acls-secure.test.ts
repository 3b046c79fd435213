/**
 * `tidelog start --secure` with the authorizer switched on: its generated user is a super
 * user (it is also the inter-broker principal), so the printed client properties still
 * produce and consume with kcat, and it administers ACLs with `tidelog acls`.
 */
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { spawnTidelog, tidelogBin } from '../helpers/broker-process.js'
import { run } from '../helpers/cluster.js'

test('tidelog start --secure with authorizer.class.name: the generated user may do everything', {
  timeout: 90_000,
}, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-secure-acls-'))
  const cli = spawnTidelog(
    [
      'start',
      '--secure',
      '--port',
      '0',
      '--data-dir',
      dataDir,
      '--set',
      'authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer',
    ],
    { TIDELOG_LOG_LEVEL: 'warn' },
  )
  try {
    const { line } = await cli.waitForLine(/^bootstrap servers: /, 30_000)
    const bootstrap = line.replace(/^bootstrap servers: /, '').trim()
    const { line: propertiesLine } = await cli.waitForLine(/client properties \(also in /, 30_000)
    const file = /also in (.*)\):$/.exec(propertiesLine)![1]
    const text = await readFile(file, 'utf8')
    const librdkafka = [
      'security.protocol=SASL_SSL',
      ...[
        ...text.matchAll(/^# (sasl\.mechanisms|sasl\.username|sasl\.password|ssl\.ca\.location)=(.*)$/gm),
      ].map((m) => `${m[1]}=${m[2]}`),
    ].flatMap((p) => ['-X', p])
    const produced = await run('kcat', ['-b', bootstrap, ...librdkafka, '-P', '-t', 'secured'], {
      input: 'one\ntwo\n',
      timeoutMs: 30_000,
    })
    assert.equal(produced.code, 0, produced.stderr)
    const consumed = await run(
      'kcat',
      ['-b', bootstrap, ...librdkafka, '-C', '-t', 'secured', '-o', 'beginning', '-e', '-q'],
      {
        timeoutMs: 30_000,
      },
    )
    assert.deepEqual(consumed.stdout.trim().split('\n'), ['one', 'two'])
    const added = await run(process.execPath, [
      tidelogBin(),
      'acls',
      'add',
      '--allow-principal',
      'User:reader',
      '--operation',
      'Read',
      '--topic',
      'secured',
      '--bootstrap-server',
      bootstrap,
      '--command-config',
      file,
    ])
    assert.equal(added.code, 0, added.stderr)
    assert.match(added.stdout, /Added .*User:reader.*TOPIC:LITERAL:secured/)
  } finally {
    cli.signal('SIGTERM')
    const { code } = await cli.exited
    await rm(dataDir, { recursive: true, force: true })
    assert.equal(code, 0, cli.tail())
  }
})

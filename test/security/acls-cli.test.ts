/**
 * `tidelog acls add|list|remove` as the real binary, over SASL_PLAINTEXT with
 * --command-config: the super user adds a PREFIXED ACL, lists it by MATCH, removes it; a
 * non-super user is refused (CLUSTER_AUTHORIZATION_FAILED); bad options are usage errors;
 * a broker without an authorizer answers SECURITY_DISABLED.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import type { Cluster } from '../../src/server/cluster.js'
import { tidelogBin } from '../helpers/broker-process.js'
import { type RunResult, run, withBroker } from '../helpers/cluster.js'
import { ACL_USERS, startAclBroker } from './acls-helpers.js'

let cluster: Cluster
let dir: string

before(async () => {
  cluster = await startAclBroker()
  dir = await mkdtemp(join(tmpdir(), 'tidelog-acls-cli-'))
  for (const user of ['admin', 'alice'] as const)
    await writeFile(
      join(dir, `${user}.properties`),
      [
        'security.protocol=SASL_PLAINTEXT',
        'sasl.mechanism=PLAIN',
        `sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="${user}" password="${ACL_USERS[user]}";`,
      ].join('\n'),
    )
})

after(async () => {
  await cluster?.stop()
  if (dir) await rm(dir, { recursive: true, force: true })
})

function acls(
  user: 'admin' | 'alice',
  args: readonly string[],
  bootstrap = cluster.bootstrapServers,
): Promise<RunResult> {
  return run(
    process.execPath,
    [
      tidelogBin(),
      'acls',
      ...args,
      '--bootstrap-server',
      bootstrap,
      '--command-config',
      join(dir, `${user}.properties`),
    ],
    { timeoutMs: 30000 },
  )
}

test('add a PREFIXED ACL, list it by MATCH, remove it', async () => {
  const added = await acls('admin', [
    'add',
    '--allow-principal',
    'User:alice',
    '--operation',
    'Read',
    '--operation',
    'IdempotentWrite',
    '--topic',
    'orders.',
    '--resource-pattern-type',
    'prefixed',
  ])
  assert.equal(added.code, 0, added.stderr)
  assert.match(
    added.stdout,
    /Added \(principal=User:alice, host=\*, operation=READ, permissionType=ALLOW\) on TOPIC:PREFIXED:orders\./,
  )

  const listed = await acls('admin', [
    'list',
    '--topic',
    'orders.eu',
    '--resource-pattern-type',
    'match',
    '--json',
  ])
  assert.equal(listed.code, 0, listed.stderr)
  const found = JSON.parse(listed.stdout) as {
    resourceName: string
    operation: string
    patternType: string
  }[]
  assert.deepEqual(found.map((a) => `${a.patternType}:${a.resourceName}:${a.operation}`).sort(), [
    'PREFIXED:orders.:IDEMPOTENT_WRITE',
    'PREFIXED:orders.:READ',
  ])
  const table = await acls('admin', ['list'])
  assert.match(table.stdout, /TOPIC\s+orders\.\s+PREFIXED\s+User:alice\s+\*\s+READ\s+ALLOW/)

  const removed = await acls('admin', [
    'remove',
    '--topic',
    'orders.',
    '--resource-pattern-type',
    'prefixed',
    '--operation',
    'Read',
  ])
  assert.equal(removed.code, 0, removed.stderr)
  assert.match(removed.stdout, /Removed .*operation=READ/)
  const left = await acls('admin', ['list', '--json'])
  assert.deepEqual(
    (JSON.parse(left.stdout) as { operation: string }[]).map((a) => a.operation),
    ['IDEMPOTENT_WRITE'],
  )
})

test('a principal without ALTER on the cluster is refused; bad options are usage errors', async () => {
  const refused = await acls('alice', ['add', '--allow-principal', 'User:alice', '--topic', 'secret'])
  assert.equal(refused.code, 1)
  assert.match(refused.stderr, /CLUSTER_AUTHORIZATION_FAILED|Cluster authorization failed/)
  for (const bad of [
    ['add', '--allow-principal', 'alice', '--topic', 't'],
    ['add', '--allow-principal', 'User:alice', '--operation', 'Fly', '--topic', 't'],
    ['add', '--allow-principal', 'User:alice'],
    ['add', '--topic', 't'],
    ['add', '--allow-principal', 'User:alice', '--topic', 't', '--resource-pattern-type', 'match'],
    ['remove', '--allow-principal', 'User:alice'],
    ['grant'],
  ]) {
    const result = await acls('admin', bad)
    assert.equal(result.code, 2, `${bad.join(' ')}: ${result.stderr}`)
  }
})

test('a broker without an authorizer answers SECURITY_DISABLED', async () => {
  await withBroker(async (plain) => {
    const result = await run(process.execPath, [
      tidelogBin(),
      'acls',
      'list',
      '--bootstrap-server',
      plain.bootstrapServers,
    ])
    assert.equal(result.code, 1)
    assert.match(result.stderr, /SECURITY_DISABLED|Security features are disabled|No Authorizer/)
  })
})

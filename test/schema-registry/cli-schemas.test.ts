/**
 * `tidelog schemas` against a broker's registry: register from a file, list, get, check a
 * compatible and an incompatible schema (exit 1), set and read the level, and a registry
 * error printed with its Confluent code.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { startCluster, type TestCluster } from '../../src/testing/index.js'
import { spawnTidelog } from '../helpers/broker-process.js'
import { guardedLogger } from '../helpers/log-guard.js'

let cluster: TestCluster
let dir: string

before(async () => {
  cluster = await startCluster({ brokers: 1, schemaRegistry: true, logger: guardedLogger('schemas-cli') })
  dir = await mkdtemp(join(tmpdir(), 'tidelog-schemas-cli-'))
})
after(async () => {
  await cluster?.stop()
  await rm(dir, { recursive: true, force: true })
})

async function schemas(...args: string[]): Promise<{ code: number | null; stdout: string; lines: string[] }> {
  const child = spawnTidelog(['schemas', ...args, '--registry', cluster.schemaRegistryUrl])
  const { code } = await child.exited
  return { code, stdout: child.lines.join('\n'), lines: child.lines }
}

test('tidelog schemas: register, list, get, check, config', async () => {
  const v1 = join(dir, 'v1.avsc')
  await writeFile(v1, JSON.stringify({ type: 'record', name: 'U', fields: [{ name: 'a', type: 'string' }] }))
  const registered = await schemas('register', 'cli-value', '--file', v1)
  assert.equal(registered.code, 0, registered.stdout)
  assert.match(registered.stdout, /registered: id \d+/)

  const listed = await schemas('list', '--json')
  assert.equal(listed.code, 0, listed.stdout)
  assert.match(listed.stdout, /"subject": ?"cli-value"/)

  const got = await schemas('get', 'cli-value')
  assert.match(got.stdout, /"name":"U"/)

  const good = JSON.stringify({
    type: 'record',
    name: 'U',
    fields: [
      { name: 'a', type: 'string' },
      { name: 'b', type: 'int', default: 0 },
    ],
  })
  assert.equal((await schemas('check', 'cli-value', '--schema', good)).code, 0)
  const bad = JSON.stringify({ type: 'record', name: 'U', fields: [{ name: 'z', type: 'int' }] })
  const refused = await schemas('check', 'cli-value', '--schema', bad)
  assert.equal(refused.code, 1, refused.stdout)
  assert.match(refused.stdout, /incompatible/)

  assert.equal((await schemas('config', 'cli-value', '--set', 'FULL')).code, 0)
  assert.match((await schemas('config', 'cli-value')).stdout, /FULL/)

  const missing = await schemas('get', 'no-such-subject')
  assert.equal(missing.code, 1)
  assert.match(missing.stdout, /Subject 'no-such-subject' not found\. \(error code 40401\)/)
})

/**
 * Every compatibility level over the REST API, each with an Avro schema that passes it and
 * one that fails it: the history is registered under NONE, then the subject's level is set;
 * `POST /compatibility/subjects/{s}/versions` answers as the level says, and registering
 * the failing schema is 409 and adds no version while the passing one registers. The
 * _TRANSITIVE failures pass their plain level (only an older version refuses them).
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { startCluster, type TestCluster } from '../../src/testing/index.js'
import { guardedLogger } from '../helpers/log-guard.js'

const V1 = 'application/vnd.schemaregistry.v1+json'
let cluster: TestCluster

before(async () => {
  cluster = await startCluster({ brokers: 1, schemaRegistry: true, logger: guardedLogger('levels') })
})
after(() => cluster?.stop())

// biome-ignore lint/suspicious/noExplicitAny: replies are JSON checked field by field
async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(cluster.schemaRegistryUrl + path, {
    method,
    headers: { 'Content-Type': V1, Accept: V1 },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return { status: response.status, body: await response.json() }
}

type Field = { name: string; type: string; default?: unknown }
const name: Field = { name: 'name', type: 'string' }
const ageInt: Field = { name: 'age', type: 'int' }
const ageIntDefault: Field = { name: 'age', type: 'int', default: 0 }
const ageString: Field = { name: 'age', type: 'string' }
const ageStringDefault: Field = { name: 'age', type: 'string', default: '' }
const nickDefault: Field = { name: 'nick', type: 'string', default: '' }
const extra: Field = { name: 'extra', type: 'int' }
const user = (...fields: Field[]) => JSON.stringify({ type: 'record', name: 'User', fields })

interface Case {
  readonly level: string
  readonly history: readonly string[]
  readonly passes: string
  /** null: nothing parseable fails NONE. */
  readonly fails: string | null
}

const CASES: readonly Case[] = [
  { level: 'NONE', history: [user(name)], passes: '"string"', fails: null },
  // A new reader reads old data: a field added needs a default.
  { level: 'BACKWARD', history: [user(name)], passes: user(name, ageIntDefault), fails: user(name, ageInt) },
  // An old reader reads new data: it may not lose a field it has no default for.
  {
    level: 'FORWARD',
    history: [user(name, ageInt)],
    passes: user(name, ageInt, extra),
    fails: user(name),
  },
  { level: 'FULL', history: [user(name)], passes: user(name, ageIntDefault), fails: user(name, ageInt) },
  // Latest is {name}: `age` as int with a default reads it, but not v1's string `age`.
  {
    level: 'BACKWARD_TRANSITIVE',
    history: [user(name, ageString), user(name)],
    passes: user(name),
    fails: user(name, ageIntDefault),
  },
  // v1's reader (age: string) cannot read an int `age`; the latest ({name}) can.
  {
    level: 'FORWARD_TRANSITIVE',
    history: [user(name, ageString), user(name)],
    passes: user(name, ageString, extra),
    fails: user(name, ageInt),
  },
  {
    level: 'FULL_TRANSITIVE',
    history: [user(name, ageStringDefault), user(name)],
    passes: user(name, nickDefault),
    fails: user(name, ageIntDefault),
  },
]

for (const c of CASES) {
  test(`${c.level}: a schema that passes and one that fails`, async () => {
    const subject = `levels-${c.level.toLowerCase()}-value`
    assert.equal((await call('PUT', `/config/${subject}`, { compatibility: 'NONE' })).status, 200)
    for (const schema of c.history)
      assert.equal((await call('POST', `/subjects/${subject}/versions`, { schema })).status, 200)
    assert.equal((await call('PUT', `/config/${subject}`, { compatibility: c.level })).status, 200)
    const check = (schema: string) => call('POST', `/compatibility/subjects/${subject}/versions`, { schema })

    if (c.fails !== null) {
      assert.deepEqual((await check(c.fails)).body, { is_compatible: false })
      const refused = await call('POST', `/subjects/${subject}/versions`, { schema: c.fails })
      assert.equal(refused.status, 409)
      assert.equal(refused.body.error_code, 409)
      if (c.level.endsWith('_TRANSITIVE')) {
        // Against the latest version by its number alone it passes (`latest` checks every
        // version under a _TRANSITIVE level, as Confluent's does).
        const latest = await call('POST', `/compatibility/subjects/${subject}/versions/${c.history.length}`, {
          schema: c.fails,
        })
        assert.deepEqual(latest.body, { is_compatible: true }, 'only an older version refuses it')
      }
    }
    assert.deepEqual((await check(c.passes)).body, { is_compatible: true })
    const registered = await call('POST', `/subjects/${subject}/versions`, { schema: c.passes })
    assert.equal(registered.status, 200, JSON.stringify(registered.body))
    const versions = (await call('GET', `/subjects/${subject}/versions`)).body
    assert.equal(versions.length, c.history.length + (c.history.includes(c.passes) ? 0 : 1))
  })
}

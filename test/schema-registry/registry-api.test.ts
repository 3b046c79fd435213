/**
 * The schema registry's REST API on a real broker (tidelog/testing): Confluent's shapes and
 * error codes, bad input answered and nothing else changed, the same API under
 * /schema-registry/ of the HTTP listener, and a broker killed and restarted keeping every
 * schema without reusing an id.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { startCluster, type TestCluster } from '../../src/testing/index.js'
import { guardedLogger } from '../helpers/log-guard.js'

const V1 = 'application/vnd.schemaregistry.v1+json'

let cluster: TestCluster
let url: string

async function call(
  method: string,
  path: string,
  body?: unknown,
  options: { contentType?: string; base?: string } = {},
  // biome-ignore lint/suspicious/noExplicitAny: replies are JSON checked field by field
): Promise<{ status: number; body: any }> {
  const response = await fetch((options.base ?? url) + path, {
    method,
    headers: { 'Content-Type': options.contentType ?? V1, Accept: V1 },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  })
  const text = await response.text()
  assert.equal(response.headers.get('content-type'), V1)
  return { status: response.status, body: text === '' ? null : JSON.parse(text) }
}

const user = (...extra: object[]) =>
  JSON.stringify({ type: 'record', name: 'User', fields: [{ name: 'name', type: 'string' }, ...extra] })

before(async () => {
  cluster = await startCluster({
    brokers: 1,
    schemaRegistry: true,
    logger: guardedLogger('registry'),
    properties: { 'tidelog.http.listener': '127.0.0.1:0' },
  })
  url = cluster.schemaRegistryUrl
})
after(() => cluster?.stop())

test('register, look up, list and fetch by id and version, in Confluent shapes', async () => {
  assert.deepEqual((await call('GET', '/schemas/types')).body, ['JSON', 'PROTOBUF', 'AVRO'])
  const first = await call('POST', '/subjects/api-value/versions', { schema: user() })
  assert.equal(first.status, 200)
  assert.deepEqual(Object.keys(first.body), ['id'])
  const id = first.body.id as number
  // The same schema again: the same id, no new version.
  assert.deepEqual((await call('POST', '/subjects/api-value/versions', { schema: user() })).body, { id })
  const second = await call('POST', '/subjects/api-value/versions', {
    schema: user({ name: 'age', type: 'int', default: 0 }),
  })
  assert.equal(second.body.id, id + 1)
  assert.deepEqual((await call('GET', '/subjects/api-value/versions')).body, [1, 2])
  const latest = (await call('GET', '/subjects/api-value/versions/latest')).body
  assert.deepEqual(
    { subject: latest.subject, version: latest.version, id: latest.id },
    { subject: 'api-value', version: 2, id: id + 1 },
  )
  assert.equal(typeof latest.schema, 'string')
  assert.deepEqual((await call('GET', `/schemas/ids/${id}`)).body, { schema: user() })
  assert.deepEqual((await call('GET', `/schemas/ids/${id}/subjects`)).body, ['api-value'])
  assert.deepEqual((await call('GET', `/schemas/ids/${id}/versions`)).body, [
    { subject: 'api-value', version: 1 },
  ])
  const looked = (await call('POST', '/subjects/api-value', { schema: user() })).body
  assert.equal(looked.version, 1)
  assert.equal(looked.id, id)
  // Another subject with the same schema shares its id.
  assert.deepEqual((await call('POST', '/subjects/other-value/versions', { schema: user() })).body, { id })
  assert.ok((await call('GET', '/subjects')).body.includes('api-value'))
})

test('errors: 40401, 40402, 40403, 42201, 42202, 42203, 409 and unknown paths', async () => {
  const expect = async (method: string, path: string, body: unknown, status: number, code: number) => {
    const reply = await call(method, path, body)
    assert.equal(reply.status, status, `${method} ${path}: ${JSON.stringify(reply.body)}`)
    assert.equal(reply.body.error_code, code, `${method} ${path}: ${JSON.stringify(reply.body)}`)
    assert.equal(typeof reply.body.message, 'string')
  }
  await expect('GET', '/subjects/nobody/versions', undefined, 404, 40401)
  await expect('GET', '/subjects/nobody/versions/1', undefined, 404, 40401)
  await call('POST', '/subjects/err-value/versions', { schema: user() })
  await expect('GET', '/subjects/err-value/versions/9', undefined, 404, 40402)
  await expect('GET', '/schemas/ids/99999', undefined, 404, 40403)
  await expect(
    'POST',
    '/subjects/err-value',
    { schema: user({ name: 'x', type: 'int', default: 1 }) },
    404,
    40403,
  )
  await expect('POST', '/subjects/err-value/versions', { schema: '{"type": "record"' }, 422, 42201)
  await expect(
    'POST',
    '/subjects/err-value/versions',
    { schema: '{"type": "record", "name": "X"}' },
    422,
    42201,
  )
  await expect('POST', '/subjects/err-value/versions', { schema: 'x', schemaType: 'XML' }, 422, 42201)
  await expect('POST', '/subjects/err-value/versions', {}, 422, 42201)
  await expect('GET', '/subjects/err-value/versions/0', undefined, 422, 42202)
  await expect('GET', '/subjects/err-value/versions/abc', undefined, 422, 42202)
  await expect('PUT', '/config/err-value', { compatibility: 'SIDEWAYS' }, 422, 42203)
  await expect('POST', '/subjects/err-value/versions', { schema: user({ name: 'x', type: 'int' }) }, 409, 409)
  await expect('GET', '/no/such/path', undefined, 404, 404)
  await expect('PATCH', '/subjects', undefined, 405, 405)
  await expect(
    'POST',
    '/subjects/err-value/versions',
    { schema: user(), references: [{ name: 'Missing', subject: 'none', version: 1 }] },
    422,
    42201,
  )
  // Nothing of the failed requests was stored.
  assert.deepEqual((await call('GET', '/subjects/err-value/versions')).body, [1])
})

test('bad input: wrong content type, malformed JSON, a body over the limit; the broker keeps serving', async () => {
  const wrongType = await call(
    'POST',
    '/subjects/bad-value/versions',
    { schema: user() },
    { contentType: 'text/plain' },
  )
  assert.equal(wrongType.status, 415)
  assert.equal(wrongType.body.error_code, 415)
  const malformed = await call('POST', '/subjects/bad-value/versions', '{"schema": ')
  assert.equal(malformed.status, 400)
  assert.equal(malformed.body.error_code, 400)
  const huge = JSON.stringify({
    schema: JSON.stringify({ type: 'string', doc: 'x'.repeat(2 * 1024 * 1024) }),
  })
  const tooLarge = await call('POST', '/subjects/bad-value/versions', huge)
  assert.equal(tooLarge.status, 413)
  assert.equal(tooLarge.body.error_code, 413)
  assert.equal((await call('GET', '/subjects/bad-value/versions')).body.error_code, 40401)
  assert.deepEqual((await call('POST', '/subjects/bad-value/versions', { schema: '"string"' })).status, 200)
})

test('config and mode, global and per subject', async () => {
  assert.deepEqual((await call('GET', '/config')).body, { compatibilityLevel: 'BACKWARD' })
  assert.deepEqual((await call('PUT', '/config/cfg-value', { compatibility: 'NONE' })).body, {
    compatibility: 'NONE',
  })
  assert.deepEqual((await call('GET', '/config/cfg-value')).body, { compatibilityLevel: 'NONE' })
  assert.equal((await call('GET', '/config/unset-value')).body.error_code, 40408)
  assert.deepEqual((await call('GET', '/config/unset-value?defaultToGlobal=true')).body, {
    compatibilityLevel: 'BACKWARD',
  })
  // NONE: an incompatible schema registers.
  await call('POST', '/subjects/cfg-value/versions', { schema: user() })
  assert.equal((await call('POST', '/subjects/cfg-value/versions', { schema: '"int"' })).status, 200)
  assert.deepEqual((await call('DELETE', '/config/cfg-value')).body, { compatibilityLevel: 'NONE' })
  assert.equal((await call('POST', '/subjects/cfg-value/versions', { schema: '"string"' })).status, 409)

  assert.deepEqual((await call('GET', '/mode')).body, { mode: 'READWRITE' })
  assert.deepEqual((await call('PUT', '/mode/cfg-value', { mode: 'READONLY' })).body, { mode: 'READONLY' })
  const refused = await call('POST', '/subjects/cfg-value/versions', { schema: '"long"' })
  assert.equal(refused.body.error_code, 42205)
  assert.equal((await call('DELETE', '/subjects/cfg-value')).body.error_code, 42205)
  assert.deepEqual((await call('DELETE', '/mode/cfg-value')).body, { mode: 'READONLY' })
  assert.equal((await call('PUT', '/mode', { mode: 'IMPORT' })).body.error_code, 42205)
  assert.equal((await call('PUT', '/mode', { mode: 'SOMETIMES' })).body.error_code, 42204)
})

test('IMPORT mode registers under the given id and version', async () => {
  assert.deepEqual((await call('PUT', '/mode/imported?force=true', { mode: 'IMPORT' })).body, {
    mode: 'IMPORT',
  })
  const reply = await call('POST', '/subjects/imported/versions', { schema: '"bytes"', id: 5000, version: 7 })
  assert.deepEqual(reply.body, { id: 5000 })
  assert.deepEqual((await call('GET', '/subjects/imported/versions')).body, [7])
  await call('DELETE', '/mode/imported')
  // New ids go above imported ones.
  assert.equal((await call('POST', '/subjects/after-import/versions', { schema: '"float"' })).body.id, 5001)
})

test('compatibility checks, with verbose messages', async () => {
  await call('POST', '/subjects/compat-value/versions', { schema: user() })
  const ok = await call('POST', '/compatibility/subjects/compat-value/versions/latest', {
    schema: user({ name: 'a', type: 'int', default: 1 }),
  })
  assert.deepEqual(ok.body, { is_compatible: true })
  const bad = await call('POST', '/compatibility/subjects/compat-value/versions/1?verbose=true', {
    schema: user({ name: 'a', type: 'int' }),
  })
  assert.equal(bad.body.is_compatible, false)
  assert.ok(bad.body.messages.length > 0)
  assert.equal(
    (await call('POST', '/compatibility/subjects/compat-value/versions/4', { schema: user() })).body
      .error_code,
    40402,
  )
})

test('references: JSON Schema and Avro schemas that use another subject, deletion guarded', async () => {
  const address = JSON.stringify({ type: 'object', properties: { city: { type: 'string' } } })
  await call('POST', '/subjects/address/versions', { schemaType: 'JSON', schema: address })
  const person = JSON.stringify({ type: 'object', properties: { home: { $ref: 'address.json' } } })
  const registered = await call('POST', '/subjects/person-value/versions', {
    schemaType: 'JSON',
    schema: person,
    references: [{ name: 'address.json', subject: 'address', version: 1 }],
  })
  assert.equal(registered.status, 200, JSON.stringify(registered.body))
  const byId = (await call('GET', `/schemas/ids/${registered.body.id}`)).body
  assert.equal(byId.schemaType, 'JSON')
  assert.deepEqual(byId.references, [{ name: 'address.json', subject: 'address', version: 1 }])
  assert.deepEqual((await call('GET', '/subjects/address/versions/1/referencedby')).body, [
    registered.body.id,
  ])
  assert.equal((await call('DELETE', '/subjects/address/versions/1')).body.error_code, 42206)

  const avroAddress = JSON.stringify({
    type: 'record',
    name: 'Address',
    namespace: 'acme',
    fields: [{ name: 'c', type: 'string' }],
  })
  await call('POST', '/subjects/avro-address/versions', { schema: avroAddress })
  const avroPerson = JSON.stringify({
    type: 'record',
    name: 'P',
    namespace: 'acme',
    fields: [{ name: 'a', type: 'acme.Address' }],
  })
  const withRef = await call('POST', '/subjects/avro-person/versions', {
    schema: avroPerson,
    references: [{ name: 'acme.Address', subject: 'avro-address', version: 1 }],
  })
  assert.equal(withRef.status, 200, JSON.stringify(withRef.body))
})

test('deletes: soft then permanent, by subject and by version', async () => {
  await call('POST', '/subjects/del-value/versions', { schema: user() })
  await call('POST', '/subjects/del-value/versions', { schema: user({ name: 'a', type: 'int', default: 0 }) })
  assert.equal((await call('DELETE', '/subjects/del-value/versions/1?permanent=true')).body.error_code, 40407)
  assert.equal((await call('DELETE', '/subjects/del-value/versions/1')).body, 1)
  assert.equal((await call('DELETE', '/subjects/del-value/versions/1')).body.error_code, 40406)
  assert.deepEqual((await call('GET', '/subjects/del-value/versions')).body, [2])
  assert.deepEqual((await call('GET', '/subjects/del-value/versions?deleted=true')).body, [1, 2])
  assert.equal((await call('DELETE', '/subjects/del-value?permanent=true')).body.error_code, 40405)
  assert.deepEqual((await call('DELETE', '/subjects/del-value')).body, [2])
  assert.equal((await call('GET', '/subjects/del-value/versions')).body.error_code, 40401)
  assert.ok(!(await call('GET', '/subjects')).body.includes('del-value'))
  assert.ok((await call('GET', '/subjects?deleted=true')).body.includes('del-value'))
  assert.equal((await call('DELETE', '/subjects/del-value')).body.error_code, 40404)
  assert.deepEqual((await call('DELETE', '/subjects/del-value?permanent=true')).body, [1, 2])
  assert.ok(!(await call('GET', '/subjects?deleted=true')).body.includes('del-value'))
})

test('the same API under /schema-registry/ of the HTTP listener', async () => {
  const base = `${cluster.broker(0).httpUrl}schema-registry`
  const reply = await call('POST', '/subjects/http-value/versions', { schema: '"double"' }, { base })
  assert.equal(reply.status, 200)
  assert.deepEqual((await call('GET', '/subjects/http-value/versions', undefined, { base })).body, [1])
  assert.deepEqual((await call('GET', '/subjects/http-value/versions')).body, [1])
})

test('a broker killed and restarted keeps every schema and never reuses an id', async () => {
  await call('PUT', '/config/durable-value', { compatibility: 'NONE' })
  const before = (await call('POST', '/subjects/durable-value/versions', { schema: '"boolean"' })).body
    .id as number
  const subjects = (await call('GET', '/subjects')).body as string[]
  cluster.kill(0)
  await cluster.restart(0)
  assert.deepEqual((await call('GET', '/subjects')).body, subjects)
  assert.deepEqual((await call('GET', `/schemas/ids/${before}`)).body, { schema: '"boolean"' })
  const next = (await call('POST', '/subjects/durable-value/versions', { schema: '"null"' })).body
    .id as number
  assert.ok(next > before, `${next} > ${before}`)
  assert.deepEqual((await call('GET', '/subjects/durable-value/versions')).body, [1, 2])
})

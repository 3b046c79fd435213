/**
 * The `_schemas` topic in Confluent's key/value JSON: the store applies records as a
 * Confluent registry writes them (a dump of one, made by hand here), and a broker whose
 * `_schemas` topic was filled by another producer (a copy of a Confluent deployment's)
 * serves those schemas, config and deletions through the API.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { GLOBAL, SchemaStore } from '../../src/schema-registry/store.js'
import { startCluster } from '../../src/testing/index.js'
import { guardedLogger } from '../helpers/log-guard.js'

const userV1 = JSON.stringify({ type: 'record', name: 'User', fields: [{ name: 'n', type: 'string' }] })

/** A Confluent registry's records: two subjects, configs, a soft-deleted subject, a NOOP. */
const CONFLUENT_RECORDS: [string, string | null][] = [
  ['{"keytype":"NOOP","magic":0}', null],
  ['{"keytype":"CONFIG","subject":null,"magic":0}', '{"compatibilityLevel":"FULL"}'],
  [
    '{"keytype":"SCHEMA","subject":"users-value","version":1,"magic":1}',
    JSON.stringify({ subject: 'users-value', version: 1, id: 11, schema: userV1, deleted: false }),
  ],
  [
    '{"keytype":"SCHEMA","subject":"json-value","version":1,"magic":1}',
    JSON.stringify({
      subject: 'json-value',
      version: 1,
      id: 12,
      schemaType: 'JSON',
      schema: '{"type":"object"}',
      deleted: false,
    }),
  ],
  ['{"keytype":"CONFIG","subject":"json-value","magic":0}', '{"compatibilityLevel":"NONE"}'],
  [
    '{"keytype":"SCHEMA","subject":"gone-value","version":1,"magic":1}',
    JSON.stringify({ subject: 'gone-value', version: 1, id: 13, schema: '"string"', deleted: false }),
  ],
  ['{"keytype":"DELETE_SUBJECT","subject":"gone-value","magic":0}', '{"subject":"gone-value","version":1}'],
  ['{"keytype":"MODE","subject":null,"magic":0}', '{"mode":"READWRITE"}'],
  ['not json', '{}'],
]

test('the store applies a Confluent registry’s records', () => {
  const store = new SchemaStore()
  for (const [key, value] of CONFLUENT_RECORDS) store.apply(key, value)
  assert.equal(store.maxId, 13)
  assert.equal(store.configs.get(GLOBAL), 'FULL')
  assert.equal(store.configs.get('json-value'), 'NONE')
  assert.equal(store.modes.get(GLOBAL), 'READWRITE')
  assert.equal(store.subjects.get('users-value')?.get(1)?.id, 11)
  assert.equal(store.subjects.get('json-value')?.get(1)?.schemaType, 'JSON')
  assert.equal(store.subjects.get('gone-value')?.get(1)?.deleted, true)
  assert.equal(store.skipped, 1)
  // A tombstone of a version removes it, and its id once no version holds it.
  store.apply('{"keytype":"SCHEMA","subject":"gone-value","version":1,"magic":1}', null)
  assert.equal(store.subjects.has('gone-value'), false)
  assert.equal(store.schemaById(13), undefined)
  assert.equal(store.maxId, 13)
  // A record giving a known id to another schema is a conflict: the first keeps it.
  store.apply(
    '{"keytype":"SCHEMA","subject":"x","version":1,"magic":1}',
    JSON.stringify({ subject: 'x', version: 1, id: 11, schema: '"int"', deleted: false }),
  )
  assert.equal(store.conflicts, 1)
  assert.equal(store.schemaById(11)?.schema, userV1)
})

test('a _schemas topic filled by another producer is served, and new ids go above its ids', async () => {
  const cluster = await startCluster({ brokers: 1, schemaRegistry: true, logger: guardedLogger('import') })
  try {
    await cluster.createTopic({ name: '_schemas', partitions: 1, configs: { 'cleanup.policy': 'compact' } })
    const kafka = new Kafka({ brokers: [cluster.bootstrapServers], logLevel: logLevel.NOTHING })
    const producer = kafka.producer()
    await producer.connect()
    await producer.send({
      topic: '_schemas',
      messages: CONFLUENT_RECORDS.map(([key, value]) => ({ key, value })),
    })
    await producer.disconnect()
    const url = cluster.schemaRegistryUrl
    const get = async (path: string) => (await fetch(url + path)).json()
    assert.deepEqual(await get('/subjects'), ['json-value', 'users-value'])
    assert.deepEqual(await get('/subjects?deleted=true'), ['gone-value', 'json-value', 'users-value'])
    assert.deepEqual(await get('/schemas/ids/12'), { schemaType: 'JSON', schema: '{"type":"object"}' })
    assert.deepEqual(await get('/config'), { compatibilityLevel: 'FULL' })
    const reply = await fetch(`${url}/subjects/new-value/versions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/vnd.schemaregistry.v1+json' },
      body: JSON.stringify({ schema: '"bytes"' }),
    })
    assert.deepEqual(await reply.json(), { id: 14 })
  } finally {
    await cluster.stop()
  }
})

/**
 * A real client, unchanged: @kafkajs/confluent-schema-registry registers Avro, JSON Schema
 * and Protobuf schemas with tidelog's registry, encodes records in Confluent's wire format
 * (magic byte, schema id, payload), kafkajs produces them to tidelog and consumes them back,
 * and the client decodes them by id, fetched from another broker's registry. A 3-broker
 * cluster: registrations sent to every broker reach the one writer (the leader of
 * `_schemas` partition 0) and ids stay unique.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry'
import { Kafka, logLevel } from 'kafkajs'
import { startCluster, type TestCluster } from '../../src/testing/index.js'
import { guardedLogger } from '../helpers/log-guard.js'

let cluster: TestCluster

before(async () => {
  cluster = await startCluster({
    brokers: 3,
    schemaRegistry: true,
    logger: guardedLogger('registry-client'),
    topics: [{ name: 'users', partitions: 1, replicationFactor: 3 }],
  })
})
after(() => cluster?.stop())

async function roundTrip(topic: string, values: Buffer[]): Promise<Buffer[]> {
  const kafka = new Kafka({ brokers: cluster.bootstrapServers.split(','), logLevel: logLevel.NOTHING })
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic, messages: values.map((value) => ({ value })) })
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: `g-${topic}-${values.length}` })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const received: Buffer[] = []
  await new Promise<void>((resolve, reject) => {
    consumer
      .run({
        eachMessage: async ({ message }) => {
          if (message.value) received.push(message.value)
          if (received.length >= values.length) resolve()
        },
      })
      .catch(reject)
  })
  await consumer.disconnect()
  return received
}

test('Avro: register, encode, produce, consume, decode through kafkajs', async () => {
  // `_schemas` made here so its leader (the writer) is known before any registry opens: the
  // first registration goes to another broker, and must open the writer's registry to land.
  await cluster.createTopic({ name: '_schemas', partitions: 1, configs: { 'cleanup.policy': 'compact' } })
  const writer = cluster.leaderOf('_schemas', 0)
  const registry = new SchemaRegistry({ host: cluster.schemaRegistryUrlOf((writer + 1) % 3) })
  const schema = {
    type: 'record',
    name: 'User',
    namespace: 'acme',
    fields: [
      { name: 'name', type: 'string' },
      { name: 'age', type: 'int' },
    ],
  }
  const { id } = await registry.register(
    { type: SchemaType.AVRO, schema: JSON.stringify(schema) },
    { subject: 'users-value' },
  )
  assert.equal(await registry.getLatestSchemaId('users-value'), id)
  const records = [
    { name: 'ada', age: 36 },
    { name: 'alan', age: 41 },
  ]
  const encoded = await Promise.all(records.map((r) => registry.encode(id, r)))
  assert.equal(encoded[0][0], 0) // Confluent's magic byte
  assert.equal(encoded[0].readInt32BE(1), id)
  const consumed = await roundTrip('users', encoded)
  // Decoded by a client of another broker's registry: it fetches the schema by id there.
  const reader = new SchemaRegistry({ host: cluster.schemaRegistryUrlOf((writer + 2) % 3) })
  const decoded = await Promise.all(consumed.map((b) => reader.decode(b)))
  assert.deepEqual(
    decoded.map((d) => ({ ...d })),
    records,
  )
  // An evolution with a default is BACKWARD compatible; one without is refused (409).
  const evolved = { ...schema, fields: [...schema.fields, { name: 'email', type: 'string', default: '' }] }
  const second = await registry.register(
    { type: SchemaType.AVRO, schema: JSON.stringify(evolved) },
    { subject: 'users-value' },
  )
  assert.notEqual(second.id, id)
  const broken = { ...schema, fields: [...schema.fields, { name: 'phone', type: 'string' }] }
  await assert.rejects(
    registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(broken) }, { subject: 'users-value' }),
    (error: Error & { status?: number }) => error.status === 409 || /409|incompatible/i.test(error.message),
  )
})

test('JSON Schema and Protobuf: register, encode and decode', async () => {
  const registry = new SchemaRegistry({ host: cluster.schemaRegistryUrlOf(1) })
  const jsonSchema = {
    type: 'object',
    properties: { sku: { type: 'string' }, qty: { type: 'integer' } },
    required: ['sku'],
    additionalProperties: false,
  }
  const json = await registry.register(
    { type: SchemaType.JSON, schema: JSON.stringify(jsonSchema) },
    { subject: 'orders-json-value' },
  )
  const order = { sku: 'a-1', qty: 2 }
  const [consumed] = await roundTrip('orders-json', [await registry.encode(json.id, order)])
  assert.deepEqual(await registry.decode(consumed), order)
  await assert.rejects(registry.encode(json.id, { qty: 'two' })) // the client validates against it

  const proto = 'syntax = "proto3";\npackage acme;\nmessage Order {\n  string sku = 1;\n  int32 qty = 2;\n}\n'
  const pb = await registry.register(
    { type: SchemaType.PROTOBUF, schema: proto },
    { subject: 'orders-pb-value' },
  )
  const [pbConsumed] = await roundTrip('orders-pb', [await registry.encode(pb.id, order)])
  assert.deepEqual({ ...(await registry.decode(pbConsumed)) }, order)
})

test('registrations through every broker get unique ids from the one writer', async () => {
  const clients = cluster.brokerIds.map((id) => new SchemaRegistry({ host: cluster.schemaRegistryUrlOf(id) }))
  const ids = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      clients[i % clients.length].register(
        { type: SchemaType.AVRO, schema: JSON.stringify({ type: 'fixed', name: `F${i}`, size: i + 1 }) },
        { subject: `many-${i}` },
      ),
    ),
  )
  const unique = new Set(ids.map((r) => r.id))
  assert.equal(unique.size, ids.length)
  for (const client of clients) assert.equal(await client.getLatestSchemaId('many-5'), ids[5].id)
})

test('the writer killed: another broker takes over writes, nothing is lost and no id repeats', async () => {
  const writer = cluster.leaderOf('_schemas', 0)
  const survivor = (writer + 1) % 3
  const client = new SchemaRegistry({ host: cluster.schemaRegistryUrlOf(survivor) })
  const before = await Promise.all(
    ['users-value', 'orders-json-value', 'orders-pb-value'].map((s) => client.getLatestSchemaId(s)),
  )
  cluster.kill(writer)
  // Until the controller moves _schemas' leadership (the session expires in 3 s), writes fail.
  const schema = {
    type: SchemaType.AVRO as const,
    schema: JSON.stringify({ type: 'enum', name: 'E', symbols: ['A'] }),
  }
  const deadline = Date.now() + 30_000
  let registered: { id: number } | null = null
  while (!registered) {
    registered = await client.register(schema, { subject: 'after-failover' }).catch((error: Error) => {
      if (Date.now() > deadline) throw error
      return null
    })
    if (!registered) await new Promise((resolve) => setTimeout(resolve, 250))
  }
  assert.notEqual(cluster.leaderOf('_schemas', 0), writer)
  const all = await client.getLatestSchemaId('many-11')
  assert.ok(registered.id > Math.max(...before, all), `${registered.id} above every earlier id`)
  for (const [i, subject] of ['users-value', 'orders-json-value', 'orders-pb-value'].entries())
    assert.equal(await client.getLatestSchemaId(subject), before[i])
  await cluster.restart(writer)
})

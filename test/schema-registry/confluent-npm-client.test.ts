/**
 * A real client from npm, unchanged: Confluent's own JavaScript registry client
 * @confluentinc/schemaregistry (SchemaRegistryClient, AvroSerializer, JsonSerializer,
 * ProtobufSerializer and their deserializers) against tidelog's registry, the records
 * produced to and consumed from tidelog with kafkajs. Its Protobuf serializer registers
 * .proto text it prints from a @bufbuild/protobuf descriptor; its deserializer reads the
 * writer's schema back and parses it.
 *
 * Loaded with require (the package is CommonJS): its @bufbuild/protobuf is the one it
 * resolves, so the message descriptors built here are the ones its serializers know.
 */
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { after, before, test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { startCluster, type TestCluster } from '../../src/testing/index.js'
import { guardedLogger } from '../helpers/log-guard.js'

/** Pinned as a devDependency at 1.10.1. */
const MODULE = '@confluentinc/schemaregistry'

// biome-ignore lint/suspicious/noExplicitAny: the package is loaded untyped (see above)
type Untyped = any

const load = createRequire(import.meta.url)
let sr: Untyped
let buf: Untyped
let bufCodegen: Untyped
let cluster: TestCluster

before(async () => {
  sr = load(MODULE)
  const beside = createRequire(load.resolve(MODULE))
  buf = beside('@bufbuild/protobuf')
  bufCodegen = beside('@bufbuild/protobuf/codegenv2')
  cluster = await startCluster({
    brokers: 1,
    schemaRegistry: true,
    logger: guardedLogger('confluent-npm-registry'),
  })
})
after(() => cluster?.stop())

const client = () => new sr.SchemaRegistryClient({ baseURLs: [cluster.schemaRegistryUrl] })

async function roundTrip(topic: string, values: Buffer[]): Promise<Buffer[]> {
  const kafka = new Kafka({ brokers: cluster.bootstrapServers.split(','), logLevel: logLevel.NOTHING })
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic, messages: values.map((value) => ({ value })) })
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: `g-${topic}` })
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

const USER_V1 = JSON.stringify({
  type: 'record',
  name: 'User',
  namespace: 'acme',
  fields: [
    { name: 'name', type: 'string' },
    { name: 'age', type: 'int' },
  ],
})

test('SchemaRegistryClient: register, look up, compatibility, config, delete', async () => {
  const registry = client()
  const subject = 'npm-api-value'
  const id = await registry.register(subject, { schemaType: 'AVRO', schema: USER_V1 })
  const latest = await registry.getLatestSchemaMetadata(subject)
  assert.equal(latest.id, id)
  assert.equal(latest.version, 1)
  assert.equal((await registry.getBySubjectAndId(subject, id)).schema, USER_V1)
  assert.ok((await registry.getAllSubjects()).includes(subject))
  const withDefault = JSON.parse(USER_V1)
  withDefault.fields.push({ name: 'email', type: 'string', default: '' })
  const withoutDefault = JSON.parse(USER_V1)
  withoutDefault.fields.push({ name: 'city', type: 'string' })
  const info = (schema: unknown) => ({ schemaType: 'AVRO', schema: JSON.stringify(schema) })
  assert.equal(await registry.testSubjectCompatibility(subject, info(withDefault)), true)
  assert.equal(await registry.testSubjectCompatibility(subject, info(withoutDefault)), false)
  await assert.rejects(registry.register(subject, info(withoutDefault)), (error: Untyped) => {
    assert.equal(error.status, 409)
    return true
  })
  await registry.updateConfig(subject, { compatibility: 'NONE' })
  assert.equal((await registry.getConfig(subject)).compatibilityLevel, 'NONE')
  await registry.register(subject, info(withoutDefault))
  assert.deepEqual(await registry.deleteSubject(subject, false), [1, 2])
  assert.deepEqual(await registry.deleteSubject(subject, true), [1, 2])
})

test('Avro and JSON Schema serdes through kafkajs', async () => {
  const registry = client()
  const avroSer = new sr.AvroSerializer(registry, sr.SerdeType.VALUE, { useLatestVersion: true })
  await registry.register('npm-avro-value', { schemaType: 'AVRO', schema: USER_V1 })
  const users = [
    { name: 'ada', age: 36 },
    { name: 'alan', age: 41 },
  ]
  const avro = await roundTrip(
    'npm-avro',
    await Promise.all(users.map((u) => avroSer.serialize('npm-avro', u))),
  )
  const avroDe = new sr.AvroDeserializer(client(), sr.SerdeType.VALUE, {})
  // avsc decodes records as instances of the record's class: compared as plain data.
  const decodedUsers = await Promise.all(avro.map((b) => avroDe.deserialize('npm-avro', b)))
  assert.deepEqual(
    decodedUsers.map((u) => ({ ...u })),
    users,
  )

  const orderSchema = JSON.stringify({
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'Order',
    type: 'object',
    properties: { id: { type: 'integer' }, item: { type: 'string' } },
    required: ['id'],
  })
  await registry.register('npm-json-value', { schemaType: 'JSON', schema: orderSchema })
  const jsonSer = new sr.JsonSerializer(registry, sr.SerdeType.VALUE, {
    useLatestVersion: true,
    validate: true,
  })
  const orders = [
    { id: 1, item: 'tea' },
    { id: 2, item: 'cake' },
  ]
  const json = await roundTrip(
    'npm-json',
    await Promise.all(orders.map((o) => jsonSer.serialize('npm-json', o))),
  )
  const jsonDe = new sr.JsonDeserializer(client(), sr.SerdeType.VALUE, {})
  assert.deepEqual(await Promise.all(json.map((b) => jsonDe.deserialize('npm-json', b))), orders)
  await assert.rejects(jsonSer.serialize('npm-json', { item: 'no id' }))
})

/** acme.Payment { string id = 1; double amount = 2; } as a serialized FileDescriptorProto. */
const PAYMENT_FILE =
  'Cg1wYXltZW50LnByb3RvEgRhY21lIiUKB1BheW1lbnQSCgoCaWQYASABKAkSDgoGYW1vdW50GAIgASgBYgZwcm90bzM'

test('Protobuf serdes through kafkajs, auto-registered', async () => {
  const file = bufCodegen.fileDesc(PAYMENT_FILE)
  const Payment = bufCodegen.messageDesc(file, 0)
  const registry = client()
  const ser = new sr.ProtobufSerializer(registry, sr.SerdeType.VALUE, {
    autoRegisterSchemas: true,
    registry: buf.createMutableRegistry(Payment),
  })
  const payments = [
    buf.create(Payment, { id: 'p1', amount: 9.5 }),
    buf.create(Payment, { id: 'p2', amount: 1.25 }),
  ]
  const encoded = await Promise.all(payments.map((p) => ser.serialize('npm-proto', p)))
  assert.equal(encoded[0][0], 0)
  const id = encoded[0].readInt32BE(1)
  const stored = await registry.getLatestSchemaMetadata('npm-proto-value')
  assert.equal(stored.id, id)
  assert.equal(stored.schemaType, 'PROTOBUF')
  const consumed = await roundTrip('npm-proto', encoded)
  const de = new sr.ProtobufDeserializer(client(), sr.SerdeType.VALUE, {})
  const decoded = await Promise.all(consumed.map((b) => de.deserialize('npm-proto', b)))
  assert.deepEqual(
    decoded.map((p: Untyped) => [p.id, p.amount]),
    [
      ['p1', 9.5],
      ['p2', 1.25],
    ],
  )
})

/**
 * The schema registry where the broker's security is on: HTTPS with the broker's
 * certificates on its own listener, HTTP basic auth against the cluster's SASL users (a PLAIN
 * JAAS user and a SCRAM credential), and the Kafka ACLs mapped to subjects (auth.ts: a
 * subject's topic under TopicNameStrategy; DESCRIBE to read, WRITE to register, the cluster's
 * DESCRIBE_CONFIGS/ALTER_CONFIGS for the global config). The registry's own client reaches
 * `_schemas` over the SASL inter-broker listener as the super user `admin`.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { request } from 'node:https'
import { after, before, test } from 'node:test'
import {
  type AclBinding,
  AclOperation,
  AclPermissionType,
  PatternType,
  ResourceType,
} from '../../src/security/authorizer/acl.js'
import { credentialFromSaltedPassword, saltedPassword } from '../../src/security/scram.js'
import type { Broker } from '../../src/server/broker.js'
import { makeTestCerts, type TestCerts } from '../helpers/certs.js'
import { type Cluster, startBroker } from '../helpers/cluster.js'
import { waitUntil } from '../helpers/wait.js'
import { securedBrokerProperties } from '../security/helpers.js'

const V1 = 'application/vnd.schemaregistry.v1+json'
const JAAS =
  'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_bob="bob-secret";'

let certs: TestCerts
let cluster: Cluster
let broker: Broker
let url: string

type Credentials = readonly [user: string, password: string] | null

// biome-ignore lint/suspicious/noExplicitAny: replies are JSON checked field by field
type Reply = { status: number; body: any; headers: Record<string, string | string[] | undefined> }

/** One HTTPS request trusting the test CA (node:https: fetch cannot be given a CA). */
function call(
  method: string,
  path: string,
  credentials: Credentials,
  body?: unknown,
  options: { ca?: string | null; base?: string } = {},
): Promise<Reply> {
  const target = new URL(path, options.base ?? url)
  const text = body === undefined ? undefined : JSON.stringify(body)
  return new Promise((resolve, reject) => {
    const req = request(
      target,
      {
        method,
        ...(options.ca === null ? {} : { ca: options.ca ?? certs.caPem }),
        headers: {
          'Content-Type': V1,
          Accept: V1,
          ...(credentials === null
            ? {}
            : { Authorization: `Basic ${Buffer.from(credentials.join(':')).toString('base64')}` }),
        },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => {
          const raw = Buffer.concat(chunks).toString('utf8')
          resolve({
            status: res.statusCode ?? 0,
            body: raw === '' ? null : JSON.parse(raw),
            headers: res.headers,
          })
        })
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end(text)
  })
}

const ADMIN = ['admin', 'admin-secret'] as const
const BOB = ['bob', 'bob-secret'] as const
const CAROL = ['carol', 'carol-scram-secret'] as const

const record = (name: string, ...fields: string[]) =>
  JSON.stringify({
    type: 'record',
    name,
    fields: [{ name: 'id', type: 'string' }, ...fields.map((f) => ({ name: f, type: 'string' }))],
  })

function acl(
  principal: string,
  operation: AclOperation,
  topic: string,
  permissionType: AclPermissionType = AclPermissionType.ALLOW,
): AclBinding {
  return {
    resourceType: ResourceType.TOPIC,
    resourceName: topic,
    patternType: PatternType.LITERAL,
    principal,
    host: '*',
    operation,
    permissionType,
  }
}

before(async () => {
  certs = await makeTestCerts()
  cluster = await startBroker({
    properties: securedBrokerProperties(certs, {
      'listener.name.sasl_plaintext.plain.sasl.jaas.config': JAAS,
      'inter.broker.listener.name': 'SASL_PLAINTEXT',
      'sasl.mechanism.inter.broker.protocol': 'PLAIN',
      'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
      'super.users': 'User:admin',
      'tidelog.schema.registry.listener': 'https://127.0.0.1:0',
      'tidelog.http.listener': '127.0.0.1:0',
    }),
  })
  broker = cluster.brokers[0]
  url = broker.schemaRegistryUrl!
  // carol is a SCRAM user only, written to the store as AlterUserScramCredentials does.
  const salt = randomBytes(16)
  await broker.scramCredentials.alter([
    {
      type: 'upsert',
      user: 'carol',
      mechanism: 'SCRAM-SHA-512',
      credential: credentialFromSaltedPassword(
        'SCRAM-SHA-512',
        saltedPassword('SCRAM-SHA-512', CAROL[1], salt, 4096),
        salt,
        4096,
      ),
    },
  ])
})

after(async () => {
  await cluster?.stop()
  await certs?.cleanup()
})

test('the registry listener is HTTPS with the broker certificate', async () => {
  assert.match(url, /^https:\/\/127\.0\.0\.1:\d+$/)
  // Not trusted without the test CA: it is the broker's certificate, signed by that CA.
  await assert.rejects(call('GET', '/subjects', ADMIN, undefined, { ca: null }), /self[- ]signed|unable to/i)
  const reply = await call('GET', '/schemas/types', ADMIN)
  assert.equal(reply.status, 200)
})

test('no credentials, a wrong password or an unknown user: 401 with a Basic challenge', async () => {
  for (const credentials of [null, ['admin', 'wrong'], ['carol', 'wrong'], ['nobody', 'x']] as const) {
    const reply = await call('GET', '/subjects', credentials)
    assert.equal(reply.status, 401, String(credentials))
    assert.deepEqual(reply.body, { error_code: 401, message: 'Unauthorized' })
    assert.equal(reply.headers['www-authenticate'], 'Basic realm="SchemaRegistry"')
  }
  // Not even a registration gets through, and nothing was stored.
  const denied = await call('POST', '/subjects/orders-value/versions', ['admin', 'nope'], {
    schema: record('Order'),
  })
  assert.equal(denied.status, 401)
  assert.deepEqual((await call('GET', '/subjects', ADMIN)).body, [])
})

test('the same security under /schema-registry/ of the HTTP listener', async () => {
  const base = `${broker.httpUrl!.replace(/\/$/, '')}/schema-registry/`
  const anonymous = await fetch(`${base}subjects`)
  assert.equal(anonymous.status, 401)
  const admin = await fetch(`${base}subjects`, {
    headers: { Authorization: `Basic ${Buffer.from(ADMIN.join(':')).toString('base64')}` },
  })
  assert.equal(admin.status, 200)
})

test('ACLs on the subject topic: read, register, deny, listings filtered, global config', async () => {
  // The super user registers three subjects (over the SASL inter-broker listener inside).
  const orders = await call('POST', '/subjects/orders-value/versions', ADMIN, { schema: record('Order') })
  assert.equal(orders.status, 200, JSON.stringify(orders.body))
  const secret = await call('POST', '/subjects/secret-value/versions', ADMIN, { schema: record('Secret') })
  assert.equal(secret.status, 200, JSON.stringify(secret.body))

  // No ACL yet: carol (SCRAM) authenticates but may read nothing.
  assert.deepEqual((await call('GET', '/subjects', CAROL)).body, [])
  const noRead = await call('GET', '/subjects/orders-value/versions', CAROL)
  assert.equal(noRead.status, 403)
  assert.deepEqual(noRead.body, {
    error_code: 40301,
    message: 'User is denied operation Read on Subject: orders-value',
  })
  assert.equal((await call('GET', `/schemas/ids/${orders.body.id}`, CAROL)).status, 403)

  await broker.acls!.create([
    acl('User:carol', AclOperation.READ, 'orders'),
    acl('User:carol', AclOperation.WRITE, 'payments'),
    acl('User:bob', AclOperation.ALL, '*'),
    acl('User:bob', AclOperation.DESCRIBE, 'secret', AclPermissionType.DENY),
  ])
  await waitUntil(
    'the ACLs reach the authorizer',
    15_000,
    async () => (await call('GET', '/subjects/orders-value/versions', CAROL)).status === 200,
    100,
  )

  // READ on the topic: carol reads the subject and its schema by id, but may not register.
  assert.deepEqual((await call('GET', '/subjects/orders-value/versions/latest', CAROL)).body.version, 1)
  assert.equal((await call('GET', `/schemas/ids/${orders.body.id}`, CAROL)).status, 200)
  const lookup = await call('POST', '/subjects/orders-value', CAROL, { schema: record('Order') })
  assert.equal(lookup.status, 200)
  const registerDenied = await call('POST', '/subjects/orders-value/versions', CAROL, {
    schema: record('Order', 'note'),
  })
  assert.equal(registerDenied.status, 403)
  assert.equal(registerDenied.body.error_code, 40301)
  assert.equal((await call('DELETE', '/subjects/orders-value', CAROL)).status, 403)
  assert.equal((await call('GET', '/subjects/orders-value/versions', CAROL)).body.length, 1)
  // WRITE on payments: she registers there (a producer's auto-registration).
  const payments = await call('POST', '/subjects/payments-value/versions', CAROL, {
    schema: record('Payment'),
  })
  assert.equal(payments.status, 200, JSON.stringify(payments.body))
  assert.deepEqual((await call('GET', '/subjects', CAROL)).body.sort(), ['orders-value', 'payments-value'])

  // bob may do all on every topic but DESCRIBE on `secret`: the DENY wins for that subject.
  assert.deepEqual((await call('GET', '/subjects', BOB)).body.sort(), ['orders-value', 'payments-value'])
  const secretDenied = await call('GET', '/subjects/secret-value/versions', BOB)
  assert.equal(secretDenied.status, 403)
  assert.equal(secretDenied.body.error_code, 40301)
  assert.equal((await call('GET', `/schemas/ids/${secret.body.id}`, BOB)).status, 403)
  assert.equal((await call('GET', `/schemas/ids/${secret.body.id}/subjects`, BOB)).status, 403)
  assert.equal((await call('GET', '/subjects/orders-value/versions', BOB)).status, 200)
  // A subject's config: ALL on the topic includes ALTER_CONFIGS.
  assert.equal((await call('PUT', '/config/orders-value', BOB, { compatibility: 'FULL' })).status, 200)
  assert.equal((await call('PUT', '/config/orders-value', CAROL, { compatibility: 'NONE' })).status, 403)

  // The global config is the cluster's: bob and carol have no cluster ACL, admin is super.
  const globalDenied = await call('PUT', '/config', BOB, { compatibility: 'NONE' })
  assert.equal(globalDenied.status, 403)
  assert.deepEqual(globalDenied.body, {
    error_code: 40301,
    message: 'User is denied operation WriteCompatibility on Global',
  })
  assert.equal((await call('GET', '/mode', CAROL)).status, 403)
  assert.equal((await call('PUT', '/config', ADMIN, { compatibility: 'FORWARD' })).status, 200)
  assert.deepEqual((await call('GET', '/config', ADMIN)).body, { compatibilityLevel: 'FORWARD' })
  // A wrong password after a right one (a remembered check) is still refused.
  assert.equal((await call('GET', '/subjects', ['carol', 'carol-scram-secreT'])).status, 401)
  // What the denied calls tried is not stored.
  assert.deepEqual((await call('GET', '/subjects/secret-value/versions', ADMIN)).body, [1])
  assert.deepEqual((await call('GET', '/config/orders-value', ADMIN)).body, { compatibilityLevel: 'FULL' })
})

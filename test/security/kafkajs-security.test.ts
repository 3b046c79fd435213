/**
 * Issue 16: named listeners with TLS and SASL, driven by kafkajs. One broker serves
 * PLAINTEXT (for the admin that creates SCRAM users), SSL, SASL_SSL and SASL_PLAINTEXT;
 * each client gets the endpoints of the listener it dialled, and produces and consumes
 * through it. Certificates come from openssl in a temporary directory.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { connect as tlsConnect } from 'node:tls'
import { Kafka, type KafkaConfig, logLevel } from 'kafkajs'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey, apis, loadAllApiCodecs, type MetadataResponse } from '../../src/protocol/generated/index.js'
import type { Cluster } from '../../src/server/cluster.js'
import { makeTestCerts, type TestCerts } from '../helpers/certs.js'
import { startBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { createScramUser, securedBrokerProperties } from './helpers.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

let certs: TestCerts
let cluster: Cluster

before(async () => {
  certs = await makeTestCerts()
  cluster = await startBroker({ properties: securedBrokerProperties(certs) })
  await createScramUser(cluster, 'scram-user', 'scram-secret', ['SCRAM-SHA-256', 'SCRAM-SHA-512'])
})

after(async () => {
  await cluster?.stop()
  await certs?.cleanup()
})

function address(listener: string): string {
  return cluster.brokers[0].listenerAddress(listener)
}

async function roundTrip(
  config: Omit<KafkaConfig, 'brokers'>,
  listener: string,
  topic: string,
): Promise<string[]> {
  const kafka = new Kafka({
    clientId: `security-${topic}`,
    brokers: [address(listener)],
    logLevel: logLevel.NOTHING,
    retry: { retries: 5, initialRetryTime: 100 },
    ...config,
  })
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true })
  await admin.disconnect()
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic, acks: -1, messages: ['one', 'two', 'three'].map((value) => ({ value })) })
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: `group-${topic}` })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const values: string[] = []
  await new Promise<void>((resolve, reject) => {
    consumer
      .run({
        eachMessage: async ({ message }) => {
          values.push(message.value!.toString())
          if (values.length === 3) resolve()
        },
      })
      .catch(reject)
  })
  await consumer.disconnect()
  return values
}

test('Metadata answers each client with the endpoints of the listener it connected to', async () => {
  for (const listener of ['PLAINTEXT', 'SASL_PLAINTEXT']) {
    const [, port] = address(listener).split(':')
    const client = await RawClient.connect(Number(port))
    try {
      if (listener === 'SASL_PLAINTEXT') {
        // Before authentication only ApiVersions and SaslHandshake are served: Metadata closes it.
        client.write(
          RawClient.frame(ApiKey.Metadata, 1, 1, {
            ...(apis.get(ApiKey.Metadata)!.defaultRequest() as object),
            topics: null,
          }),
        )
        assert.equal(
          await client.waitClosed(),
          true,
          'an unauthenticated Metadata request closes the connection',
        )
        continue
      }
      const response = await rawCall<MetadataResponse>(client, ApiKey.Metadata, 1, { topics: null })
      assert.deepEqual(
        response.brokers.map((b) => `${b.host}:${b.port}`),
        [address('PLAINTEXT')],
      )
    } finally {
      client.socket.destroy()
    }
  }
})

test('kafkajs over SSL (PEM key store file) produces and consumes, told the SSL port', async () => {
  const values = await roundTrip({ ssl: { ca: [certs.caPem] } }, 'SSL', 'over-ssl')
  assert.deepEqual(values, ['one', 'two', 'three'])
})

for (const [mechanism, username, password] of [
  ['plain', 'alice', 'alice-secret'],
  ['scram-sha-256', 'scram-user', 'scram-secret'],
  ['scram-sha-512', 'scram-user', 'scram-secret'],
] as const) {
  test(`kafkajs SASL_SSL ${mechanism} produces and consumes as its user`, async () => {
    const values = await roundTrip(
      { ssl: { ca: [certs.caPem] }, sasl: { mechanism, username, password } as KafkaConfig['sasl'] },
      'SASL_SSL',
      `sasl-ssl-${mechanism}`,
    )
    assert.deepEqual(values, ['one', 'two', 'three'])
  })
}

test('kafkajs SASL_PLAINTEXT scram-sha-512 produces and consumes', async () => {
  const values = await roundTrip(
    { sasl: { mechanism: 'scram-sha-512', username: 'scram-user', password: 'scram-secret' } },
    'SASL_PLAINTEXT',
    'sasl-plaintext-scram',
  )
  assert.deepEqual(values, ['one', 'two', 'three'])
})

for (const [mechanism, password] of [
  ['plain', 'wrong'],
  ['scram-sha-256', 'wrong'],
  ['scram-sha-512', 'wrong'],
] as const) {
  test(`a wrong ${mechanism} password fails authentication, and the broker serves the next client`, async () => {
    const kafka = new Kafka({
      brokers: [address('SASL_SSL')],
      logLevel: logLevel.NOTHING,
      retry: { retries: 0 },
      ssl: { ca: [certs.caPem] },
      sasl: {
        mechanism,
        username: mechanism === 'plain' ? 'alice' : 'scram-user',
        password,
      } as KafkaConfig['sasl'],
    })
    const admin = kafka.admin()
    await assert.rejects(admin.connect(), (error: Error) => {
      assert.match(error.message, /SASL .*authentication failed|Authentication failed/i)
      return true
    })
    await admin.disconnect()
    const good = new Kafka({
      brokers: [address('SASL_SSL')],
      logLevel: logLevel.NOTHING,
      ssl: { ca: [certs.caPem] },
      sasl: { mechanism: 'plain', username: 'alice', password: 'alice-secret' },
    }).admin()
    await good.connect()
    assert.ok((await good.listTopics()).length >= 0)
    await good.disconnect()
  })
}

test('an unknown SCRAM user fails like a wrong password (no user enumeration)', async () => {
  const kafka = new Kafka({
    brokers: [address('SASL_PLAINTEXT')],
    logLevel: logLevel.NOTHING,
    retry: { retries: 0 },
    sasl: { mechanism: 'scram-sha-256', username: 'nobody', password: 'x' },
  })
  const admin = kafka.admin()
  await assert.rejects(admin.connect(), /invalid credentials with SASL mechanism SCRAM-SHA-256/)
  await admin.disconnect()
})

test('raw SASL: unsupported mechanism, garbage tokens and a replayed SCRAM final message close the connection', async () => {
  const [, port] = address('SASL_PLAINTEXT').split(':')
  const handshake = async (client: RawClient, mechanism: string) =>
    rawCall<{ errorCode: number; mechanisms: string[] }>(client, ApiKey.SaslHandshake, 1, { mechanism })
  // Unsupported mechanism: answered with the enabled list, then closed.
  let client = await RawClient.connect(Number(port))
  const refused = await handshake(client, 'GSSAPI')
  assert.equal(refused.errorCode, ErrorCode.UNSUPPORTED_SASL_MECHANISM)
  assert.deepEqual(refused.mechanisms, ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'])
  assert.equal(await client.waitClosed(), true)
  // Garbage SCRAM first message: SASL_AUTHENTICATION_FAILED, then closed.
  client = await RawClient.connect(Number(port))
  assert.equal((await handshake(client, 'SCRAM-SHA-256')).errorCode, ErrorCode.NONE)
  const garbage = await rawCall<{ errorCode: number; errorMessage: string }>(
    client,
    ApiKey.SaslAuthenticate,
    2,
    {
      authBytes: Buffer.from([0xff, 0x00, 0x13, 0x37]),
    },
  )
  assert.equal(garbage.errorCode, ErrorCode.SASL_AUTHENTICATION_FAILED)
  assert.match(garbage.errorMessage, /Invalid SCRAM client first message/)
  assert.equal(await client.waitClosed(), true)
  // A SaslAuthenticate before any handshake is not allowed: closed without an answer.
  client = await RawClient.connect(Number(port))
  client.write(RawClient.frame(ApiKey.SaslAuthenticate, 2, 7, { authBytes: Buffer.from('x') }))
  assert.equal(await client.waitClosed(), true)
  // A replayed client-final (from another exchange, so another nonce) fails.
  client = await RawClient.connect(Number(port))
  await handshake(client, 'SCRAM-SHA-256')
  const first = await rawCall<{ errorCode: number; authBytes: Buffer }>(client, ApiKey.SaslAuthenticate, 2, {
    authBytes: Buffer.from('n,,n=scram-user,r=clientnonce'),
  })
  assert.equal(first.errorCode, ErrorCode.NONE)
  const replay = await rawCall<{ errorCode: number; errorMessage: string }>(
    client,
    ApiKey.SaslAuthenticate,
    2,
    {
      authBytes: Buffer.from('c=biws,r=clientnonceOTHERSERVERNONCE,p=dGhpcyBpcyBub3QgYSBwcm9vZg=='),
    },
  )
  assert.equal(replay.errorCode, ErrorCode.SASL_AUTHENTICATION_FAILED)
  assert.match(replay.errorMessage, /nonce/)
  assert.equal(await client.waitClosed(), true)
  // A SASL request over sasl.server.max.receive.size closes the connection unanswered.
  client = await RawClient.connect(Number(port))
  await handshake(client, 'PLAIN')
  client.write(RawClient.frame(ApiKey.SaslAuthenticate, 2, 9, { authBytes: Buffer.alloc(600_000, 0x61) }))
  assert.equal(await client.waitClosed(), true)
})

test('SaslHandshake v0 takes bare PLAIN tokens (KIP-43 clients), then Kafka requests', async () => {
  const [, port] = address('SASL_PLAINTEXT').split(':')
  const client = await RawClient.connect(Number(port))
  try {
    const answer = await rawCall<{ errorCode: number }>(client, ApiKey.SaslHandshake, 0, {
      mechanism: 'PLAIN',
    })
    assert.equal(answer.errorCode, ErrorCode.NONE)
    const token = Buffer.from('\u0000alice\u0000alice-secret')
    const size = Buffer.alloc(4)
    size.writeInt32BE(token.length)
    client.write(Buffer.concat([size, token]))
    const reply = await client.readFrame()
    assert.deepEqual(reply, Buffer.alloc(0), 'PLAIN answers an empty token')
    const metadata = await rawCall<MetadataResponse>(client, ApiKey.Metadata, 1, { topics: null })
    assert.deepEqual(
      metadata.brokers.map((b) => `${b.host}:${b.port}`),
      [address('SASL_PLAINTEXT')],
    )
  } finally {
    client.socket.destroy()
  }
})

test('TLS spoken to the plaintext port and plaintext to the TLS port close quietly; others are served', async () => {
  const [, plainPort] = address('PLAINTEXT').split(':')
  const tlsFailure = await new Promise<Error | null>((resolve) => {
    const socket = tlsConnect({ host: '127.0.0.1', port: Number(plainPort), ca: [certs.caPem] })
    socket.once('secureConnect', () => {
      socket.destroy()
      resolve(null)
    })
    socket.once('error', resolve)
  })
  assert.ok(tlsFailure instanceof Error, 'a TLS handshake with the PLAINTEXT listener fails')
  const [, sslPort] = address('SSL').split(':')
  const client = await RawClient.connect(Number(sslPort))
  client.write(RawClient.frame(ApiKey.ApiVersions, 0, 1, {}))
  assert.equal(await client.waitClosed(12_000), true, 'plaintext Kafka to the SSL port is closed')
  const plain = await RawClient.connect(Number(plainPort))
  const metadata = await rawCall<MetadataResponse>(plain, ApiKey.Metadata, 1, { topics: null })
  assert.equal(metadata.brokers.length, 1)
  plain.socket.destroy()
})

test('DescribeUserScramCredentials lists mechanisms and iterations; Alter validates as Kafka does', async () => {
  const [, port] = address('PLAINTEXT').split(':')
  const client = await RawClient.connect(Number(port))
  try {
    const described = await rawCall<{
      results: {
        user: string
        errorCode: number
        credentialInfos: { mechanism: number; iterations: number }[]
      }[]
    }>(client, ApiKey.DescribeUserScramCredentials, 0, { users: [{ name: 'scram-user' }, { name: 'ghost' }] })
    assert.deepEqual(described.results, [
      {
        user: 'scram-user',
        errorCode: 0,
        errorMessage: null,
        credentialInfos: [
          { mechanism: 1, iterations: 4096 },
          { mechanism: 2, iterations: 4096 },
        ],
      },
      {
        user: 'ghost',
        errorCode: ErrorCode.RESOURCE_NOT_FOUND,
        errorMessage: 'Attempt to describe a user credential that does not exist: ghost',
        credentialInfos: [],
      },
    ])
    // No users and an empty list both ask for every user with a credential, as Kafka's
    // ScramImage reads them; librdkafka (confluent-kafka 2.16) sends the empty list.
    const describeAll = (users: { name: string }[] | null) =>
      rawCall<{ results: { user: string; errorCode: number }[] }>(
        client,
        ApiKey.DescribeUserScramCredentials,
        0,
        { users },
      )
    const everyone = await describeAll(null)
    assert.ok(
      everyone.results.some((r) => r.user === 'scram-user' && r.errorCode === 0),
      JSON.stringify(everyone.results),
    )
    assert.deepEqual(await describeAll([]), everyone, 'an empty list asks for every user')
    const altered = await rawCall<{ results: { user: string; errorCode: number }[] }>(
      client,
      ApiKey.AlterUserScramCredentials,
      0,
      {
        deletions: [{ name: 'ghost', mechanism: 1 }],
        upsertions: [
          {
            name: 'few',
            mechanism: 1,
            iterations: 100,
            salt: Buffer.from('s'),
            saltedPassword: Buffer.alloc(32),
          },
          {
            name: 'odd',
            mechanism: 9,
            iterations: 4096,
            salt: Buffer.from('s'),
            saltedPassword: Buffer.alloc(32),
          },
        ],
      },
    )
    assert.deepEqual(
      altered.results.map((r) => [r.user, r.errorCode]),
      [
        ['ghost', ErrorCode.RESOURCE_NOT_FOUND],
        ['few', ErrorCode.UNACCEPTABLE_CREDENTIAL],
        ['odd', ErrorCode.UNSUPPORTED_SASL_MECHANISM],
      ],
    )
  } finally {
    client.socket.destroy()
  }
})

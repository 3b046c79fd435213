/**
 * Issue 16: SASL/OAUTHBEARER with Kafka's unsecured-token validator. kafkajs with a valid
 * unsigned JWT produces and consumes; an expired token, a signed-looking one, one without
 * the required scope, and garbage fail with SASL_AUTHENTICATION_FAILED (after the RFC 7628
 * error challenge); brokers replicate over an OAUTHBEARER inter-broker listener.
 */
import assert from 'node:assert/strict'
import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { pathToFileURL } from 'node:url'
import { Kafka, logLevel } from 'kafkajs'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { Cluster } from '../../src/server/cluster.js'
import { startBroker, startCluster } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

const JAAS =
  'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker" unsecuredValidatorRequiredScope="kafka";'

function jwt(header: object, claims: object): string {
  const encode = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url')
  return `${encode(header)}.${encode(claims)}.`
}

const nowSeconds = (): number => Math.floor(Date.now() / 1000)
const good = (): string =>
  jwt({ alg: 'none' }, { sub: 'carol', iat: nowSeconds(), exp: nowSeconds() + 600, scope: 'kafka other' })

let cluster: Cluster

before(async () => {
  cluster = await startBroker({
    properties: {
      listeners: 'PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0',
      'sasl.enabled.mechanisms': 'OAUTHBEARER',
      'listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config': JAAS,
      'offsets.topic.replication.factor': '1',
      'offsets.topic.num.partitions': '2',
      'group.initial.rebalance.delay.ms': '0',
    },
  })
})

after(async () => {
  await cluster?.stop()
})

function client(token: () => string): Kafka {
  return new Kafka({
    brokers: [cluster.brokers[0].listenerAddress('SASL_PLAINTEXT')],
    logLevel: logLevel.NOTHING,
    retry: { retries: 0 },
    sasl: { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: token() }) },
  })
}

test('kafkajs OAUTHBEARER with an unsecured JWT produces and consumes as its subject', async () => {
  const kafka = client(good)
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: 'oauth', numPartitions: 1 }], waitForLeaders: true })
  assert.ok(cluster.brokers[0].connectedPrincipals().includes('User:carol'))
  await admin.disconnect()
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic: 'oauth', messages: [{ value: 'x' }, { value: 'y' }] })
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: 'oauth-group' })
  await consumer.connect()
  await consumer.subscribe({ topic: 'oauth', fromBeginning: true })
  const values: string[] = []
  await new Promise<void>((resolve, reject) => {
    consumer
      .run({
        eachMessage: async ({ message }) => {
          values.push(message.value!.toString())
          if (values.length === 2) resolve()
        },
      })
      .catch(reject)
  })
  await consumer.disconnect()
  assert.deepEqual(values, ['x', 'y'])
})

test('expired, signed, scope-less and subject-less tokens are refused; the broker serves the next client', async () => {
  const bad = [
    jwt({ alg: 'none' }, { sub: 'carol', exp: nowSeconds() - 10, scope: 'kafka' }),
    `${jwt({ alg: 'HS256' }, { sub: 'carol', exp: nowSeconds() + 600, scope: 'kafka' })}c2lnbmF0dXJl`,
    jwt({ alg: 'HS256' }, { sub: 'carol', exp: nowSeconds() + 600, scope: 'kafka' }),
    jwt({ alg: 'none' }, { sub: 'carol', exp: nowSeconds() + 600, scope: 'other' }),
    jwt({ alg: 'none' }, { exp: nowSeconds() + 600, scope: 'kafka' }),
  ]
  for (const token of bad) {
    const admin = client(() => token).admin()
    // kafkajs takes the RFC 7628 error challenge for success and never sends the \x01 reply;
    // its next request then closes the connection, as Kafka's authenticator does.
    await assert.rejects(async () => {
      await admin.connect()
      await admin.listTopics()
    }, `token ${token} was accepted`)
    await admin.disconnect()
  }
  const admin = client(good).admin()
  await admin.connect()
  await admin.disconnect()
})

test('raw OAUTHBEARER: a refused token gets the RFC 7628 error challenge, the \\x01 reply SASL_AUTHENTICATION_FAILED', async () => {
  const [, port] = cluster.brokers[0].listenerAddress('SASL_PLAINTEXT').split(':')
  const raw = await RawClient.connect(Number(port))
  const expired = jwt({ alg: 'none' }, { sub: 'carol', exp: 1, scope: 'kafka' })
  await rawCall(raw, ApiKey.SaslHandshake, 1, { mechanism: 'OAUTHBEARER' })
  const challenge = await rawCall<{ errorCode: number; authBytes: Buffer }>(raw, ApiKey.SaslAuthenticate, 2, {
    authBytes: Buffer.from(`n,,\u0001auth=Bearer ${expired}\u0001\u0001`),
  })
  assert.equal(challenge.errorCode, ErrorCode.NONE)
  assert.deepEqual(JSON.parse(challenge.authBytes.toString()), { status: 'invalid_token' })
  const failed = await rawCall<{ errorCode: number; errorMessage: string }>(raw, ApiKey.SaslAuthenticate, 2, {
    authBytes: Buffer.from('\u0001'),
  })
  assert.equal(failed.errorCode, ErrorCode.SASL_AUTHENTICATION_FAILED)
  assert.match(failed.errorMessage, /expired/)
  assert.equal(await raw.waitClosed(), true)
})

test('2 brokers replicate over an OAUTHBEARER inter-broker listener', async () => {
  const pair = await startCluster({
    brokers: 2,
    properties: {
      listeners: 'PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0',
      'security.inter.broker.protocol': 'SASL_PLAINTEXT',
      'sasl.enabled.mechanisms': 'OAUTHBEARER',
      'sasl.mechanism.inter.broker.protocol': 'OAUTHBEARER',
      'listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config':
        'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";',
      'replica.fetch.wait.max.ms': '100',
    },
  })
  try {
    const kafka = new Kafka({ brokers: [pair.bootstrapServers.split(',')[0]], logLevel: logLevel.NOTHING })
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic: 'r2',
          numPartitions: 1,
          replicationFactor: 2,
          configEntries: [{ name: 'min.insync.replicas', value: '2' }],
        },
      ],
    })
    await admin.disconnect()
    const producer = kafka.producer()
    await producer.connect()
    const [result] = await producer.send({
      topic: 'r2',
      acks: -1,
      timeout: 20_000,
      messages: [{ value: 'replicated' }],
    })
    assert.equal(result.errorCode, 0)
    await producer.disconnect()
  } finally {
    await pair.stop()
  }
})

test('signed OAUTHBEARER tokens (OAuthBearerValidatorCallbackHandler) are checked against a JWKS file', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'tidelog-jwks-'))
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const jwks = {
    keys: [
      { ...rsa.publicKey.export({ format: 'jwk' }), kid: 'rsa-1', alg: 'RS256', use: 'sig' },
      { ...ec.publicKey.export({ format: 'jwk' }), kid: 'ec-1', alg: 'ES256' },
    ],
  }
  const jwksFile = join(dir, 'jwks.json')
  await writeFile(jwksFile, JSON.stringify(jwks))
  const signed = (kid: string, alg: string, key: KeyObject, claims: object): string => {
    const encode = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url')
    const input = `${encode({ alg, kid, typ: 'JWT' })}.${encode(claims)}`
    const signature =
      alg === 'ES256'
        ? sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' })
        : sign('sha256', Buffer.from(input), key)
    return `${input}.${signature.toString('base64url')}`
  }
  const claims = (extra: object = {}) => ({
    sub: 'dave',
    iss: 'https://idp.example',
    aud: ['tidelog'],
    iat: nowSeconds(),
    exp: nowSeconds() + 600,
    ...extra,
  })
  const prefix = 'listener.name.sasl_plaintext.oauthbearer.'
  const secured = await startBroker({
    properties: {
      listeners: 'PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0',
      'sasl.enabled.mechanisms': 'OAUTHBEARER',
      [`${prefix}sasl.server.callback.handler.class`]:
        'org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler',
      [`${prefix}sasl.oauthbearer.jwks.endpoint.url`]: pathToFileURL(jwksFile).href,
      [`${prefix}sasl.jaas.config`]:
        'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;',
      'sasl.oauthbearer.expected.issuer': 'https://idp.example',
      'sasl.oauthbearer.expected.audience': 'tidelog',
      'sasl.oauthbearer.clock.skew.seconds': '0',
    },
  })
  try {
    const login = (token: string) =>
      new Kafka({
        brokers: [secured.brokers[0].listenerAddress('SASL_PLAINTEXT')],
        logLevel: logLevel.NOTHING,
        retry: { retries: 0 },
        sasl: { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: token }) },
      }).admin()
    for (const token of [
      signed('rsa-1', 'RS256', rsa.privateKey, claims()),
      signed('ec-1', 'ES256', ec.privateKey, claims()),
    ]) {
      const admin = login(token)
      await admin.connect()
      await admin.listTopics()
      assert.ok(secured.brokers[0].connectedPrincipals().includes('User:dave'))
      await admin.disconnect()
    }
    const good = signed('rsa-1', 'RS256', rsa.privateKey, claims())
    const refused = [
      signed('rsa-1', 'RS256', stranger.privateKey, claims()),
      signed('rsa-9', 'RS256', rsa.privateKey, claims()),
      signed('rsa-1', 'RS256', rsa.privateKey, claims({ iss: 'https://evil.example' })),
      signed('rsa-1', 'RS256', rsa.privateKey, claims({ aud: 'someone-else' })),
      signed('rsa-1', 'RS256', rsa.privateKey, claims({ exp: nowSeconds() - 5 })),
      signed('ec-1', 'RS256', rsa.privateKey, claims()),
      `${good.split('.').slice(0, 2).join('.').replace(/.$/, 'A')}.${good.split('.')[2]}`,
      jwt({ alg: 'none', kid: 'rsa-1' }, claims()),
    ]
    for (const token of refused) {
      const admin = login(token)
      await assert.rejects(async () => {
        await admin.connect()
        await admin.listTopics()
      }, `token ${token} was accepted`)
      await admin.disconnect()
    }
  } finally {
    await secured.stop()
    await rm(dir, { recursive: true, force: true })
  }
})

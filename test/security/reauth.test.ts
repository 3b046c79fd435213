/**
 * Issue 16, KIP-368: with connections.max.reauth.ms a SASL session has a lifetime,
 * announced in SaslAuthenticate v1+. A client that re-authenticates in time (SaslHandshake
 * and SaslAuthenticate again, same mechanism and principal) carries on; one that does not is
 * disconnected at its next request; a re-authentication that changes the principal or the
 * mechanism fails. kafkajs re-authenticates on its own and keeps producing.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kafka, logLevel } from 'kafkajs'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey, type MetadataResponse } from '../../src/protocol/generated/index.js'
import type { Cluster } from '../../src/server/cluster.js'
import { startBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { createScramUser, PLAIN_JAAS } from './helpers.js'

const LIFETIME_MS = 1000
let cluster: Cluster

before(async () => {
  cluster = await startBroker({
    properties: {
      listeners: 'PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0',
      'sasl.enabled.mechanisms': 'PLAIN,SCRAM-SHA-256',
      'listener.name.sasl_plaintext.plain.sasl.jaas.config': PLAIN_JAAS,
      'connections.max.reauth.ms': String(LIFETIME_MS),
    },
  })
  await createScramUser(cluster, 'reauth-user', 'reauth-secret', ['SCRAM-SHA-256'])
})

after(async () => {
  await cluster?.stop()
})

async function plainLogin(client: RawClient, user: string, password: string, mechanism = 'PLAIN') {
  const handshake = await rawCall<{ errorCode: number }>(client, ApiKey.SaslHandshake, 1, { mechanism })
  if (handshake.errorCode !== ErrorCode.NONE)
    return { errorCode: handshake.errorCode, sessionLifetimeMs: 0n, errorMessage: null, handshake: true }
  const answer = await rawCall<{ errorCode: number; sessionLifetimeMs: bigint; errorMessage: string | null }>(
    client,
    ApiKey.SaslAuthenticate,
    1,
    { authBytes: Buffer.from(`\u0000${user}\u0000${password}`) },
  )
  return { ...answer, handshake: false }
}

async function connect(): Promise<RawClient> {
  const [, port] = cluster.brokers[0].listenerAddress('SASL_PLAINTEXT').split(':')
  return RawClient.connect(Number(port))
}

const metadata = (client: RawClient) =>
  rawCall<MetadataResponse>(client, ApiKey.Metadata, 1, { topics: null })

test('the session lifetime is announced; past it a request without re-authentication closes the connection', async () => {
  const client = await connect()
  const login = await plainLogin(client, 'alice', 'alice-secret')
  assert.equal(login.errorCode, ErrorCode.NONE)
  assert.equal(login.sessionLifetimeMs, BigInt(LIFETIME_MS))
  assert.equal((await metadata(client)).brokers.length, 1)
  await sleep(LIFETIME_MS + 100)
  client.write(RawClient.frame(ApiKey.ApiVersions, 0, 99, {}))
  assert.equal(await client.waitClosed(), true)
})

test('re-authenticating in time (same mechanism and user) keeps the connection past the first lifetime', async () => {
  const client = await connect()
  try {
    assert.equal((await plainLogin(client, 'alice', 'alice-secret')).errorCode, ErrorCode.NONE)
    await sleep(LIFETIME_MS / 2)
    const again = await plainLogin(client, 'alice', 'alice-secret')
    assert.equal(again.errorCode, ErrorCode.NONE)
    assert.equal(again.sessionLifetimeMs, BigInt(LIFETIME_MS))
    await sleep(LIFETIME_MS / 2 + 200)
    assert.equal(
      (await metadata(client)).brokers.length,
      1,
      'served after the first session would have ended',
    )
  } finally {
    client.socket.destroy()
  }
})

test('a re-authentication as another user, or with another mechanism, fails and closes', async () => {
  let client = await connect()
  await plainLogin(client, 'alice', 'alice-secret')
  const other = await plainLogin(client, 'admin', 'admin-secret')
  assert.equal(other.errorCode, ErrorCode.SASL_AUTHENTICATION_FAILED)
  assert.match(String(other.errorMessage), /Cannot change principals during re-authentication/)
  assert.equal(await client.waitClosed(), true)
  client = await connect()
  await plainLogin(client, 'alice', 'alice-secret')
  const switched = await plainLogin(client, 'alice', 'x', 'SCRAM-SHA-256')
  assert.equal(switched.errorCode, ErrorCode.UNSUPPORTED_SASL_MECHANISM)
  assert.equal(await client.waitClosed(), true)
})

test('kafkajs SCRAM-SHA-256 re-authenticates by itself and produces across several session lifetimes', async () => {
  const kafka = new Kafka({
    brokers: [cluster.brokers[0].listenerAddress('SASL_PLAINTEXT')],
    logLevel: logLevel.NOTHING,
    sasl: { mechanism: 'scram-sha-256', username: 'reauth-user', password: 'reauth-secret' },
    reauthenticationThreshold: LIFETIME_MS / 2,
  } as ConstructorParameters<typeof Kafka>[0])
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: 'reauth', numPartitions: 1 }], waitForLeaders: true })
  await admin.disconnect()
  const producer = kafka.producer({ retry: { retries: 0 } })
  await producer.connect()
  await producer.send({ topic: 'reauth', messages: [{ value: 'first' }] })
  const accepted = cluster.brokers[0].acceptedConnections
  for (let i = 0; i < 12; i++) {
    await producer.send({ topic: 'reauth', messages: [{ value: `v${i}` }] })
    await sleep(250)
  }
  // Three lifetimes on the same connections: re-authenticated, not disconnected and redialled.
  assert.equal(cluster.brokers[0].acceptedConnections, accepted)
  await producer.disconnect()
})

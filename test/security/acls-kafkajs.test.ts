/**
 * ACLs seen by kafkajs over SASL_PLAINTEXT (PLAIN): the super user administers ACLs with
 * kafkajs' createAcls/describeAcls/deleteAcls; an allowed principal produces and consumes;
 * one without ACLs gets TOPIC_AUTHORIZATION_FAILED / GROUP_AUTHORIZATION_FAILED; a PREFIXED
 * ACL grants a family of topics and a DENY inside it wins; Metadata hides what a principal
 * may not describe.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import {
  AclOperation,
  AclPermissionType,
  PatternType,
  ResourceType,
} from '../../src/security/authorizer/acl.js'
import type { Cluster } from '../../src/server/cluster.js'
import { ACL_USERS, startAclBroker } from './acls-helpers.js'

let cluster: Cluster

function kafka(user: keyof typeof ACL_USERS): Kafka {
  return new Kafka({
    clientId: `acls-${user}`,
    brokers: [cluster.bootstrapServers],
    sasl: { mechanism: 'plain', username: user, password: ACL_USERS[user] },
    logLevel: logLevel.NOTHING,
    retry: { retries: 2, initialRetryTime: 100 },
  })
}

const allow = (
  principal: string,
  resourceType: number,
  resourceName: string,
  operation: number,
  patternType: number = PatternType.LITERAL,
) => ({
  resourceType,
  resourceName,
  resourcePatternType: patternType,
  principal,
  host: '*',
  operation,
  permissionType: AclPermissionType.ALLOW,
})

before(async () => {
  cluster = await startAclBroker()
  const admin = kafka('admin').admin()
  await admin.connect()
  try {
    await admin.createTopics({
      topics: ['orders', 'team-a.events', 'team-a.locked', 'secret'].map((topic) => ({ topic })),
      waitForLeaders: true,
    })
    // kafkajs types these enums; the codes are Kafka's, the same as tidelog's.
    await admin.createAcls({
      acl: [
        allow('User:alice', ResourceType.TOPIC, 'orders', AclOperation.WRITE),
        allow('User:alice', ResourceType.TOPIC, 'orders', AclOperation.READ),
        allow('User:alice', ResourceType.GROUP, 'alice-', AclOperation.READ, PatternType.PREFIXED),
        allow('User:alice', ResourceType.TOPIC, 'team-a.', AclOperation.ALL, PatternType.PREFIXED),
        {
          ...allow('User:alice', ResourceType.TOPIC, 'team-a.locked', AclOperation.WRITE),
          permissionType: AclPermissionType.DENY,
        },
      ] as never,
    })
  } finally {
    await admin.disconnect()
  }
})

after(async () => {
  await cluster?.stop()
})

async function produce(user: keyof typeof ACL_USERS, topic: string): Promise<void> {
  const producer = kafka(user).producer({ allowAutoTopicCreation: false })
  await producer.connect()
  try {
    await producer.send({ topic, acks: -1, messages: [{ value: `from ${user}` }] })
  } finally {
    await producer.disconnect()
  }
}

async function consumeOne(user: keyof typeof ACL_USERS, topic: string, groupId: string): Promise<string> {
  const consumer = kafka(user).consumer({ groupId })
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    return await new Promise<string>((resolve, reject) => {
      consumer.on(consumer.events.CRASH, (event) => reject(event.payload.error))
      consumer.run({ eachMessage: async ({ message }) => resolve(message.value!.toString()) }).catch(reject)
    })
  } finally {
    await consumer.disconnect()
  }
}

async function errorType(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
  } catch (error) {
    const e = error as { type?: string; cause?: { type?: string }; originalError?: { type?: string } }
    return e.type ?? e.originalError?.type ?? e.cause?.type ?? String(error)
  }
  return 'no error'
}

test('an authorised principal produces and consumes', async () => {
  await produce('alice', 'orders')
  assert.equal(await consumeOne('alice', 'orders', 'alice-orders'), 'from alice')
})

test('a principal without ACLs gets TOPIC_AUTHORIZATION_FAILED; a group without ACLs cannot be joined', async () => {
  assert.equal(await errorType(produce('bob', 'orders')), 'TOPIC_AUTHORIZATION_FAILED')
  // FindCoordinator answers GROUP_AUTHORIZATION_FAILED; kafkajs reports any FindCoordinator
  // failure as this error (it does so against Kafka too). confluent-kafka shows the code itself.
  assert.match(
    await errorType(consumeOne('alice', 'orders', 'bobs-group')),
    /KafkaJSGroupCoordinatorNotFound/,
  )
})

test('a PREFIXED ACL grants the family of topics, and a DENY inside it wins', async () => {
  await produce('alice', 'team-a.events')
  assert.equal(await errorType(produce('alice', 'team-a.locked')), 'TOPIC_AUTHORIZATION_FAILED')
})

test('Metadata hides the topics a principal may not describe; the super user sees them all', async () => {
  const alice = kafka('alice').admin()
  const admin = kafka('admin').admin()
  await alice.connect()
  await admin.connect()
  try {
    assert.deepEqual((await alice.listTopics()).sort(), ['orders', 'team-a.events', 'team-a.locked'])
    const all = await admin.listTopics()
    assert.ok(all.includes('secret') && all.includes('orders'), all.join(','))
    assert.equal(
      await errorType(alice.fetchTopicMetadata({ topics: ['secret'] })),
      'TOPIC_AUTHORIZATION_FAILED',
    )
  } finally {
    await alice.disconnect()
    await admin.disconnect()
  }
  await produce('admin', 'secret')
})

test('kafkajs describeAcls and deleteAcls; a non-super user may not create ACLs', async () => {
  const admin = kafka('admin').admin()
  await admin.connect()
  try {
    const described = await admin.describeAcls({
      resourceType: ResourceType.TOPIC,
      resourceName: 'team-a.events',
      resourcePatternType: PatternType.MATCH,
      operation: AclOperation.ANY,
      permissionType: AclPermissionType.ANY,
    } as never)
    assert.deepEqual(
      described.resources.map((r) => [r.resourceName, r.resourcePatternType]),
      [['team-a.', PatternType.PREFIXED]],
    )
    const deleted = await admin.deleteAcls({
      filters: [
        {
          resourceType: ResourceType.TOPIC,
          resourceName: 'team-a.locked',
          resourcePatternType: PatternType.LITERAL,
          principal: 'User:alice',
          operation: AclOperation.ANY,
          permissionType: AclPermissionType.DENY,
        },
      ] as never,
    })
    assert.deepEqual(
      deleted.filterResponses.map((f) => [f.errorCode, f.matchingAcls.map((a) => a.resourceName)]),
      [[0, ['team-a.locked']]],
    )
  } finally {
    await admin.disconnect()
  }
  // The DENY is gone: the PREFIXED ALLOW now applies to team-a.locked too.
  await produce('alice', 'team-a.locked')
  const alice = kafka('alice').admin()
  await alice.connect()
  try {
    assert.equal(
      await errorType(
        alice.createAcls({
          acl: [allow('User:alice', ResourceType.TOPIC, 'secret', AclOperation.READ)] as never,
        }),
      ),
      'CLUSTER_AUTHORIZATION_FAILED',
    )
  } finally {
    await alice.disconnect()
  }
})

test('a transactional producer needs WRITE on its transactional id', async () => {
  const send = async (transactionalId: string) => {
    const producer = kafka('alice').producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
    await producer.connect()
    try {
      const txn = await producer.transaction()
      await txn.send({ topic: 'orders', messages: [{ value: `in ${transactionalId}` }] })
      await txn.commit()
    } finally {
      await producer.disconnect()
    }
  }
  const grant = async (operation: number) => {
    const admin = kafka('admin').admin()
    await admin.connect()
    try {
      await admin.createAcls({
        acl: [allow('User:alice', ResourceType.TRANSACTIONAL_ID, 'alice-tx', operation)] as never,
      })
    } finally {
      await admin.disconnect()
    }
  }
  // Without DESCRIBE FindCoordinator is refused, which kafkajs reports as "not found".
  assert.match(await errorType(send('alice-tx')), /KafkaJSGroupCoordinatorNotFound/)
  await grant(AclOperation.DESCRIBE)
  assert.equal(await errorType(send('alice-tx')), 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED')
  await grant(AclOperation.WRITE)
  // FindCoordinator, InitProducerId, AddPartitionsToTxn, EndTxn; the markers go out as the
  // inter-broker user (admin, a super user).
  await send('alice-tx')
})

/**
 * ACLs with @platformatic/kafka (SASL PLAIN) producing, and tidelog's own Admin client
 * administering them: Admin.createAcls/describeAcls/deleteAcls as the super user; a
 * platformatic producer writes where alice may and is refused with
 * TOPIC_AUTHORIZATION_FAILED (code 29) where a DENY applies.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { Producer } from '@platformatic/kafka'
import { Admin } from '../../src/client/admin.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { Cluster } from '../../src/server/cluster.js'
import { polyfillPromiseWithResolvers } from '../helpers/cluster.js'
import { createTopic } from '../helpers/topics.js'
import { ACL_USERS, startAclBroker } from './acls-helpers.js'

let cluster: Cluster

before(async () => {
  polyfillPromiseWithResolvers()
  cluster = await startAclBroker()
  for (const topic of ['pf.ok', 'pf.blocked']) await createTopic(cluster, topic)
})

after(async () => {
  await cluster?.stop()
})

function admin(user: keyof typeof ACL_USERS): Admin {
  return new Admin({
    bootstrapServers: cluster.bootstrapServers,
    clientId: `acls-${user}`,
    sasl: { mechanism: 'plain', username: user, password: ACL_USERS[user] },
  })
}

/** Every code an error (or the errors it aggregates) carries. */
function codesOf(error: unknown): number[] {
  const e = error as { apiCode?: number; errors?: unknown[]; cause?: unknown; response?: unknown }
  const own = typeof e.apiCode === 'number' ? [e.apiCode] : []
  const nested = [...(e.errors ?? []), ...(e.cause ? [e.cause] : [])].flatMap(codesOf)
  return [...own, ...nested]
}

test("tidelog's Admin manages ACLs; @platformatic/kafka is allowed and refused by them", async () => {
  const root = admin('admin')
  try {
    await root.createAcls([
      {
        resourceType: 'TOPIC',
        resourceName: 'pf.',
        patternType: 'PREFIXED',
        principal: 'User:alice',
        host: '*',
        operation: 'WRITE',
        permissionType: 'ALLOW',
      },
      {
        resourceType: 'TOPIC',
        resourceName: 'pf.blocked',
        patternType: 'LITERAL',
        principal: 'User:alice',
        host: '*',
        operation: 'ALL',
        permissionType: 'DENY',
      },
    ])
    const listed = await root.describeAcls({
      resourceType: 'TOPIC',
      resourceName: 'pf.blocked',
      patternType: 'MATCH',
      principal: null,
      host: null,
      operation: 'ANY',
      permissionType: 'ANY',
    })
    assert.deepEqual(
      listed.map((a) => `${a.patternType}:${a.resourceName}:${a.operation}:${a.permissionType}`).sort(),
      ['LITERAL:pf.blocked:ALL:DENY', 'PREFIXED:pf.:WRITE:ALLOW'],
    )
  } finally {
    root.close()
  }

  const producer = new Producer({
    clientId: 'acls-platformatic',
    bootstrapBrokers: [cluster.bootstrapServers],
    autocreateTopics: false,
    sasl: { mechanism: 'PLAIN' as const, username: 'alice', password: ACL_USERS.alice },
    retries: 0,
  })
  try {
    await producer.send({
      messages: [{ topic: 'pf.ok', value: Buffer.from('fine'), partition: 0 }],
      acks: -1,
    })
    const refused = await producer
      .send({ messages: [{ topic: 'pf.blocked', value: Buffer.from('no'), partition: 0 }], acks: -1 })
      .then(
        () => null,
        (error: unknown) => error,
      )
    assert.ok(refused !== null, 'the DENY ALL refuses the produce')
    assert.ok(codesOf(refused).includes(ErrorCode.TOPIC_AUTHORIZATION_FAILED), String(refused))
  } finally {
    await producer.close()
  }

  const alice = admin('alice')
  try {
    await assert.rejects(
      alice.describeAcls({
        resourceType: 'ANY',
        resourceName: null,
        patternType: 'ANY',
        principal: null,
        host: null,
        operation: 'ANY',
        permissionType: 'ANY',
      }),
      (error: Error & { errorCode?: number }) => error.errorCode === ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    )
  } finally {
    alice.close()
  }
  const root2 = admin('admin')
  try {
    const removed = await root2.deleteAcls([
      {
        resourceType: 'TOPIC',
        resourceName: 'pf.blocked',
        patternType: 'LITERAL',
        principal: null,
        host: null,
        operation: 'ANY',
        permissionType: 'DENY',
      },
    ])
    assert.deepEqual(
      removed.map((a) => a.resourceName),
      ['pf.blocked'],
    )
  } finally {
    root2.close()
  }
})

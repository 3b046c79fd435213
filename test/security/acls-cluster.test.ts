/**
 * Two brokers with the StandardAuthorizer, replicating over a SASL_PLAINTEXT inter-broker
 * listener as User:broker (a super user, as Kafka deployments name theirs): followers'
 * fetches need CLUSTER_ACTION, so an acks=all produce with min.insync.replicas=2 succeeds
 * only if the inter-broker principal is allowed. The client's ACL, created on one broker,
 * is enforced by the other.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import {
  AclOperation,
  AclPermissionType,
  PatternType,
  ResourceType,
} from '../../src/security/authorizer/acl.js'
import { startCluster } from '../helpers/cluster.js'

const JAAS =
  'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";'

test('followers fetch as the inter-broker super user; an ACL made on one broker holds on the other', async () => {
  const cluster = await startCluster({
    brokers: 2,
    port: 0,
    properties: {
      listeners: 'CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0',
      'listener.security.protocol.map': 'CLIENT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT',
      'inter.broker.listener.name': 'INTERNAL',
      'sasl.enabled.mechanisms': 'PLAIN',
      'sasl.mechanism.inter.broker.protocol': 'PLAIN',
      'listener.name.internal.plain.sasl.jaas.config': JAAS,
      'listener.name.client.plain.sasl.jaas.config': JAAS,
      'authorizer.class.name': 'kafka.security.authorizer.AclAuthorizer',
      'super.users': 'User:broker',
      'replica.fetch.wait.max.ms': 100,
    },
  })
  try {
    const client = (user: string, password: string, broker: number) =>
      new Kafka({
        brokers: [cluster.brokers[broker].listenerAddress('CLIENT')],
        sasl: { mechanism: 'plain', username: user, password },
        logLevel: logLevel.NOTHING,
        retry: { retries: 3, initialRetryTime: 100 },
      })
    const admin = client('broker', 'broker-secret', 0).admin()
    await admin.connect()
    try {
      await admin.createTopics({
        topics: [
          {
            topic: 'replicated',
            numPartitions: 2,
            replicationFactor: 2,
            configEntries: [{ name: 'min.insync.replicas', value: '2' }],
          },
        ],
        waitForLeaders: true,
      })
      await admin.createAcls({
        acl: [
          {
            resourceType: ResourceType.TOPIC,
            resourceName: 'replicated',
            resourcePatternType: PatternType.LITERAL,
            principal: 'User:alice',
            host: '*',
            operation: AclOperation.WRITE,
            permissionType: AclPermissionType.ALLOW,
          },
        ] as never,
      })
    } finally {
      await admin.disconnect()
    }
    // Dialled through broker 1: its authorizer follows the store the ACL was written to on broker 0.
    const producer = client('alice', 'alice-secret', 1).producer({ allowAutoTopicCreation: false })
    await producer.connect()
    try {
      const sent = await producer.send({
        topic: 'replicated',
        acks: -1,
        timeout: 10_000,
        messages: Array.from({ length: 10 }, (_, i) => ({ key: `k${i}`, value: `v${i}` })),
      })
      assert.ok(sent.every((r) => r.errorCode === 0))
      assert.equal(
        new Set(sent.map((r) => r.partition)).size,
        2,
        'both partitions, so both brokers led a write',
      )
    } finally {
      await producer.disconnect()
    }
  } finally {
    await cluster.stop()
  }
})

/** A broker with the StandardAuthorizer on a SASL_PLAINTEXT listener, PLAIN users admin (super user), alice and bob. */
import { startBroker } from '../helpers/cluster.js'

export const ACL_USERS = { admin: 'admin-secret', alice: 'alice-secret', bob: 'bob-secret' } as const

const JAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" ${Object.entries(
  ACL_USERS,
)
  .map(([user, password]) => `user_${user}="${password}"`)
  .join(' ')};`

export function startAclBroker(extra: Record<string, string> = {}) {
  return startBroker({
    properties: {
      listeners: 'SASL_PLAINTEXT://127.0.0.1:0',
      'security.inter.broker.protocol': 'SASL_PLAINTEXT',
      'sasl.enabled.mechanisms': 'PLAIN,SCRAM-SHA-256,SCRAM-SHA-512',
      'sasl.mechanism.inter.broker.protocol': 'PLAIN',
      'listener.name.sasl_plaintext.plain.sasl.jaas.config': JAAS,
      'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
      'super.users': 'User:admin',
      'offsets.topic.replication.factor': '1',
      'offsets.topic.num.partitions': '2',
      'group.initial.rebalance.delay.ms': '0',
      ...extra,
    },
  })
}

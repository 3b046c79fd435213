/** Broker properties and SCRAM users for the security tests. */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { ApiKey } from '../../src/protocol/generated/index.js'
import { type ScramMechanism, saltedPassword } from '../../src/security/scram.js'
import type { Cluster } from '../../src/server/cluster.js'
import type { TestCerts } from '../helpers/certs.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

export const PLAIN_JAAS =
  'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_admin="admin-secret";'

/** PLAINTEXT, SSL, SASL_SSL and SASL_PLAINTEXT on free ports, PEM key store and trust store files. */
export function securedBrokerProperties(
  certs: TestCerts,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    listeners:
      'PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0',
    'ssl.keystore.type': 'PEM',
    'ssl.keystore.location': certs.brokerKeystore,
    'ssl.truststore.type': 'PEM',
    'ssl.truststore.location': certs.caFile,
    'sasl.enabled.mechanisms': 'PLAIN,SCRAM-SHA-256,SCRAM-SHA-512',
    'listener.name.sasl_ssl.plain.sasl.jaas.config': PLAIN_JAAS,
    'listener.name.sasl_plaintext.plain.sasl.jaas.config': PLAIN_JAAS,
    'offsets.topic.replication.factor': '1',
    'offsets.topic.num.partitions': '4',
    'group.initial.rebalance.delay.ms': '0',
    ...extra,
  }
}

/** Creates a SCRAM user through AlterUserScramCredentials on the PLAINTEXT listener, as kafka-configs does. */
export async function createScramUser(
  cluster: Cluster,
  user: string,
  password: string,
  mechanisms: readonly ScramMechanism[],
): Promise<void> {
  const [, port] = cluster.brokers[0].listenerAddress('PLAINTEXT').split(':')
  const client = await RawClient.connect(Number(port))
  try {
    // One request per mechanism: Kafka refuses a user altered twice in one request
    // (DUPLICATE_RESOURCE, ScramControlManager), whatever the mechanisms.
    for (const mechanism of mechanisms) {
      const salt = randomBytes(16)
      const upsertion = {
        name: user,
        mechanism: mechanism === 'SCRAM-SHA-256' ? 1 : 2,
        iterations: 4096,
        salt,
        saltedPassword: saltedPassword(mechanism, password, salt, 4096),
      }
      const response = await rawCall<{
        results: { user: string; errorCode: number; errorMessage: string | null }[]
      }>(client, ApiKey.AlterUserScramCredentials, 0, { deletions: [], upsertions: [upsertion] })
      assert.deepEqual(response.results, [{ user, errorCode: 0, errorMessage: null }])
    }
  } finally {
    client.socket.destroy()
  }
}

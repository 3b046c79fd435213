/**
 * Issue 40 item 6: FindCoordinator names the coordinator on the listener the request came
 * in on, for transactional ids as for groups. A broker with a plaintext inter-broker
 * listener and a second client listener: asked on the second, both key types must name
 * its port (Java and librdkafka connect to the address given; the inter-broker one may be
 * unreachable or of another security protocol for them).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey, type FindCoordinatorResponse } from '../../src/protocol/generated/index.js'
import { freePort } from '../helpers/broker-process.js'
import { withBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

const KEY_TYPE_GROUP = 0
const KEY_TYPE_TRANSACTION = 1

/** FindCoordinator v4 for one key, asked again while the internal topic is created and loaded. */
async function coordinatorOf(client: RawClient, keyType: number, key: string) {
  for (let attempt = 0; ; attempt++) {
    const response = await rawCall<FindCoordinatorResponse>(client, ApiKey.FindCoordinator, 4, {
      keyType,
      coordinatorKeys: [key],
    })
    const [found] = response.coordinators
    if (found.errorCode !== ErrorCode.COORDINATOR_NOT_AVAILABLE || attempt === 100) return found
    await sleep(100)
  }
}

test('FindCoordinator answers on the listener it was asked on, for groups and transactions', async () => {
  const [internalPort, externalPort] = [await freePort(), await freePort()]
  const properties = {
    listeners: `PLAINTEXT://127.0.0.1:${internalPort},EXTERNAL://127.0.0.1:${externalPort}`,
    'listener.security.protocol.map': 'PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT',
    'inter.broker.listener.name': 'PLAINTEXT',
  }
  await withBroker(
    async () => {
      const client = await RawClient.connect(externalPort)
      try {
        for (const [keyType, key] of [
          [KEY_TYPE_GROUP, 'a-group'],
          [KEY_TYPE_TRANSACTION, 'a-transactional-id'],
        ] as const) {
          const found = await coordinatorOf(client, keyType, key)
          assert.equal(found.errorCode, ErrorCode.NONE, `key type ${keyType}: ${found.errorMessage}`)
          assert.deepEqual(
            { host: found.host, port: found.port },
            { host: '127.0.0.1', port: externalPort },
            `key type ${keyType}: the coordinator on the EXTERNAL listener`,
          )
        }
      } finally {
        client.socket.destroy()
      }
    },
    { properties, port: internalPort },
  )
})

/**
 * Issue 18 item 6: AlterConfigs / IncrementalAlterConfigs on a BROKER resource accept what
 * Kafka 3.9 accepts there: dynamic broker names tidelog does not implement and names that
 * are no broker config (stored, no effect), while Kafka's static broker configs and
 * per-broker-only names at the cluster default are refused with Kafka's messages.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import {
  type AlterConfigsResponse,
  ApiKey,
  type DescribeConfigsResponse,
  type IncrementalAlterConfigsResponse,
} from '../../src/protocol/generated/index.js'
import { withBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

const BROKER = 4
const SET = 0

test('broker resources take the names Kafka 3.9 takes and refuse its static ones', async () => {
  await withBroker(async (cluster) => {
    const client = await RawClient.connect(Number(cluster.bootstrapServers.split(':')[1]))
    try {
      const alterV0 = async (resourceName: string, configs: Record<string, string>) => {
        const response = await rawCall<AlterConfigsResponse>(client, ApiKey.AlterConfigs, 0, {
          resources: [
            {
              resourceType: BROKER,
              resourceName,
              configs: Object.entries(configs).map(([name, value]) => ({ name, value })),
            },
          ],
          validateOnly: false,
        })
        return response.responses[0]
      }
      const incremental = async (resourceName: string, name: string, value: string) => {
        const response = await rawCall<IncrementalAlterConfigsResponse>(
          client,
          ApiKey.IncrementalAlterConfigs,
          0,
          {
            resources: [
              { resourceType: BROKER, resourceName, configs: [{ name, configOperation: SET, value }] },
            ],
            validateOnly: false,
          },
        )
        return response.responses[0]
      }

      // A topic config name on a broker resource through AlterConfigs v0: Kafka stores it.
      assert.equal((await alterV0('0', { 'cleanup.policy': 'compact' })).errorCode, ErrorCode.NONE)
      // A dynamic Kafka broker config tidelog does not implement.
      const kerberos = await incremental('0', 'sasl.kerberos.min.time.before.relogin', '60000')
      assert.deepEqual([kerberos.errorCode, kerberos.errorMessage], [ErrorCode.NONE, null])
      // Listener security settings need a broker id.
      const atDefault = await incremental('', 'sasl.kerberos.min.time.before.relogin', '60000')
      assert.equal(atDefault.errorCode, ErrorCode.INVALID_REQUEST)
      assert.equal(
        atDefault.errorMessage,
        'Cannot update these configs at default cluster level, broker id must be specified: Set(sasl.kerberos.min.time.before.relogin)',
      )
      // A static broker config stays refused.
      const logDirs = await incremental('0', 'log.dirs', '/tmp/elsewhere')
      assert.equal(logDirs.errorCode, ErrorCode.INVALID_REQUEST)
      assert.equal(logDirs.errorMessage, 'Cannot update these configs dynamically: Set(log.dirs)')
      // What tidelog implements is still checked.
      assert.equal(
        (await incremental('', 'log.retention.bytes', 'lots')).errorCode,
        ErrorCode.INVALID_REQUEST,
      )

      const described = await rawCall<DescribeConfigsResponse>(client, ApiKey.DescribeConfigs, 1, {
        resources: [{ resourceType: BROKER, resourceName: '0', configurationKeys: null }],
        includeSynonyms: false,
      })
      assert.equal(described.results[0].errorCode, ErrorCode.NONE)
    } finally {
      client.close()
    }
  })
})

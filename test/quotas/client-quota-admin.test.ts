/**
 * AlterClientQuotas and DescribeClientQuotas over a real socket: Kafka's validation
 * (INVALID_REQUEST per entry), validate_only, strict and non-strict filters, and quotas kept
 * in the metadata store across a restart.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import {
  type AlterClientQuotasResponse,
  ApiKey,
  type ApiVersionsResponse,
  type DescribeClientQuotasResponse,
} from '../../src/protocol/generated/index.js'
import { startBroker, startCluster } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

type Entity = { entityType: string; entityName: string | null }[]
type Op = { key: string; value?: number; remove?: boolean }

async function alter(client: RawClient, entries: { entity: Entity; ops: Op[] }[], validateOnly = false) {
  const response = await rawCall<AlterClientQuotasResponse>(client, ApiKey.AlterClientQuotas, 1, {
    entries: entries.map(({ entity, ops }) => ({
      entity,
      ops: ops.map((op) => ({ key: op.key, value: op.value ?? 0, remove: op.remove ?? false })),
    })),
    validateOnly,
  })
  return response.entries.map((e) => [e.errorCode, e.errorMessage])
}

async function describe(
  client: RawClient,
  components: { entityType: string; matchType: number; match: string | null }[],
  strict = false,
) {
  const response = await rawCall<DescribeClientQuotasResponse>(client, ApiKey.DescribeClientQuotas, 1, {
    components,
    strict,
  })
  return {
    errorCode: response.errorCode,
    errorMessage: response.errorMessage,
    entries: (response.entries ?? [])
      .map((e) => ({
        entity: e.entity.map((p) => `${p.entityType}=${p.entityName ?? '<default>'}`).join(','),
        values: Object.fromEntries(e.values.map((v) => [v.key, v.value])),
      }))
      .sort((a, b) => (a.entity < b.entity ? -1 : 1)),
  }
}

const user = (name: string | null) => ({ entityType: 'user', entityName: name })
const client = (name: string | null) => ({ entityType: 'client-id', entityName: name })

test('a quota set through one broker holds on every broker of the cluster', async () => {
  const cluster = await startCluster({ brokers: 2, port: 0 })
  const raw = await RawClient.connect(Number(cluster.bootstrapServers.split(',')[0].split(':')[1]))
  try {
    assert.deepEqual(
      await alter(raw, [{ entity: [client('shared')], ops: [{ key: 'consumer_byte_rate', value: 4096 }] }]),
      [[ErrorCode.NONE, null]],
    )
    const other = cluster.brokers[1]
    const deadline = Date.now() + 5000
    while (other.clientQuotas.fetch.quotaLimit('ANONYMOUS', 'shared') === null && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20))
    assert.equal(other.clientQuotas.fetch.quotaLimit('ANONYMOUS', 'shared'), 4096)
    assert.equal(other.clientQuotas.produce.quotaLimit('ANONYMOUS', 'shared'), null)
  } finally {
    raw.close()
    await cluster.stop()
  }
})

test('client quotas are validated as Kafka validates them, described by filter, and survive a restart', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-quotas-'))
  try {
    let cluster = await startBroker({ port: 0, dataDir })
    let raw = await RawClient.connect(Number(cluster.bootstrapServers.split(':')[1]))
    try {
      const versions = await rawCall<ApiVersionsResponse>(raw, ApiKey.ApiVersions, 3, {
        clientSoftwareName: 'test',
        clientSoftwareVersion: '1',
      })
      for (const key of [ApiKey.AlterClientQuotas, ApiKey.DescribeClientQuotas])
        assert.deepEqual(
          versions.apiKeys.filter((k) => k.apiKey === key).map((k) => [k.minVersion, k.maxVersion]),
          [[0, 1]],
        )

      const INVALID = ErrorCode.INVALID_REQUEST
      assert.deepEqual(
        await alter(raw, [
          { entity: [], ops: [{ key: 'producer_byte_rate', value: 1 }] },
          { entity: [{ entityType: 'group', entityName: 'g' }], ops: [] },
          { entity: [user('')], ops: [] },
          { entity: [client('a')], ops: [{ key: 'producer.byte.rate', value: 1 }] },
          { entity: [client('a')], ops: [{ key: 'producer_byte_rate', value: 1.5 }] },
          { entity: [client('a')], ops: [{ key: 'consumer_byte_rate', value: -1 }] },
          { entity: [user('u'), user('v')], ops: [] },
        ]),
        [
          [INVALID, 'Invalid empty client quota entity'],
          [INVALID, 'Unhandled client quota entity type: group'],
          [INVALID, 'Empty user not supported'],
          [INVALID, 'Invalid configuration key producer.byte.rate'],
          [INVALID, 'Configuration producer_byte_rate must be a Long value'],
          [INVALID, 'Configuration consumer_byte_rate must be positive'],
          [INVALID, 'Duplicate user entity type in the client quota entity'],
        ],
      )
      // validate_only answers NONE and writes nothing.
      assert.deepEqual(
        await alter(
          raw,
          [{ entity: [client('a')], ops: [{ key: 'producer_byte_rate', value: 1024 }] }],
          true,
        ),
        [[ErrorCode.NONE, null]],
      )
      assert.deepEqual((await describe(raw, [])).entries, [])

      // A bad entry does not stop the good ones beside it.
      assert.deepEqual(
        await alter(raw, [
          { entity: [client('a')], ops: [{ key: 'producer_byte_rate', value: 1024 }] },
          { entity: [client('b')], ops: [{ key: 'nope', value: 1 }] },
          {
            entity: [user('alice'), client(null)],
            ops: [
              { key: 'consumer_byte_rate', value: 2048 },
              { key: 'request_percentage', value: 12.5 },
            ],
          },
          { entity: [user(null)], ops: [{ key: 'producer_byte_rate', value: 4096 }] },
        ]),
        [
          [ErrorCode.NONE, null],
          [INVALID, 'Invalid configuration key nope'],
          [ErrorCode.NONE, null],
          [ErrorCode.NONE, null],
        ],
      )
      const all = {
        errorCode: ErrorCode.NONE,
        errorMessage: null,
        entries: [
          { entity: 'client-id=a', values: { producer_byte_rate: 1024 } },
          { entity: 'user=<default>', values: { producer_byte_rate: 4096 } },
          {
            entity: 'user=alice,client-id=<default>',
            values: { consumer_byte_rate: 2048, request_percentage: 12.5 },
          },
        ],
      }
      assert.deepEqual(await describe(raw, []), all)
      // Non-strict: every entity with a user part; strict: only the user-alone entity.
      assert.deepEqual(
        (await describe(raw, [{ entityType: 'user', matchType: 2, match: null }])).entries.map(
          (e) => e.entity,
        ),
        ['user=<default>', 'user=alice,client-id=<default>'],
      )
      assert.deepEqual(
        (await describe(raw, [{ entityType: 'user', matchType: 2, match: null }], true)).entries.map(
          (e) => e.entity,
        ),
        ['user=<default>'],
      )
      assert.deepEqual(
        (await describe(raw, [{ entityType: 'user', matchType: 0, match: 'alice' }])).entries.map(
          (e) => e.entity,
        ),
        ['user=alice,client-id=<default>'],
      )
      assert.deepEqual(
        (await describe(raw, [{ entityType: 'user', matchType: 1, match: null }])).entries.map(
          (e) => e.entity,
        ),
        ['user=<default>'],
      )
      assert.deepEqual(
        (
          await describe(raw, [
            { entityType: 'user', matchType: 0, match: 'alice' },
            { entityType: 'client-id', matchType: 1, match: null },
          ])
        ).entries.map((e) => e.entity),
        ['user=alice,client-id=<default>'],
      )
      const bad = await describe(raw, [
        { entityType: 'user', matchType: 2, match: null },
        { entityType: 'user', matchType: 1, match: null },
      ])
      assert.deepEqual(
        [bad.errorCode, bad.errorMessage],
        [INVALID, 'Duplicate user filter component entity type'],
      )
      const exactWithoutName = await describe(raw, [{ entityType: 'client-id', matchType: 0, match: null }])
      assert.equal(exactWithoutName.errorCode, INVALID)

      // Removing the last key removes the entity.
      assert.deepEqual(
        await alter(raw, [{ entity: [user(null)], ops: [{ key: 'producer_byte_rate', remove: true }] }]),
        [[ErrorCode.NONE, null]],
      )
      assert.deepEqual(
        (await describe(raw, [])).entries.map((e) => e.entity),
        ['client-id=a', 'user=alice,client-id=<default>'],
      )

      raw.close()
      await cluster.stop()
      cluster = await startBroker({ port: 0, dataDir })
      raw = await RawClient.connect(Number(cluster.bootstrapServers.split(':')[1]))
      assert.deepEqual((await describe(raw, [])).entries, [all.entries[0], all.entries[2]])
      assert.equal(cluster.brokers[0].clientQuotas.produce.quotaLimit('ANONYMOUS', 'a'), 1024)
    } finally {
      raw.close()
      await cluster.stop()
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true })
  }
})

/**
 * CreateAcls, DescribeAcls and DeleteAcls on the wire (raw requests, every version), the
 * ACLs kept in the metadata store: they survive a restart and every broker of a cluster
 * decides on them. The PLAINTEXT listener's principal is User:ANONYMOUS, made a super user
 * here so the test can administer; the real-client tests cover SASL principals.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { AlterReplicaLogDirsResponse } from '../../src/protocol/generated/alter-replica-log-dirs-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import {
  AclOperation,
  AclPermissionType,
  PatternType,
  ResourceType,
} from '../../src/security/authorizer/acl.js'
import type { Cluster } from '../../src/server/cluster.js'
import { startBroker, startCluster } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

const AUTHORIZER = 'org.apache.kafka.metadata.authorizer.StandardAuthorizer'

interface CreateAclsResponse {
  results: { errorCode: number; errorMessage: string | null }[]
}
interface DescribeAclsResponse {
  errorCode: number
  errorMessage: string | null
  resources: {
    resourceType: number
    resourceName: string
    patternType: number
    acls: { principal: string; host: string; operation: number; permissionType: number }[]
  }[]
}
interface DeleteAclsResponse {
  filterResults: {
    errorCode: number
    errorMessage: string | null
    matchingAcls: { resourceName: string }[]
  }[]
}

const creation = (overrides: Record<string, unknown> = {}) => ({
  resourceType: ResourceType.TOPIC,
  resourceName: 'orders',
  resourcePatternType: PatternType.LITERAL,
  principal: 'User:alice',
  host: '*',
  operation: AclOperation.READ,
  permissionType: AclPermissionType.ALLOW,
  ...overrides,
})

const anyFilter = {
  resourceTypeFilter: ResourceType.ANY,
  resourceNameFilter: null,
  patternTypeFilter: PatternType.ANY,
  principalFilter: null,
  hostFilter: null,
  operation: AclOperation.ANY,
  permissionType: AclPermissionType.ANY,
}

async function withClient<T>(
  cluster: Cluster,
  brokerIndex: number,
  fn: (c: RawClient) => Promise<T>,
): Promise<T> {
  const [, port] = cluster.brokers[brokerIndex].listenerAddress('PLAINTEXT').split(':')
  const client = await RawClient.connect(Number(port))
  try {
    return await fn(client)
  } finally {
    client.socket.destroy()
  }
}

test('without authorizer.class.name the ACL APIs answer SECURITY_DISABLED', async () => {
  const cluster = await startBroker()
  try {
    await withClient(cluster, 0, async (client) => {
      const created = await rawCall<CreateAclsResponse>(client, ApiKey.CreateAcls, 3, {
        creations: [creation()],
      })
      assert.equal(created.results[0].errorCode, ErrorCode.SECURITY_DISABLED)
      const described = await rawCall<DescribeAclsResponse>(client, ApiKey.DescribeAcls, 3, anyFilter)
      assert.equal(described.errorCode, ErrorCode.SECURITY_DISABLED)
      const deleted = await rawCall<DeleteAclsResponse>(client, ApiKey.DeleteAcls, 3, {
        filters: [anyFilter],
      })
      assert.equal(deleted.filterResults[0].errorCode, ErrorCode.SECURITY_DISABLED)
    })
  } finally {
    await cluster.stop()
  }
})

test('a principal without ALTER/DESCRIBE on the cluster gets CLUSTER_AUTHORIZATION_FAILED', async () => {
  const cluster = await startBroker({ properties: { 'authorizer.class.name': AUTHORIZER } })
  try {
    await withClient(cluster, 0, async (client) => {
      const created = await rawCall<CreateAclsResponse>(client, ApiKey.CreateAcls, 2, {
        creations: [creation()],
      })
      assert.equal(created.results[0].errorCode, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
      const described = await rawCall<DescribeAclsResponse>(client, ApiKey.DescribeAcls, 2, anyFilter)
      assert.equal(described.errorCode, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
      const deleted = await rawCall<DeleteAclsResponse>(client, ApiKey.DeleteAcls, 2, {
        filters: [anyFilter],
      })
      assert.equal(deleted.filterResults[0].errorCode, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
      // AlterReplicaLogDirs: every partition refused, the dir not even looked at (as Kafka).
      const moved = await rawCall<AlterReplicaLogDirsResponse>(client, ApiKey.AlterReplicaLogDirs, 2, {
        dirs: [{ path: '/no/such/dir', topics: [{ name: 't', partitions: [0, 1] }] }],
      })
      assert.deepEqual(
        moved.results.flatMap((t) => t.partitions.map((p) => p.errorCode)),
        [ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED],
      )
    })
  } finally {
    await cluster.stop()
  }
})

test('create, describe by MATCH filter, delete; invalid bindings and filters get INVALID_REQUEST', async () => {
  const cluster = await startBroker({
    properties: { 'authorizer.class.name': AUTHORIZER, 'super.users': 'User:ANONYMOUS' },
  })
  try {
    await withClient(cluster, 0, async (client) => {
      const created = await rawCall<CreateAclsResponse>(client, ApiKey.CreateAcls, 3, {
        creations: [
          creation(),
          creation(),
          creation({
            resourceName: 'orders.',
            resourcePatternType: PatternType.PREFIXED,
            operation: AclOperation.WRITE,
          }),
          creation({ resourceType: 0 }),
          creation({ resourceType: 42 }),
          creation({ operation: AclOperation.ANY }),
          creation({ operation: 99 }),
          creation({ resourcePatternType: PatternType.MATCH }),
          creation({ permissionType: AclPermissionType.ANY }),
          creation({ principal: 'alice' }),
          creation({ resourceType: ResourceType.CLUSTER, resourceName: 'other' }),
        ],
      })
      assert.deepEqual(
        created.results.map((r) => r.errorCode),
        [0, 0, 0, ...Array(8).fill(ErrorCode.INVALID_REQUEST)],
      )
      assert.ok(
        created.results.slice(3).every((r) => typeof r.errorMessage === 'string' && r.errorMessage !== ''),
      )

      const match = await rawCall<DescribeAclsResponse>(client, ApiKey.DescribeAcls, 3, {
        ...anyFilter,
        resourceTypeFilter: ResourceType.TOPIC,
        resourceNameFilter: 'orders.eu',
        patternTypeFilter: PatternType.MATCH,
      })
      assert.equal(match.errorCode, ErrorCode.NONE)
      assert.deepEqual(match.resources, [
        {
          resourceType: ResourceType.TOPIC,
          resourceName: 'orders.',
          patternType: PatternType.PREFIXED,
          acls: [
            {
              principal: 'User:alice',
              host: '*',
              operation: AclOperation.WRITE,
              permissionType: AclPermissionType.ALLOW,
            },
          ],
        },
      ])
      const all = await rawCall<DescribeAclsResponse>(client, ApiKey.DescribeAcls, 1, anyFilter)
      assert.equal(all.resources.length, 2, 'the duplicate creation left one ACL')
      const v0 = await rawCall<DescribeAclsResponse>(client, ApiKey.DescribeAcls, 0, {
        ...anyFilter,
        patternTypeFilter: PatternType.LITERAL,
      })
      assert.deepEqual(
        v0.resources.map((r) => r.resourceName),
        ['orders'],
      )

      const badFilter = await rawCall<DescribeAclsResponse>(client, ApiKey.DescribeAcls, 3, {
        ...anyFilter,
        operation: 0,
      })
      assert.equal(badFilter.errorCode, ErrorCode.INVALID_REQUEST)
      const badDelete = await rawCall<DeleteAclsResponse>(client, ApiKey.DeleteAcls, 3, {
        filters: [anyFilter, { ...anyFilter, resourceTypeFilter: 77 }],
      })
      assert.deepEqual(
        badDelete.filterResults.map((r) => r.errorCode),
        [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST],
      )
      assert.equal(
        (await rawCall<DescribeAclsResponse>(client, ApiKey.DescribeAcls, 3, anyFilter)).resources.length,
        2,
      )

      const deleted = await rawCall<DeleteAclsResponse>(client, ApiKey.DeleteAcls, 3, {
        filters: [
          { ...anyFilter, patternTypeFilter: PatternType.PREFIXED },
          { ...anyFilter, principalFilter: 'User:bob' },
        ],
      })
      assert.deepEqual(
        deleted.filterResults.map((r) => [r.errorCode, r.matchingAcls.map((a) => a.resourceName)]),
        [
          [0, ['orders.']],
          [0, []],
        ],
      )
      const left = await rawCall<DescribeAclsResponse>(client, ApiKey.DescribeAcls, 3, anyFilter)
      assert.deepEqual(
        left.resources.map((r) => [r.resourceName, r.patternType]),
        [['orders', PatternType.LITERAL]],
      )
    })
  } finally {
    await cluster.stop()
  }
})

test('ACLs survive a restart and are shared by the brokers of a cluster', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-acls-'))
  const properties = { 'authorizer.class.name': AUTHORIZER, 'super.users': 'User:ANONYMOUS' }
  try {
    let cluster = await startCluster({ brokers: 2, port: 0, dataDir, properties })
    try {
      await withClient(cluster, 0, async (client) => {
        const created = await rawCall<CreateAclsResponse>(client, ApiKey.CreateAcls, 3, {
          creations: [creation()],
        })
        assert.equal(created.results[0].errorCode, ErrorCode.NONE)
      })
      const alice = { principal: 'User:alice', host: '127.0.0.1' }
      const deadline = Date.now() + 5000
      while (
        !cluster.brokers[1].authorizer.authorize(alice, AclOperation.READ, ResourceType.TOPIC, 'orders')
      ) {
        assert.ok(Date.now() < deadline, 'broker 1 never saw the ACL created on broker 0')
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    } finally {
      await cluster.stop()
    }
    cluster = await startCluster({ brokers: 2, port: 0, dataDir, properties })
    try {
      const described = await withClient(cluster, 1, (client) =>
        rawCall<DescribeAclsResponse>(client, ApiKey.DescribeAcls, 3, anyFilter),
      )
      assert.deepEqual(
        described.resources.map((r) => r.resourceName),
        ['orders'],
      )
      const alice = { principal: 'User:alice', host: '127.0.0.1' }
      assert.equal(
        cluster.brokers[0].authorizer.authorize(alice, AclOperation.READ, ResourceType.TOPIC, 'orders'),
        true,
      )
      assert.equal(
        cluster.brokers[0].authorizer.authorize(alice, AclOperation.WRITE, ResourceType.TOPIC, 'orders'),
        false,
      )
    } finally {
      await cluster.stop()
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true })
  }
})

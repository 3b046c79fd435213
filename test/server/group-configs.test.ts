/**
 * Issue 33 items 2 and 7: group configs (ConfigResource type GROUP, Kafka 4.4's
 * GroupConfig) over raw requests on one broker: IncrementalAlterConfigs sets and deletes
 * them, DescribeConfigs answers every group config (GROUP_CONFIG for a set one,
 * DEFAULT_CONFIG with the broker's value otherwise), ListConfigResources lists the groups
 * that set some; unknown names, unparsable values and values outside the broker's bounds
 * are INVALID_CONFIG with Kafka's messages; a group denied by ACLs is
 * GROUP_AUTHORIZATION_FAILED. The values applied are checked through ConsumerGroupHeartbeat
 * (the heartbeat interval a member is given).
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import {
  type AlterConfigsResponse,
  ApiKey,
  type ConsumerGroupHeartbeatResponse,
  type DescribeConfigsResponse,
  type IncrementalAlterConfigsResponse,
  type ListConfigResourcesResponse,
} from '../../src/protocol/generated/index.js'
import {
  AclOperation,
  AclPermissionType,
  PatternType,
  ResourceType,
} from '../../src/security/authorizer/acl.js'
import type { Cluster } from '../../src/server/cluster.js'
import { startBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { waitUntil } from '../helpers/wait.js'

const GROUP_RESOURCE = 32
const GROUP_CONFIG_SOURCE = 8
const DEFAULT_CONFIG_SOURCE = 5
const STATIC_BROKER_CONFIG_SOURCE = 4
const SET = 0
const DELETE = 1
const GROUP = 'configured-group'
const DENIED_GROUP = 'denied-config-group'
/** May be described, not altered. */
const READ_ONLY_GROUP = 'read-only-config-group'

describe('group configs (ConfigResource GROUP)', () => {
  let cluster: Cluster | undefined
  let raw: RawClient | undefined
  before(async () => {
    cluster = await startBroker({
      port: 0,
      properties: {
        'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
        'allow.everyone.if.no.acl.found': true,
        'offsets.topic.num.partitions': 1,
        'group.share.record.lock.duration.ms': 20000,
      },
    })
    raw = await RawClient.connect(Number(cluster.bootstrapServers.split(':')[1]))
    const created = await rawCall<{ results: { errorCode: number }[] }>(raw, ApiKey.CreateAcls, 3, {
      creations: [
        {
          resourceType: ResourceType.GROUP,
          resourceName: DENIED_GROUP,
          resourcePatternType: PatternType.LITERAL,
          principal: 'User:ANONYMOUS',
          host: '*',
          operation: AclOperation.ALL,
          permissionType: AclPermissionType.DENY,
        },
        {
          resourceType: ResourceType.GROUP,
          resourceName: READ_ONLY_GROUP,
          resourcePatternType: PatternType.LITERAL,
          principal: 'User:ANONYMOUS',
          host: '*',
          operation: AclOperation.ALTER_CONFIGS,
          permissionType: AclPermissionType.DENY,
        },
        // A group with ACLs is no longer "no ACL found": describing needs its own ALLOW.
        {
          resourceType: ResourceType.GROUP,
          resourceName: READ_ONLY_GROUP,
          resourcePatternType: PatternType.LITERAL,
          principal: 'User:ANONYMOUS',
          host: '*',
          operation: AclOperation.DESCRIBE_CONFIGS,
          permissionType: AclPermissionType.ALLOW,
        },
      ],
    })
    assert.deepEqual(
      created.results.map((r) => r.errorCode),
      [0, 0, 0],
    )
  })
  after(async () => {
    raw?.close()
    await cluster?.stop()
  })

  const alter = async (groupId: string, ops: { name: string; op: number; value: string | null }[]) => {
    const response = await rawCall<IncrementalAlterConfigsResponse>(
      raw as RawClient,
      ApiKey.IncrementalAlterConfigs,
      1,
      {
        resources: [
          {
            resourceType: GROUP_RESOURCE,
            resourceName: groupId,
            configs: ops.map((o) => ({ name: o.name, configOperation: o.op, value: o.value })),
          },
        ],
        validateOnly: false,
      },
    )
    const r = response.responses[0]
    return { errorCode: r.errorCode, errorMessage: r.errorMessage }
  }
  const describeGroup = async (groupId: string) => {
    const response = await rawCall<DescribeConfigsResponse>(raw as RawClient, ApiKey.DescribeConfigs, 4, {
      resources: [{ resourceType: GROUP_RESOURCE, resourceName: groupId, configurationKeys: null }],
      includeSynonyms: true,
      includeDocumentation: false,
    })
    const r = response.results[0]
    return {
      errorCode: r.errorCode,
      configs: new Map(
        r.configs.map((c) => [
          c.name,
          {
            value: c.value,
            source: c.configSource,
            synonyms: c.synonyms.map((s) => ({ name: s.name, value: s.value, source: s.source })),
          },
        ]),
      ),
    }
  }
  const listedGroups = async () => {
    const response = await rawCall<ListConfigResourcesResponse>(
      raw as RawClient,
      ApiKey.ListConfigResources,
      1,
      {
        resourceTypes: [GROUP_RESOURCE],
      },
    )
    assert.equal(response.errorCode, ErrorCode.NONE)
    return response.configResources.map((r) => r.resourceName)
  }

  it('sets, describes, lists and deletes a group config', async () => {
    const fresh = await describeGroup(GROUP)
    assert.equal(fresh.errorCode, ErrorCode.NONE)
    // Every Kafka 4.4 group config, the broker's value by default.
    assert.equal(fresh.configs.size, 27)
    // The broker's group.share.record.lock.duration.ms, set in its properties.
    assert.deepEqual(fresh.configs.get('share.record.lock.duration.ms'), {
      value: '20000',
      source: STATIC_BROKER_CONFIG_SOURCE,
      synonyms: [
        { name: 'group.share.record.lock.duration.ms', value: '20000', source: STATIC_BROKER_CONFIG_SOURCE },
      ],
    })
    assert.deepEqual(fresh.configs.get('share.auto.offset.reset')?.value, 'latest')
    assert.deepEqual(fresh.configs.get('share.auto.offset.reset')?.source, DEFAULT_CONFIG_SOURCE)

    const set = await alter(GROUP, [
      { name: 'share.auto.offset.reset', op: SET, value: 'earliest' },
      { name: 'consumer.heartbeat.interval.ms', op: SET, value: '7000' },
      { name: 'streams.num.standby.replicas', op: SET, value: '1' },
    ])
    assert.deepEqual(set, { errorCode: ErrorCode.NONE, errorMessage: null })
    const described = await describeGroup(GROUP)
    assert.deepEqual(described.configs.get('share.auto.offset.reset')?.value, 'earliest')
    assert.deepEqual(described.configs.get('share.auto.offset.reset')?.source, GROUP_CONFIG_SOURCE)
    // Kafka 4.4's synonyms: the group's value, then the broker's.
    assert.deepEqual(described.configs.get('consumer.heartbeat.interval.ms'), {
      value: '7000',
      source: GROUP_CONFIG_SOURCE,
      synonyms: [
        { name: 'consumer.heartbeat.interval.ms', value: '7000', source: GROUP_CONFIG_SOURCE },
        { name: 'group.consumer.heartbeat.interval.ms', value: '5000', source: DEFAULT_CONFIG_SOURCE },
      ],
    })
    assert.deepEqual(described.configs.get('consumer.session.timeout.ms')?.source, DEFAULT_CONFIG_SOURCE)
    assert.deepEqual(await listedGroups(), [GROUP])

    const deleted = await alter(GROUP, [
      { name: 'share.auto.offset.reset', op: DELETE, value: null },
      { name: 'streams.num.standby.replicas', op: DELETE, value: null },
    ])
    assert.equal(deleted.errorCode, ErrorCode.NONE)
    const after = await describeGroup(GROUP)
    assert.deepEqual(after.configs.get('share.auto.offset.reset')?.value, 'latest')
    assert.deepEqual(after.configs.get('share.auto.offset.reset')?.source, DEFAULT_CONFIG_SOURCE)
    assert.deepEqual(await listedGroups(), [GROUP], 'consumer.heartbeat.interval.ms is still set')
    assert.equal(
      (await alter(GROUP, [{ name: 'consumer.heartbeat.interval.ms', op: DELETE, value: null }])).errorCode,
      0,
    )
    assert.deepEqual(await listedGroups(), [])
  })

  it('takes legacy AlterConfigs on a group, as Kafka 4.4 does', async () => {
    const legacy = (configs: { name: string; value: string }[]) =>
      rawCall<AlterConfigsResponse>(raw as RawClient, ApiKey.AlterConfigs, 2, {
        resources: [{ resourceType: GROUP_RESOURCE, resourceName: 'legacy-group', configs }],
        validateOnly: false,
      }).then((r) => r.responses[0].errorCode)
    assert.equal(await legacy([{ name: 'share.auto.offset.reset', value: 'earliest' }]), ErrorCode.NONE)
    assert.equal(
      (await describeGroup('legacy-group')).configs.get('share.auto.offset.reset')?.value,
      'earliest',
    )
    assert.equal(
      await legacy([{ name: 'share.auto.offset.reset', value: 'never' }]),
      ErrorCode.INVALID_CONFIG,
    )
    // The whole set is replaced: none left, the group is no longer listed.
    assert.equal(await legacy([]), ErrorCode.NONE)
    assert.deepEqual(await listedGroups(), [])
  })

  it('refuses bad names and values with Kafka messages', async () => {
    const cases: [string, string, string][] = [
      ['no.such.config', '1', 'Unknown group config name: no.such.config'],
      [
        'consumer.session.timeout.ms',
        '1000',
        'consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.',
      ],
      [
        'share.record.lock.duration.ms',
        '90000',
        'share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive.',
      ],
      [
        'consumer.heartbeat.interval.ms',
        'often',
        'Invalid value often for configuration consumer.heartbeat.interval.ms: Not a number of type INT',
      ],
      // Kafka's streams bounds: one-sided for the standbys, warm-ups and task offset interval.
      ['streams.num.standby.replicas', '3', 'streams.num.standby.replicas must be less than or equal to 2'],
      ['streams.num.warmup.replicas', '21', 'streams.num.warmup.replicas must be less than or equal to 20'],
      [
        'streams.task.offset.interval.ms',
        '14999',
        'streams.task.offset.interval.ms must be greater than or equal to 15000',
      ],
      [
        'streams.assignment.interval.ms',
        '15001',
        'streams.assignment.interval.ms must be in the range 0 to 15000 inclusive.',
      ],
      [
        'share.auto.offset.reset',
        'sideways',
        'Invalid value sideways for configuration share.auto.offset.reset: String must be one of: latest, earliest',
      ],
      [
        'consumer.assignment.interval.ms',
        '15001',
        'consumer.assignment.interval.ms must be in the range 0 to 15000 inclusive.',
      ],
      [
        'share.assignment.interval.ms',
        '20000',
        'share.assignment.interval.ms must be in the range 0 to 15000 inclusive.',
      ],
      [
        'errors.deadletterqueue.topic.name',
        '__dlq',
        "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'",
      ],
    ]
    for (const [name, value, message] of cases) {
      const refused = await alter(GROUP, [{ name, op: SET, value }])
      assert.deepEqual(refused, { errorCode: ErrorCode.INVALID_CONFIG, errorMessage: message }, name)
    }
    assert.deepEqual(await listedGroups(), [], 'nothing was stored')
    assert.deepEqual(await alter('', [{ name: 'share.auto.offset.reset', op: SET, value: 'earliest' }]), {
      errorCode: ErrorCode.INVALID_REQUEST,
      errorMessage: 'Default group resources are not allowed.',
    })
  })

  it('answers GROUP_AUTHORIZATION_FAILED for a denied group', { timeout: 60_000 }, async () => {
    await waitUntil('the group ACL applies', 30_000, async () => {
      return (await describeGroup(DENIED_GROUP)).errorCode === ErrorCode.GROUP_AUTHORIZATION_FAILED
    })
    const refused = await alter(DENIED_GROUP, [
      { name: 'share.auto.offset.reset', op: SET, value: 'earliest' },
    ])
    assert.equal(refused.errorCode, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    // ALTER_CONFIGS denied, DESCRIBE_CONFIGS not: described, not altered.
    assert.equal((await describeGroup(READ_ONLY_GROUP)).errorCode, ErrorCode.NONE)
    const readOnly = await alter(READ_ONLY_GROUP, [
      { name: 'share.auto.offset.reset', op: SET, value: 'earliest' },
    ])
    assert.equal(readOnly.errorCode, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    assert.deepEqual(await listedGroups(), [])
  })

  it('gives a consumer group member its group heartbeat interval', { timeout: 60_000 }, async () => {
    const heartbeat = () =>
      rawCall<ConsumerGroupHeartbeatResponse>(raw as RawClient, ApiKey.ConsumerGroupHeartbeat, 1, {
        groupId: GROUP,
        memberId: randomUUID(),
        memberEpoch: 0,
        instanceId: null,
        rackId: null,
        rebalanceTimeoutMs: 30000,
        subscribedTopicNames: ['any-topic'],
        subscribedTopicRegex: null,
        serverAssignor: null,
        topicPartitions: [],
      })
    // Makes __consumer_offsets, so that the group coordinator answers.
    const admin = new Admin({ bootstrapServers: (cluster as Cluster).bootstrapServers })
    await admin.findCoordinator(GROUP)
    admin.close()
    let first: ConsumerGroupHeartbeatResponse | undefined
    await waitUntil('the coordinator answers', 30_000, async () => {
      first = await heartbeat()
      if (
        first.errorCode !== ErrorCode.COORDINATOR_LOAD_IN_PROGRESS &&
        first.errorCode !== ErrorCode.NOT_COORDINATOR
      )
        assert.equal(first.errorCode, ErrorCode.NONE, first.errorMessage ?? '')
      return first.errorCode === ErrorCode.NONE
    })
    assert.equal(first?.heartbeatIntervalMs, 5000, "the broker's group.consumer.heartbeat.interval.ms")
    assert.equal(
      (await alter(GROUP, [{ name: 'consumer.heartbeat.interval.ms', op: SET, value: '9000' }])).errorCode,
      0,
    )
    const second = await heartbeat()
    assert.equal(second.errorCode, ErrorCode.NONE)
    assert.equal(second.heartbeatIntervalMs, 9000, "the group's consumer.heartbeat.interval.ms")
    assert.equal(
      (await alter(GROUP, [{ name: 'consumer.heartbeat.interval.ms', op: DELETE, value: null }])).errorCode,
      0,
    )
  })
})

/**
 * Issue 33 item 4, KIP-1331: StreamsGroupTopologyDescriptionUpdate (key 93) with raw requests
 * on tidelog and on Apache Kafka 4.4, both with Kafka's in-memory topology description plugin
 * (`group.streams.topology.description.plugin.class`); both must answer every step alike:
 * ApiVersions lists key 93 v0; a member's join is asked for the description
 * (TopologyDescriptionRequired) and its next heartbeat is not (Kafka's backoff); an update
 * for an unknown group, an unknown or empty member, another topology epoch, an unknown node
 * type or a global store without a processor is refused with Kafka's code and message;
 * StreamsGroupDescribe v1 says NOT_STORED before, and after a good update AVAILABLE with the
 * description as Kafka keeps it (each node with only its type's fields, no duplicates).
 * A tidelog broker without the setting answers UNSUPPORTED_VERSION, as Kafka's default.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { Cluster } from '../../src/server/cluster.js'
import { createTopics } from '../client/helpers.js'
import { describeBesideKafka } from '../helpers/beside-kafka.js'
import { startBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { streamsJoinFields } from '../helpers/streams-heartbeat.js'
import { waitUntil } from '../helpers/wait.js'

const GROUP = 'topology-description-app'
const TOPIC = 'topology-description-in'
/** Kafka Uuids in their base64url form, as the Java client makes member ids. */
const MEMBER = 'dG9wb2xvZ3ktbWVtYmVyMDE'
const STRANGER = 'dG9wb2xvZ3ktbWVtYmVyMDI'
const PLUGIN = {
  'group.streams.topology.description.plugin.class':
    'org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin',
}
const RETRIABLE = new Set<number>([
  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
  ErrorCode.NOT_COORDINATOR,
])

const TOPOLOGY = {
  epoch: 1,
  subtopologies: [
    {
      subtopologyId: '0',
      sourceTopics: [TOPIC],
      sourceTopicRegex: [],
      stateChangelogTopics: [],
      repartitionSinkTopics: [],
      repartitionSourceTopics: [],
      copartitionGroups: [],
    },
  ],
}

const node = (name: string, nodeType: number, extra: object = {}) => ({
  name,
  nodeType,
  sourceTopics: [],
  sinkTopic: null,
  stores: [],
  successors: [],
  ...extra,
})

/** A source with a store and a repeated successor: Kafka keeps neither. */
const DESCRIPTION = {
  subtopologies: [
    {
      subtopologyId: '0',
      nodes: [
        node('KSTREAM-SOURCE-0000000000', 1, {
          sourceTopics: [TOPIC, TOPIC],
          stores: ['not-a-source-field'],
          successors: ['KSTREAM-MAPVALUES-0000000001', 'KSTREAM-MAPVALUES-0000000001'],
        }),
        node('KSTREAM-MAPVALUES-0000000001', 2, { stores: ['s'], successors: ['KSTREAM-SINK-0000000002'] }),
        node('KSTREAM-SINK-0000000002', 3, { sinkTopic: 'out', sourceTopics: ['ignored'] }),
      ],
    },
  ],
  globalStores: [
    {
      source: node('KSTREAM-SOURCE-0000000003', 1, { sourceTopics: ['global'] }),
      processor: node('KTABLE-SOURCE-0000000004', 2, { stores: ['global-store'] }),
    },
  ],
}

interface Answer {
  errorCode: number
  errorMessage: string | null
}

async function sequence(bootstrap: string): Promise<string[]> {
  await createTopics(bootstrap, [{ topic: TOPIC, partitions: 1, replicationFactor: 1 }])
  const admin = new Admin({ bootstrapServers: bootstrap })
  await admin.findCoordinator(GROUP)
  admin.close()
  const raw = await RawClient.connect(Number(bootstrap.split(':')[1]))
  const lines: string[] = []
  try {
    const versions = await rawCall<{ apiKeys: { apiKey: number; minVersion: number; maxVersion: number }[] }>(
      raw,
      ApiKey.ApiVersions,
      3,
      { clientSoftwareName: 'raw', clientSoftwareVersion: '1' },
    )
    const key93 = versions.apiKeys.find((k) => k.apiKey === ApiKey.StreamsGroupTopologyDescriptionUpdate)
    lines.push(`api-versions 93 ${key93 ? `${key93.minVersion}-${key93.maxVersion}` : 'absent'}`)
    const heartbeat = (body: object) =>
      rawCall<Answer & { memberEpoch: number; topologyDescriptionRequired: boolean }>(
        raw,
        ApiKey.StreamsGroupHeartbeat,
        1,
        { groupId: GROUP, memberId: MEMBER, ...body },
      )
    let joined: Awaited<ReturnType<typeof heartbeat>> | undefined
    await waitUntil('the streams member joins', 60_000, async () => {
      joined = await heartbeat(streamsJoinFields(TOPOLOGY, 'process-1'))
      return !RETRIABLE.has(joined.errorCode)
    })
    assert.ok(joined)
    lines.push(`join ${joined.errorCode} required=${joined.topologyDescriptionRequired}`)
    const again = await heartbeat({ memberEpoch: joined.memberEpoch })
    lines.push(`heartbeat ${again.errorCode} required=${again.topologyDescriptionRequired}`)

    const update = async (label: string, body: object) => {
      const r = await rawCall<Answer>(raw, ApiKey.StreamsGroupTopologyDescriptionUpdate, 0, {
        groupId: GROUP,
        memberId: MEMBER,
        topologyEpoch: 1,
        topologyDescription: DESCRIPTION,
        ...body,
      })
      lines.push(`update ${label} ${r.errorCode} ${r.errorMessage}`)
    }
    const describeGroup = async (label: string, includeTopologyDescription: boolean) => {
      const r = await rawCall<{
        groups: { errorCode: number; topologyDescriptionStatus: number; topologyDescription: unknown }[]
      }>(raw, ApiKey.StreamsGroupDescribe, 1, {
        groupIds: [GROUP],
        includeAuthorizedOperations: false,
        includeTopologyDescription,
      })
      const g = r.groups[0]
      lines.push(
        `describe ${label} ${g?.errorCode} status=${g?.topologyDescriptionStatus} ${JSON.stringify(g?.topologyDescription)}`,
      )
    }
    await update('unknown-group', { groupId: `${GROUP}-absent` })
    await update('unknown-member', { memberId: STRANGER })
    await update('empty-member', { memberId: '' })
    await update('other-epoch', { topologyEpoch: 2 })
    await update('unknown-node-type', {
      topologyDescription: {
        subtopologies: [{ subtopologyId: '0', nodes: [node('n', 9)] }],
        globalStores: [],
      },
    })
    await update('global-store-without-processor', {
      topologyDescription: {
        subtopologies: [],
        globalStores: [{ source: node('s', 1), processor: node('k', 3) }],
      },
    })
    await describeGroup('before', true)
    await update('stored', {})
    await describeGroup('after', true)
    await describeGroup('not-requested', false)
    const later = await heartbeat({ memberEpoch: joined.memberEpoch })
    lines.push(`heartbeat-after ${later.errorCode} required=${later.topologyDescriptionRequired}`)
    await heartbeat({ memberEpoch: -1 })
  } finally {
    raw.close()
  }
  return lines
}

describeBesideKafka(
  'StreamsGroupTopologyDescriptionUpdate beside Kafka 4.4',
  {
    tidelog: { properties: { 'offsets.topic.num.partitions': 1, ...PLUGIN } },
    kafka: { properties: PLUGIN },
    sequence,
  },
  () => {
    describe('without a description store', () => {
      let cluster: Cluster | undefined
      before(async () => {
        cluster = await startBroker({ properties: { 'offsets.topic.num.partitions': 1 } })
      })
      after(async () => {
        await cluster?.stop()
      })
      it("answers UNSUPPORTED_VERSION with Kafka's message", async () => {
        assert.ok(cluster)
        const raw = await RawClient.connect(Number(cluster.bootstrapServers.split(':')[1]))
        try {
          const r = await rawCall<Answer>(raw, ApiKey.StreamsGroupTopologyDescriptionUpdate, 0, {
            groupId: GROUP,
            memberId: MEMBER,
            topologyEpoch: 1,
            topologyDescription: DESCRIPTION,
          })
          assert.deepEqual(
            { errorCode: r.errorCode, errorMessage: r.errorMessage },
            {
              errorCode: ErrorCode.UNSUPPORTED_VERSION,
              errorMessage: 'The broker has no streams group topology description plugin configured.',
            },
          )
        } finally {
          raw.close()
        }
      })
    })
  },
)

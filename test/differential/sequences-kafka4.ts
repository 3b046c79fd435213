/**
 * Issue 33 item 7: bad input to the APIs Kafka 4 added, compared field by field with Kafka
 * 4.4 as the other fixed sequences are (sequences.ts appends these to its fixed set). Share
 * groups (acknowledgements of offsets never delivered or already acknowledged, stale share
 * session epochs, a group of the wrong type both ways, share group offsets of a live group),
 * streams groups (the wrong group type both ways, invalid topologies), client telemetry
 * (unknown subscription id, bad compression, a push too soon), ListConfigResources, feature
 * levels no broker knows, a transaction version the producer did not start its transaction
 * with, and delegation tokens on a listener without SASL.
 */
import { gzipSync } from 'node:zlib'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { Sequence, Step, TargetContext } from './harness.js'
import {
  addPartitionsToTxn,
  batch,
  createTopics,
  endTxn,
  initProducerId,
  metadata,
  offsetCommit,
  produce,
  txnOffsetCommit,
} from './requests.js'

/** Kafka Uuids in their base64url form, as the Java client makes member ids. */
const SHARE_MEMBER = 'azQtc2hhcmUtbWVtYmVyMQ'
const CONSUMER_MEMBER = 'azQtY29uc3VtZXItbWVtYjE'
const STREAMS_MEMBER = 'azQtc3RyZWFtcy1tZW1iZXI'
const STRANGER = 'azQtc3RyYW5nZXItbWVtYjE'
const UNKNOWN_TOPIC_ID = 'AAAAAAAAAAAAAAAAAAAAAQ'

const SHARE_TOPIC = 'k4-share'
const SHARE_GROUP = 'k4-share-group'
const CLASSIC_GROUP = 'k4-classic'
const CONSUMER_GROUP = 'k4-consumer'
const STREAMS_GROUP = 'k4-streams'
const STREAMS_TOPIC = 'k4-streams-in'

/** ConfigResource types. */
const RESOURCE_CLIENT_METRICS = 16
const RESOURCE_GROUP = 32

/** ShareAcknowledge / ShareFetch acknowledge types. */
const ACCEPT = 1
const RELEASE = 2

function createTopic(name: string, partitions = 1): Step {
  return {
    name: `create ${name}`,
    apiKey: ApiKey.CreateTopics,
    body: (ctx) => createTopics(ctx, [{ name, partitions }]),
  }
}

/** Uncompared: resends Metadata until every partition of `name` has a leader (and learns its id). */
function leaderOf(name: string): Step {
  return {
    name: `leader of ${name}`,
    apiKey: ApiKey.Metadata,
    body: () => metadata([name]),
    compare: false,
    retryWhile: (answer) => {
      const [topic] = answer.topics as { errorCode: number; partitions: { leaderId: number }[] }[]
      return (
        topic.errorCode !== 0 || topic.partitions.length === 0 || topic.partitions.some((p) => p.leaderId < 0)
      )
    },
  }
}

/** Uncompared: FindCoordinator of `keys` until each has one (Kafka creates its internal topics lazily). */
function coordinatorsOf(keys: string[], keyType: number): Step {
  return {
    name: `coordinators of ${keys.join(',')}`,
    apiKey: ApiKey.FindCoordinator,
    body: () => ({ key: '', keyType, coordinatorKeys: keys }),
    compare: false,
  }
}

// ---- share groups -----------------------------------------------------------------------------

/** The member's epoch, as the last heartbeat answered it. */
function captureEpoch(key: string) {
  return (answer: Record<string, unknown>, ctx: TargetContext) => {
    if (answer.errorCode === 0) ctx.vars.set(key, answer.memberEpoch)
  }
}

function shareHeartbeat(
  groupId: string,
  memberEpoch: (ctx: TargetContext) => number,
  topics: string[] | null,
) {
  return (ctx: TargetContext) => ({
    groupId,
    memberId: SHARE_MEMBER,
    memberEpoch: memberEpoch(ctx),
    rackId: null,
    subscribedTopicNames: topics,
  })
}

function consumerHeartbeat(groupId: string, memberId: string, memberEpoch: number) {
  return () => ({
    groupId,
    memberId,
    memberEpoch,
    rebalanceTimeoutMs: 30_000,
    subscribedTopicNames: [SHARE_TOPIC],
    topicPartitions: [],
  })
}

/**
 * The share session epoch the next request of the session carries: each request the broker
 * takes (top-level NONE) moves it on by one; `next` takes one and moves it.
 */
const SESSION_EPOCH = 'shareSessionEpoch'
function sessionEpoch(ctx: TargetContext, next: boolean): number {
  const epoch = ctx.vars.has(SESSION_EPOCH) ? ctx.variable<number>(SESSION_EPOCH) : 0
  if (next) ctx.vars.set(SESSION_EPOCH, epoch + 1)
  return epoch
}

type AckBatch = readonly [first: number, last: number, type: number]

function acknowledgements(batches: readonly AckBatch[]) {
  return batches.map(([first, last, type]) => ({
    firstOffset: BigInt(first),
    lastOffset: BigInt(last),
    acknowledgeTypes: [type],
  }))
}

function shareFetch(
  ctx: TargetContext,
  epoch: number,
  options: { acks?: readonly AckBatch[]; maxWaitMs?: number; topicId?: string } = {},
) {
  return {
    groupId: SHARE_GROUP,
    memberId: SHARE_MEMBER,
    shareSessionEpoch: epoch,
    maxWaitMs: options.maxWaitMs ?? 0,
    minBytes: 0,
    maxBytes: 1024 * 1024,
    maxRecords: 100,
    batchSize: 100,
    topics:
      epoch === -1
        ? []
        : [
            {
              topicId: options.topicId ?? ctx.topicId(SHARE_TOPIC),
              partitions: [
                {
                  partitionIndex: 0,
                  partitionMaxBytes: 0,
                  acknowledgementBatches: acknowledgements(options.acks ?? []),
                },
              ],
            },
          ],
    forgottenTopicsData: [],
  }
}

function shareAcknowledge(ctx: TargetContext, epoch: number, acks: readonly AckBatch[]) {
  return {
    groupId: SHARE_GROUP,
    memberId: SHARE_MEMBER,
    shareSessionEpoch: epoch,
    topics: [
      {
        topicId: ctx.topicId(SHARE_TOPIC),
        partitions: [{ partitionIndex: 0, acknowledgementBatches: acknowledgements(acks) }],
      },
    ],
  }
}

/** Kafka words its partition-level acknowledgement errors its own way, as every other message. */
function dropAcknowledgeMessages(answer: Record<string, unknown>): void {
  for (const topic of (answer.responses ?? []) as { partitions: Record<string, unknown>[] }[])
    for (const partition of topic.partitions)
      if ('acknowledgeErrorMessage' in partition) partition.acknowledgeErrorMessage = null
}

function acknowledgeStep(name: string, acks: readonly AckBatch[], epoch: 'next' | 'stale' | 'opening'): Step {
  return {
    name,
    apiKey: ApiKey.ShareAcknowledge,
    body: (ctx) =>
      shareAcknowledge(
        ctx,
        epoch === 'next' ? sessionEpoch(ctx, true) : epoch === 'stale' ? sessionEpoch(ctx, false) + 5 : 0,
        acks,
      ),
  }
}

const MEMBER_EPOCH = 'shareMemberEpoch'
/** Whether the join's answer already assigned the member its partition. */
const ASSIGNED = 'shareAssigned'

function describeShareOffsets(
  name: string,
  groupId: string,
  topics: { topicName: string; partitions: number[] }[] | null,
): Step {
  return { name, apiKey: ApiKey.DescribeShareGroupOffsets, body: () => ({ groups: [{ groupId, topics }] }) }
}

const shareSequence: Sequence = {
  name: 'kafka4-share-bad-input',
  steps: [
    createTopic(SHARE_TOPIC),
    leaderOf(SHARE_TOPIC),
    {
      // So that the records produced before the member joins are the ones it gets.
      name: 'group config share.auto.offset.reset=earliest',
      apiKey: ApiKey.IncrementalAlterConfigs,
      body: () => ({
        resources: [
          {
            resourceType: RESOURCE_GROUP,
            resourceName: SHARE_GROUP,
            configs: [{ name: 'share.auto.offset.reset', configOperation: 0, value: 'earliest' }],
          },
        ],
        validateOnly: false,
      }),
    },
    coordinatorsOf([SHARE_GROUP, CLASSIC_GROUP, CONSUMER_GROUP], 0),
    {
      name: 'produce 3 records',
      apiKey: ApiKey.Produce,
      body: () => produce(SHARE_TOPIC, 0, batch({ prefix: 'sh' }), -1),
    },
    {
      name: 'join',
      apiKey: ApiKey.ShareGroupHeartbeat,
      body: shareHeartbeat(SHARE_GROUP, () => 0, [SHARE_TOPIC]),
      capture: (answer, ctx) => {
        captureEpoch(MEMBER_EPOCH)(answer, ctx)
        const assignment = answer.assignment as { topicPartitions: unknown[] } | null
        ctx.vars.set(ASSIGNED, (assignment?.topicPartitions.length ?? 0) > 0)
      },
    },
    {
      name: 'heartbeat until assigned',
      apiKey: ApiKey.ShareGroupHeartbeat,
      body: shareHeartbeat(SHARE_GROUP, (ctx) => ctx.variable<number>(MEMBER_EPOCH), null),
      // A broker that assigned at the join answers no assignment now (it did not change).
      retryWhile: (answer, ctx) =>
        answer.errorCode === 0 && answer.assignment === null && !ctx.vars.get(ASSIGNED),
      capture: captureEpoch(MEMBER_EPOCH),
    },
    {
      name: 'heartbeat with an epoch ahead of the member',
      apiKey: ApiKey.ShareGroupHeartbeat,
      body: shareHeartbeat(SHARE_GROUP, (ctx) => ctx.variable<number>(MEMBER_EPOCH) + 5, null),
    },
    {
      name: 'heartbeat of an unknown member',
      apiKey: ApiKey.ShareGroupHeartbeat,
      body: (ctx) => ({
        ...shareHeartbeat(SHARE_GROUP, (c) => c.variable<number>(MEMBER_EPOCH), null)(ctx),
        memberId: STRANGER,
      }),
    },
    {
      name: 'join without a member id',
      apiKey: ApiKey.ShareGroupHeartbeat,
      body: (ctx) => ({ ...shareHeartbeat(SHARE_GROUP, () => 0, [SHARE_TOPIC])(ctx), memberId: '' }),
    },
    {
      name: 'join without subscribed topics',
      apiKey: ApiKey.ShareGroupHeartbeat,
      body: (ctx) => ({ ...shareHeartbeat(SHARE_GROUP, () => 0, null)(ctx), memberId: STRANGER }),
    },
    {
      name: 'heartbeat with member epoch -2',
      apiKey: ApiKey.ShareGroupHeartbeat,
      body: shareHeartbeat(SHARE_GROUP, () => -2, null),
    },
    {
      name: 'heartbeat of a group that does not exist',
      apiKey: ApiKey.ShareGroupHeartbeat,
      body: shareHeartbeat('k4-nobody', () => 3, null),
    },
    {
      name: 'fetch: no member id',
      apiKey: ApiKey.ShareFetch,
      body: (ctx) => ({ ...shareFetch(ctx, 0), memberId: '' }),
    },
    {
      name: 'fetch: the session opened with acknowledgements',
      apiKey: ApiKey.ShareFetch,
      body: (ctx) => shareFetch(ctx, 0, { acks: [[0, 0, ACCEPT]] }),
    },
    {
      name: 'fetch: a session epoch before the session',
      apiKey: ApiKey.ShareFetch,
      body: (ctx) => shareFetch(ctx, 3),
    },
    {
      name: 'fetch: open the session, until records are acquired',
      apiKey: ApiKey.ShareFetch,
      body: (ctx) => shareFetch(ctx, sessionEpoch(ctx, true), { maxWaitMs: 200 }),
      retryWhile: (answer) => {
        const partitions = (answer.responses as { partitions: { acquiredRecords: unknown[] }[] }[]).flatMap(
          (t) => t.partitions,
        )
        return answer.errorCode === 0 && partitions.every((p) => p.acquiredRecords.length === 0)
      },
    },
    // Before any acknowledgement: Kafka persists a moved start offset later than it answers.
    describeShareOffsets('DescribeShareGroupOffsets of the share group', SHARE_GROUP, [
      { topicName: SHARE_TOPIC, partitions: [0] },
    ]),
    {
      name: 'fetch: a stale session epoch',
      apiKey: ApiKey.ShareFetch,
      body: (ctx) => shareFetch(ctx, sessionEpoch(ctx, false) + 5),
    },
    acknowledgeStep('acknowledge: the session opening epoch', [[0, 0, ACCEPT]], 'opening'),
    acknowledgeStep('acknowledge: a stale session epoch', [[0, 0, ACCEPT]], 'stale'),
    acknowledgeStep('acknowledge: accept offset 0', [[0, 0, ACCEPT]], 'next'),
    acknowledgeStep('acknowledge: offset 0 already accepted', [[0, 0, ACCEPT]], 'next'),
    acknowledgeStep('acknowledge: accept offset 2', [[2, 2, ACCEPT]], 'next'),
    acknowledgeStep(
      'acknowledge: offset 2 already accepted, above the start offset',
      [[2, 2, ACCEPT]],
      'next',
    ),
    acknowledgeStep('acknowledge: offsets never delivered', [[10, 12, ACCEPT]], 'next'),
    acknowledgeStep('acknowledge: last offset before the first', [[2, 1, ACCEPT]], 'next'),
    acknowledgeStep('acknowledge: unknown acknowledge type', [[1, 1, 9]], 'next'),
    acknowledgeStep('acknowledge: RENEW without isRenewAck', [[1, 1, 4]], 'next'),
    {
      name: 'fetch: acknowledging offset 0 again with the fetch',
      apiKey: ApiKey.ShareFetch,
      body: (ctx) => shareFetch(ctx, sessionEpoch(ctx, true), { acks: [[0, 0, ACCEPT]] }),
      normalize: dropAcknowledgeMessages,
    },
    {
      name: 'fetch: an unknown topic id',
      apiKey: ApiKey.ShareFetch,
      body: (ctx) => shareFetch(ctx, sessionEpoch(ctx, true), { topicId: UNKNOWN_TOPIC_ID }),
    },
    {
      name: 'commit to a simple (classic) group',
      apiKey: ApiKey.OffsetCommit,
      version: 8,
      body: () => offsetCommit(CLASSIC_GROUP, SHARE_TOPIC, [{ partition: 0, offset: 0 }]),
    },
    {
      name: 'ShareGroupHeartbeat on a classic group',
      apiKey: ApiKey.ShareGroupHeartbeat,
      body: shareHeartbeat(CLASSIC_GROUP, () => 0, [SHARE_TOPIC]),
    },
    {
      name: 'ConsumerGroupHeartbeat: a consumer group',
      apiKey: ApiKey.ConsumerGroupHeartbeat,
      body: consumerHeartbeat(CONSUMER_GROUP, CONSUMER_MEMBER, 0),
      normalize: (answer) => {
        // The member epoch of a new group's first member: a known difference of its own.
        delete answer.memberEpoch
      },
    },
    {
      name: 'ShareGroupHeartbeat on a consumer group',
      apiKey: ApiKey.ShareGroupHeartbeat,
      body: shareHeartbeat(CONSUMER_GROUP, () => 0, [SHARE_TOPIC]),
    },
    {
      name: 'ConsumerGroupHeartbeat on a share group',
      apiKey: ApiKey.ConsumerGroupHeartbeat,
      body: consumerHeartbeat(SHARE_GROUP, CONSUMER_MEMBER, 0),
    },
    {
      name: 'ShareGroupDescribe of share, consumer, classic and unknown groups',
      apiKey: ApiKey.ShareGroupDescribe,
      body: () => ({
        groupIds: [SHARE_GROUP, CONSUMER_GROUP, CLASSIC_GROUP, 'k4-nobody'],
        includeAuthorizedOperations: false,
      }),
    },
    {
      name: 'ConsumerGroupDescribe of a share group',
      apiKey: ApiKey.ConsumerGroupDescribe,
      body: () => ({ groupIds: [SHARE_GROUP], includeAuthorizedOperations: false }),
    },
    // Not sent: Kafka 4.4 never answers DescribeShareGroupOffsets of a partition the topic lacks.
    describeShareOffsets('DescribeShareGroupOffsets of an unknown topic', SHARE_GROUP, [
      { topicName: 'k4-missing', partitions: [0] },
    ]),
    describeShareOffsets(
      'DescribeShareGroupOffsets of every topic of a consumer group',
      CONSUMER_GROUP,
      null,
    ),
    describeShareOffsets('DescribeShareGroupOffsets of every topic of an unknown group', 'k4-nobody', null),
    {
      name: 'AlterShareGroupOffsets of a group with a member',
      apiKey: ApiKey.AlterShareGroupOffsets,
      body: () => ({
        groupId: SHARE_GROUP,
        topics: [{ topicName: SHARE_TOPIC, partitions: [{ partitionIndex: 0, startOffset: 0n }] }],
      }),
    },
    {
      name: 'DeleteShareGroupOffsets of a group with a member',
      apiKey: ApiKey.DeleteShareGroupOffsets,
      body: () => ({ groupId: SHARE_GROUP, topics: [{ topicName: SHARE_TOPIC }] }),
    },
    {
      name: 'AlterShareGroupOffsets of a consumer group',
      apiKey: ApiKey.AlterShareGroupOffsets,
      body: () => ({
        groupId: CONSUMER_GROUP,
        topics: [{ topicName: SHARE_TOPIC, partitions: [{ partitionIndex: 0, startOffset: 0n }] }],
      }),
    },
    {
      name: 'fetch: close the session, releasing offset 1',
      apiKey: ApiKey.ShareFetch,
      body: (ctx) => ({
        ...shareFetch(ctx, -1),
        topics: [],
      }),
    },
    {
      name: 'acknowledge after the close',
      apiKey: ApiKey.ShareAcknowledge,
      body: (ctx) => shareAcknowledge(ctx, sessionEpoch(ctx, false), [[1, 1, RELEASE]]),
    },
    {
      name: 'leave',
      apiKey: ApiKey.ShareGroupHeartbeat,
      body: shareHeartbeat(SHARE_GROUP, () => -1, null),
    },
    {
      name: 'heartbeat after leaving',
      apiKey: ApiKey.ShareGroupHeartbeat,
      body: shareHeartbeat(SHARE_GROUP, (ctx) => ctx.variable<number>(MEMBER_EPOCH), null),
    },
    {
      name: 'AlterShareGroupOffsets of the empty group, one topic unknown',
      apiKey: ApiKey.AlterShareGroupOffsets,
      body: () => ({
        groupId: SHARE_GROUP,
        topics: [
          { topicName: SHARE_TOPIC, partitions: [{ partitionIndex: 0, startOffset: 1n }] },
          { topicName: 'k4-missing', partitions: [{ partitionIndex: 0, startOffset: 0n }] },
        ],
      }),
    },
  ],
}

// ---- streams groups ---------------------------------------------------------------------------

interface SubtopologySpec {
  readonly id: string
  readonly sources?: string[]
  readonly changelogs?: { name: string; partitions: number }[]
  readonly copartition?: number[][]
  readonly regex?: string[]
}

function topology(subtopologies: readonly SubtopologySpec[]) {
  return {
    epoch: 0,
    subtopologies: subtopologies.map((sub) => ({
      subtopologyId: sub.id,
      sourceTopics: sub.sources ?? [STREAMS_TOPIC],
      sourceTopicRegex: sub.regex ?? [],
      stateChangelogTopics: (sub.changelogs ?? []).map((c) => ({
        name: c.name,
        partitions: c.partitions,
        replicationFactor: 0,
        topicConfigs: [],
      })),
      repartitionSinkTopics: [],
      repartitionSourceTopics: [],
      copartitionGroups: (sub.copartition ?? []).map((sourceTopics) => ({
        sourceTopics,
        sourceTopicRegex: [],
        repartitionSourceTopics: [],
      })),
    })),
  }
}

function streamsJoin(
  groupId: string,
  subtopologies: readonly SubtopologySpec[] | null,
  memberId = STREAMS_MEMBER,
) {
  return () => ({
    groupId,
    memberId,
    memberEpoch: 0,
    endpointInformationEpoch: 0,
    rebalanceTimeoutMs: 30_000,
    topology: subtopologies === null ? null : topology(subtopologies),
    activeTasks: [],
    standbyTasks: [],
    warmupTasks: [],
    processId: 'k4-process',
    clientTags: [],
    taskOffsets: [],
    taskEndOffsets: [],
  })
}

function streamsStep(name: string, groupId: string, subtopologies: readonly SubtopologySpec[] | null): Step {
  return { name, apiKey: ApiKey.StreamsGroupHeartbeat, body: streamsJoin(groupId, subtopologies) }
}

const STREAMS_EPOCH = 'streamsMemberEpoch'

const streamsSequence: Sequence = {
  name: 'kafka4-streams-bad-input',
  steps: [
    createTopic(STREAMS_TOPIC),
    leaderOf(STREAMS_TOPIC),
    coordinatorsOf([STREAMS_GROUP, CONSUMER_GROUP, SHARE_GROUP], 0),
    streamsStep('join without a topology', STREAMS_GROUP, null),
    streamsStep('duplicate subtopology ids', STREAMS_GROUP, [{ id: '0' }, { id: '0' }]),
    streamsStep('a changelog topic with a partition count', STREAMS_GROUP, [
      { id: '0', changelogs: [{ name: 'k4-streams-store-changelog', partitions: 3 }] },
    ]),
    streamsStep('a copartition group naming a topic the subtopology lacks', STREAMS_GROUP, [
      { id: '0', copartition: [[0, 4]] },
    ]),
    {
      name: 'join with a regular expression for its source topics',
      apiKey: ApiKey.StreamsGroupHeartbeat,
      body: () => streamsJoin(STREAMS_GROUP, [{ id: '0', regex: ['k4-.*'] }])(),
    },
    {
      name: 'join with a topology and member epoch 3',
      apiKey: ApiKey.StreamsGroupHeartbeat,
      body: () => ({ ...streamsJoin(STREAMS_GROUP, [{ id: '0' }])(), memberEpoch: 3 }),
    },
    {
      name: 'join',
      apiKey: ApiKey.StreamsGroupHeartbeat,
      body: streamsJoin(STREAMS_GROUP, [{ id: '0' }]),
      capture: captureEpoch(STREAMS_EPOCH),
      normalize: (answer) => {
        // Whether the first heartbeat already carries tasks depends on the assignor's timing.
        for (const field of ['activeTasks', 'standbyTasks', 'warmupTasks', 'memberEpoch'])
          delete answer[field]
      },
    },
    streamsStep('StreamsGroupHeartbeat on a consumer group', CONSUMER_GROUP, [{ id: '0' }]),
    streamsStep('StreamsGroupHeartbeat on a share group', SHARE_GROUP, [{ id: '0' }]),
    {
      name: 'ConsumerGroupHeartbeat on a streams group',
      apiKey: ApiKey.ConsumerGroupHeartbeat,
      body: consumerHeartbeat(STREAMS_GROUP, CONSUMER_MEMBER, 0),
    },
    {
      name: 'ShareGroupHeartbeat on a streams group',
      apiKey: ApiKey.ShareGroupHeartbeat,
      body: shareHeartbeat(STREAMS_GROUP, () => 0, [SHARE_TOPIC]),
    },
    {
      name: 'StreamsGroupDescribe of consumer, share and unknown groups',
      apiKey: ApiKey.StreamsGroupDescribe,
      body: () => ({
        groupIds: [CONSUMER_GROUP, SHARE_GROUP, 'k4-nobody'],
        includeAuthorizedOperations: false,
        includeTopologyDescription: false,
      }),
    },
    {
      name: 'ConsumerGroupDescribe and ShareGroupDescribe of a streams group',
      apiKey: ApiKey.ShareGroupDescribe,
      body: () => ({ groupIds: [STREAMS_GROUP], includeAuthorizedOperations: false }),
    },
    {
      name: 'leave',
      apiKey: ApiKey.StreamsGroupHeartbeat,
      body: () => ({ ...streamsJoin(STREAMS_GROUP, null)(), memberEpoch: -1 }),
    },
  ],
}

// ---- client telemetry (KIP-714) ---------------------------------------------------------------

const ZERO_UUID = 'AAAAAAAAAAAAAAAAAAAAAA'
/** Both brokers accept zstd, lz4, gzip and snappy, not uncompressed pushes. */
const GZIP = 1
/** An empty OTLP MetricsData, gzipped. */
const EMPTY_METRICS_GZIP = gzipSync(Buffer.alloc(0))
const TELEMETRY = 'telemetry'

/**
 * GetTelemetrySubscriptions and PushTelemetry are sent at v0, which Kafka serves though it does
 * not advertise them without a receiver plugin. Each `client` is a client instance of its own:
 * only the first push after a GetTelemetrySubscriptions escapes the push interval.
 */
function push(
  name: string,
  client: string,
  options: {
    instance?: 'zero'
    subscription?: 'other'
    compressionType?: number
    terminating?: boolean
    metrics?: Buffer
  } = {},
): Step {
  return {
    name,
    apiKey: ApiKey.PushTelemetry,
    version: 0,
    body: (ctx) => {
      const own = ctx.variable<{ instance: string; subscription: number }>(`${TELEMETRY}-${client}`)
      return {
        clientInstanceId: options.instance === 'zero' ? ZERO_UUID : own.instance,
        subscriptionId: options.subscription === 'other' ? own.subscription + 1 : own.subscription,
        terminating: options.terminating ?? false,
        compressionType: options.compressionType ?? GZIP,
        metrics: options.metrics ?? EMPTY_METRICS_GZIP,
      }
    },
  }
}

/** GetTelemetrySubscriptions of a new client instance, captured for its pushes. */
function newClient(client: string): Step {
  return {
    name: `subscriptions of new client ${client}`,
    apiKey: ApiKey.GetTelemetrySubscriptions,
    version: 0,
    body: () => ({ clientInstanceId: ZERO_UUID }),
    capture: (answer, ctx) =>
      ctx.vars.set(`${TELEMETRY}-${client}`, {
        instance: answer.clientInstanceId,
        subscription: answer.subscriptionId,
      }),
  }
}

const telemetrySequence: Sequence = {
  name: 'kafka4-telemetry-bad-input',
  steps: [
    newClient('a'),
    push('push with the zero client instance id', 'a', { instance: 'zero' }),
    push('push with an unknown subscription id', 'a', { subscription: 'other' }),
    push('push again, too soon', 'a'),
    newClient('b'),
    push('push with an unknown compression type', 'b', { compressionType: 9 }),
    newClient('c'),
    push('push declared uncompressed whose bytes are gzip (no OTLP)', 'c', { compressionType: 0 }),
    newClient('e'),
    push('push uncompressed, no metrics', 'e', { compressionType: 0, metrics: Buffer.alloc(0) }),
    newClient('d'),
    push('push', 'd'),
    push('push again at once (too soon)', 'd'),
    push('terminating push', 'd', { terminating: true }),
    push('push after the terminating one', 'd'),
    {
      name: 'subscriptions of an instance id the broker never gave',
      apiKey: ApiKey.GetTelemetrySubscriptions,
      version: 0,
      body: () => ({ clientInstanceId: 'azQtdW5rbm93bi1jbGllbg' }),
    },
    ...(
      [
        ['client metrics resources', [RESOURCE_CLIENT_METRICS]],
        ['an unknown resource type', [99]],
      ] as const
    ).map(([what, resourceTypes]) => ({
      name: `ListConfigResources of ${what}`,
      apiKey: ApiKey.ListConfigResources,
      body: () => ({ resourceTypes }),
    })),
  ],
}

// ---- features, transaction versions, delegation tokens ----------------------------------------

/** UpdateFeatures, validate only: levels no broker of 4.4 knows. The message names the level. */
function unknownLevel(feature: string, level: number): Step {
  return {
    name: `${feature} ${level}: a level not supported`,
    apiKey: ApiKey.UpdateFeatures,
    body: () => ({
      timeoutMs: 30_000,
      featureUpdates: [{ feature, maxVersionLevel: level, allowDowngrade: false, upgradeType: 1 }],
      validateOnly: true,
    }),
  }
}

const TV_TOPIC = 'k4-tv'

function producerOf(ctx: TargetContext, key: string): { id: bigint; epoch: number } {
  return ctx.variable<{ id: bigint; epoch: number }>(key)
}

function initTransactional(name: string, transactionalId: string, key: string): Step {
  return {
    name,
    apiKey: ApiKey.InitProducerId,
    body: () => initProducerId(transactionalId),
    capture: (answer, ctx) => {
      if (answer.errorCode === 0)
        ctx.vars.set(key, { id: answer.producerId as bigint, epoch: answer.producerEpoch as number })
    },
  }
}

function transactionalProduce(name: string, version: number, transactionalId: string, key: string): Step {
  return {
    name,
    apiKey: ApiKey.Produce,
    version,
    body: (ctx) =>
      produce(
        TV_TOPIC,
        0,
        batch({
          producerId: producerOf(ctx, key).id,
          producerEpoch: producerOf(ctx, key).epoch,
          baseSequence: 0,
          isTransactional: true,
          prefix: transactionalId,
        }),
        -1,
        transactionalId,
      ),
  }
}

function end(name: string, version: number, transactionalId: string, key: string, epochDelta = 0): Step {
  return {
    name,
    apiKey: ApiKey.EndTxn,
    version,
    body: (ctx) =>
      endTxn(transactionalId, producerOf(ctx, key).id, producerOf(ctx, key).epoch + epochDelta, true),
    capture: (answer, ctx) => {
      // Transaction version 2 bumps the epoch at every end: the answer names the one to go on with.
      if (answer.errorCode === 0 && version >= 5)
        ctx.vars.set(key, { id: answer.producerId as bigint, epoch: answer.producerEpoch as number })
    },
  }
}

const delegationTokenSteps: Step[] = [
  {
    name: 'CreateDelegationToken without SASL',
    apiKey: ApiKey.CreateDelegationToken,
    body: () => ({ ownerPrincipalType: null, ownerPrincipalName: null, renewers: [], maxLifetimeMs: -1n }),
  },
  {
    name: 'RenewDelegationToken without SASL',
    apiKey: ApiKey.RenewDelegationToken,
    body: () => ({ hmac: Buffer.from('not-a-token'), renewPeriodMs: 60_000n }),
  },
  {
    name: 'ExpireDelegationToken without SASL',
    apiKey: ApiKey.ExpireDelegationToken,
    body: () => ({ hmac: Buffer.from('not-a-token'), expiryTimePeriodMs: -1n }),
  },
  {
    name: 'DescribeDelegationToken without SASL',
    apiKey: ApiKey.DescribeDelegationToken,
    body: () => ({ owners: null }),
  },
]

const versionsSequence: Sequence = {
  name: 'kafka4-versions-bad-input',
  steps: [
    unknownLevel('transaction.version', 3),
    unknownLevel('streams.version', 7),
    unknownLevel('group.version', 99),
    createTopic(TV_TOPIC),
    leaderOf(TV_TOPIC),
    coordinatorsOf(['k4-tv2', 'k4-tv0'], 1),
    // A transaction begun as transaction version 2 does (the first produce adds the partition)...
    initTransactional('init k4-tv2', 'k4-tv2', 'tv2'),
    transactionalProduce('Produce v12 adds the partition itself', 12, 'k4-tv2', 'tv2'),
    // ...ended by a client of transaction version 0/1.
    end('EndTxn v4 of a transaction begun by Produce v12', 4, 'k4-tv2', 'tv2'),
    end('EndTxn v4 again', 4, 'k4-tv2', 'tv2'),
    initTransactional('init k4-tv0', 'k4-tv0', 'tv0'),
    ...[4, 5].map((version) => ({
      name: `AddPartitionsToTxn v${version} verify only (as a leader asks), a partition not in it`,
      apiKey: ApiKey.AddPartitionsToTxn,
      version,
      body: (ctx: TargetContext) => ({
        transactions: [
          {
            transactionalId: 'k4-tv0',
            producerId: producerOf(ctx, 'tv0').id,
            producerEpoch: producerOf(ctx, 'tv0').epoch,
            verifyOnly: true,
            topics: [{ name: TV_TOPIC, partitions: [0] }],
          },
        ],
      }),
    })),
    coordinatorsOf(['k4-tv-group'], 0),
    ...[3, 4].map((version) => ({
      name: `TxnOffsetCommit v${version} without AddOffsetsToTxn`,
      apiKey: ApiKey.TxnOffsetCommit,
      version,
      body: (ctx: TargetContext) => ({
        ...txnOffsetCommit('k4-tv0', 'k4-tv-group', TV_TOPIC, 0, 1),
        producerId: producerOf(ctx, 'tv0').id,
        producerEpoch: producerOf(ctx, 'tv0').epoch,
      }),
    })),
    transactionalProduce('Produce v10 without AddPartitionsToTxn', 10, 'k4-tv0', 'tv0'),
    transactionalProduce('Produce v11 without AddPartitionsToTxn', 11, 'k4-tv0', 'tv0'),
    {
      name: 'AddPartitionsToTxn v3',
      apiKey: ApiKey.AddPartitionsToTxn,
      version: 3,
      body: (ctx) =>
        addPartitionsToTxn('k4-tv0', producerOf(ctx, 'tv0').id, producerOf(ctx, 'tv0').epoch, TV_TOPIC, [0]),
    },
    transactionalProduce('Produce v11 after AddPartitionsToTxn', 11, 'k4-tv0', 'tv0'),
    end('EndTxn v5 of a transaction begun by AddPartitionsToTxn v3', 5, 'k4-tv0', 'tv0'),
    end('EndTxn v5 with the epoch before the bump (a retry)', 5, 'k4-tv0', 'tv0', -1),
    end('EndTxn v5 with an epoch two below', 5, 'k4-tv0', 'tv0', -2),
    end('EndTxn v4 after the bump', 4, 'k4-tv0', 'tv0'),
    ...delegationTokenSteps,
  ],
}

export const KAFKA4_SEQUENCES: readonly Sequence[] = [
  shareSequence,
  streamsSequence,
  telemetrySequence,
  versionsSequence,
]

/**
 * The fixed request sequences of the differential test: each names its own topics and groups,
 * so sequences do not depend on each other (Metadata of every topic aside, which runs first).
 * Valid requests and the invalid ones clients meet: unknown topics and ids, bad versions,
 * wrong epochs and generations, out-of-range offsets, oversized and corrupt batches.
 */
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { Sequence, Step, TargetContext } from './harness.js'
import {
  addPartitionsToTxn,
  BASE_TIMESTAMP_MS,
  batch,
  corruptCrc,
  createTopics,
  deleteRecords,
  describeConfigs,
  EARLIEST,
  EARLIEST_LOCAL,
  endTxn,
  fetch,
  initProducerId,
  joinGroup,
  LATEST,
  listOffsets,
  MAX_TIMESTAMP,
  metadata,
  metadataByIds,
  type NewTopic,
  offsetCommit,
  offsetFetch,
  produce,
  RESOURCE_BROKER,
  RESOURCE_TOPIC,
  syncGroup,
  txnOffsetCommit,
  withMagic,
} from './requests.js'
import { KAFKA4_SEQUENCES } from './sequences-kafka4.js'

/** A topic id no broker holds. */
const UNKNOWN_TOPIC_ID = 'AAAAAAAAAAAAAAAAAAAAAQ'

function create(name: string, topics: readonly NewTopic[], validateOnly = false): Step {
  return { name, apiKey: ApiKey.CreateTopics, body: (ctx) => createTopics(ctx, topics, validateOnly) }
}

/** Waits (uncompared) until Metadata names a leader for every partition of `topics`. */
function awaitTopics(topics: string[]): Step {
  return {
    name: `await ${topics.join(',')}`,
    apiKey: ApiKey.Metadata,
    body: () => metadata(topics),
    compare: false,
    retryWhile: (answer) =>
      (answer.topics as { errorCode: number; partitions: { leaderId: number; errorCode: number }[] }[]).some(
        (t) =>
          t.errorCode !== 0 ||
          t.partitions.length === 0 ||
          t.partitions.some((p) => p.leaderId < 0 || p.errorCode !== 0),
      ),
  }
}

/** FindCoordinator v4+ (a list of keys): only `coordinators` is on the wire. */
function findCoordinator(key: string, keyType: number): Step {
  return {
    name: 'find coordinator',
    apiKey: ApiKey.FindCoordinator,
    body: () => ({ key: '', keyType, coordinatorKeys: [key] }),
    normalize: (answer) => {
      for (const field of ['errorCode', 'errorMessage', 'nodeId', 'host', 'port']) delete answer[field]
    },
  }
}

const producerOf = (ctx: TargetContext, key: string) => ctx.variable<{ id: bigint; epoch: number }>(key)

function captureProducer(key: string) {
  return (answer: Record<string, unknown>, ctx: TargetContext) => {
    if (answer.errorCode === 0)
      ctx.vars.set(key, { id: answer.producerId as bigint, epoch: answer.producerEpoch as number })
  }
}

const metadataSequence: Sequence = {
  name: 'metadata',
  steps: [
    create('create md-a', [{ name: 'md-a', partitions: 2 }]),
    awaitTopics(['md-a']),
    { name: 'known topic', apiKey: ApiKey.Metadata, body: () => metadata(['md-a']) },
    { name: 'unknown topic, auto-create off', apiKey: ApiKey.Metadata, body: () => metadata(['md-missing']) },
    {
      name: 'unknown topic, auto-create asked of a broker with it off',
      apiKey: ApiKey.Metadata,
      body: () => metadata(['md-missing-2'], true),
    },
    { name: 'invalid topic name', apiKey: ApiKey.Metadata, body: () => metadata(['bad name!']) },
    {
      name: 'known and unknown together',
      apiKey: ApiKey.Metadata,
      body: () => metadata(['md-a', 'md-missing']),
    },
    { name: 'by topic id', apiKey: ApiKey.Metadata, body: (ctx) => metadataByIds([ctx.topicId('md-a')]) },
    { name: 'unknown topic id', apiKey: ApiKey.Metadata, body: () => metadataByIds([UNKNOWN_TOPIC_ID]) },
    { name: 'no topics', apiKey: ApiKey.Metadata, body: () => metadata([]) },
    { name: 'version 4', apiKey: ApiKey.Metadata, version: 4, body: () => metadata(['md-a', 'md-missing']) },
    {
      // Runs before any coordinator lookup made __consumer_offsets: no broker coordinates yet.
      name: 'offset fetch before the offsets topic exists',
      apiKey: ApiKey.OffsetFetch,
      body: (_ctx, version) => offsetFetch('md-group', null, version),
      retryWhile: () => false,
    },
  ],
}

const createTopicsSequence: Sequence = {
  name: 'create-topics',
  steps: [
    create('valid with a config', [
      { name: 'ct-a', partitions: 3, configs: { 'cleanup.policy': 'compact' } },
    ]),
    create('duplicate', [{ name: 'ct-a', partitions: 1 }]),
    create('invalid names', [{ name: 'bad/name' }, { name: '..' }, { name: 'x'.repeat(250) }, { name: '' }]),
    create('zero partitions', [{ name: 'ct-zero', partitions: 0 }]),
    create('replication factor above the brokers', [{ name: 'ct-rf', partitions: 1, replicationFactor: 3 }]),
    create('replication factor 0', [{ name: 'ct-rf0', partitions: 1, replicationFactor: 0 }]),
    create('broker defaults (-1, -1)', [{ name: 'ct-defaults', partitions: -1, replicationFactor: -1 }]),
    create('invalid config value', [{ name: 'ct-badcfg', configs: { 'retention.ms': 'soon' } }]),
    create('unknown config', [{ name: 'ct-unknowncfg', configs: { 'no.such.config': '1' } }]),
    create('null config value', [{ name: 'ct-nullcfg', configs: { 'retention.ms': null } }]),
    create('validate only', [{ name: 'ct-vo', partitions: 2 }], true),
    create('validate only, invalid', [{ name: 'ct-vo-bad', partitions: 0 }], true),
    { name: 'validated topic absent', apiKey: ApiKey.Metadata, body: () => metadata(['ct-vo']) },
    create('manual assignment', [{ name: 'ct-assigned', assignments: [[0], [0]] }]),
    create('assignment to an unknown broker', [{ name: 'ct-assigned-bad', assignments: [[-5]] }]),
    create('same name twice in one request', [{ name: 'ct-twice' }, { name: 'ct-twice' }]),
    awaitTopics(['ct-a', 'ct-defaults', 'ct-assigned', 'ct-nullcfg']),
    {
      name: 'created topics',
      apiKey: ApiKey.Metadata,
      body: () => metadata(['ct-a', 'ct-defaults', 'ct-assigned']),
    },
    {
      name: 'version 4 (no configs in the answer)',
      apiKey: ApiKey.CreateTopics,
      version: 4,
      body: (ctx) => createTopics(ctx, [{ name: 'ct-v4' }]),
    },
  ],
}

const produceSequence: Sequence = {
  name: 'produce',
  steps: [
    create('create topics', [
      { name: 'pr-a', partitions: 2 },
      { name: 'pr-small', configs: { 'max.message.bytes': '1000' } },
      { name: 'pr-append', configs: { 'message.timestamp.type': 'LogAppendTime' } },
    ]),
    awaitTopics(['pr-a', 'pr-small', 'pr-append']),
    { name: 'acks=1', apiKey: ApiKey.Produce, body: () => produce('pr-a', 0, batch({ prefix: 'a1' }), 1) },
    { name: 'acks=all', apiKey: ApiKey.Produce, body: () => produce('pr-a', 0, batch({ prefix: 'a2' }), -1) },
    {
      name: 'acks=0',
      apiKey: ApiKey.Produce,
      noResponse: true,
      body: () => produce('pr-a', 0, batch({ prefix: 'a0' }), 0),
    },
    {
      name: 'after acks=0',
      apiKey: ApiKey.ListOffsets,
      body: () => listOffsets('pr-a', [{ partition: 0, timestamp: LATEST }]),
    },
    { name: 'acks=2', apiKey: ApiKey.Produce, body: () => produce('pr-a', 0, batch(), 2) },
    { name: 'unknown topic', apiKey: ApiKey.Produce, body: () => produce('pr-missing', 0, batch()) },
    { name: 'unknown partition', apiKey: ApiKey.Produce, body: () => produce('pr-a', 7, batch()) },
    {
      name: 'batch over max.message.bytes',
      apiKey: ApiKey.Produce,
      body: () => produce('pr-small', 0, batch({ count: 2, valueBytes: 800 })),
    },
    {
      name: 'batch under max.message.bytes',
      apiKey: ApiKey.Produce,
      body: () => produce('pr-small', 0, batch({ count: 1 })),
    },
    { name: 'bad CRC', apiKey: ApiKey.Produce, body: () => produce('pr-a', 1, corruptCrc(batch())) },
    { name: 'magic 3', apiKey: ApiKey.Produce, body: () => produce('pr-a', 1, withMagic(batch(), 3)) },
    {
      name: 'magic 1 header on a v2 batch',
      apiKey: ApiKey.Produce,
      body: () => produce('pr-a', 1, withMagic(batch(), 1)),
    },
    { name: 'empty records', apiKey: ApiKey.Produce, body: () => produce('pr-a', 1, Buffer.alloc(0)) },
    {
      name: 'two batches for one partition',
      apiKey: ApiKey.Produce,
      body: () => produce('pr-a', 1, Buffer.concat([batch({ prefix: 'two-a' }), batch({ prefix: 'two-b' })])),
    },
    {
      name: 'magic 0 header at version 3',
      apiKey: ApiKey.Produce,
      version: 3,
      body: () => produce('pr-a', 1, withMagic(batch(), 0)),
    },
    {
      name: 'truncated batch',
      apiKey: ApiKey.Produce,
      body: () => produce('pr-a', 1, batch().subarray(0, 40)),
    },
    {
      name: 'timestamp two hours ahead',
      apiKey: ApiKey.Produce,
      body: () => produce('pr-a', 1, batch({ count: 1, timestampOffsetMs: 2 * 3600_000 })),
    },
    {
      name: 'timestamp a day back',
      apiKey: ApiKey.Produce,
      body: () => produce('pr-a', 1, batch({ count: 1, timestampOffsetMs: -24 * 3600_000 })),
    },
    {
      name: 'transactional batch without a transaction',
      apiKey: ApiKey.Produce,
      body: () =>
        produce(
          'pr-a',
          1,
          batch({ producerId: 4242n, producerEpoch: 0, baseSequence: 0, isTransactional: true }),
          -1,
          'pr-no-txn',
        ),
    },
    {
      name: 'LogAppendTime topic',
      apiKey: ApiKey.Produce,
      body: () => produce('pr-append', 0, batch({ prefix: 'lat' })),
    },
    {
      name: 'read back',
      apiKey: ApiKey.Fetch,
      body: (ctx) =>
        fetch(ctx, [
          { topic: 'pr-a', partition: 0, offset: 0 },
          { topic: 'pr-a', partition: 1, offset: 0 },
          { topic: 'pr-small', partition: 0, offset: 0 },
          { topic: 'pr-append', partition: 0, offset: 0 },
        ]),
    },
  ],
}

const idempotentSequence: Sequence = {
  name: 'idempotent',
  steps: [
    create('create topic', [{ name: 'id-a' }]),
    awaitTopics(['id-a']),
    {
      name: 'init producer id',
      apiKey: ApiKey.InitProducerId,
      body: () => initProducerId(null),
      capture: captureProducer('p'),
    },
    {
      name: 'sequence 0',
      apiKey: ApiKey.Produce,
      body: (ctx) =>
        produce('id-a', 0, batch({ producerId: producerOf(ctx, 'p').id, producerEpoch: 0, baseSequence: 0 })),
    },
    {
      name: 'sequence 0 again (duplicate)',
      apiKey: ApiKey.Produce,
      body: (ctx) =>
        produce('id-a', 0, batch({ producerId: producerOf(ctx, 'p').id, producerEpoch: 0, baseSequence: 0 })),
    },
    {
      name: 'sequence 3',
      apiKey: ApiKey.Produce,
      body: (ctx) =>
        produce('id-a', 0, batch({ producerId: producerOf(ctx, 'p').id, producerEpoch: 0, baseSequence: 3 })),
    },
    {
      name: 'sequence gap (9)',
      apiKey: ApiKey.Produce,
      body: (ctx) =>
        produce('id-a', 0, batch({ producerId: producerOf(ctx, 'p').id, producerEpoch: 0, baseSequence: 9 })),
    },
    {
      name: 'epoch bumped, sequence 0',
      apiKey: ApiKey.Produce,
      body: (ctx) =>
        produce('id-a', 0, batch({ producerId: producerOf(ctx, 'p').id, producerEpoch: 1, baseSequence: 0 })),
    },
    {
      name: 'old epoch',
      apiKey: ApiKey.Produce,
      body: (ctx) =>
        produce('id-a', 0, batch({ producerId: producerOf(ctx, 'p').id, producerEpoch: 0, baseSequence: 6 })),
    },
    {
      name: 'epoch bumped, sequence 5',
      apiKey: ApiKey.Produce,
      body: (ctx) =>
        produce('id-a', 0, batch({ producerId: producerOf(ctx, 'p').id, producerEpoch: 2, baseSequence: 5 })),
    },
    {
      name: 'unknown producer id, sequence 7',
      apiKey: ApiKey.Produce,
      body: (ctx) =>
        produce(
          'id-a',
          0,
          batch({ producerId: producerOf(ctx, 'p').id + 1000n, producerEpoch: 0, baseSequence: 7 }),
        ),
    },
    {
      name: 'read back',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'id-a', partition: 0, offset: 0 }]),
    },
  ],
}

const fetchSequence: Sequence = {
  name: 'fetch',
  steps: [
    create('create topic', [{ name: 'fe-a', partitions: 2 }]),
    awaitTopics(['fe-a']),
    {
      name: 'first batch',
      apiKey: ApiKey.Produce,
      body: () => produce('fe-a', 0, batch({ count: 3, prefix: 'f1' })),
    },
    {
      name: 'second batch',
      apiKey: ApiKey.Produce,
      body: () => produce('fe-a', 0, batch({ count: 2, prefix: 'f2', timestampOffsetMs: 100 })),
    },
    {
      name: 'from 0',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 0, offset: 0 }]),
    },
    {
      name: 'inside the first batch',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 0, offset: 1 }]),
    },
    {
      name: 'at the high watermark',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 0, offset: 5 }]),
    },
    {
      name: 'past the end',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 0, offset: 6 }]),
    },
    {
      name: 'negative offset',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 0, offset: -1 }]),
    },
    {
      name: 'empty partition',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 1, offset: 0 }]),
    },
    {
      name: 'unknown partition',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 9, offset: 0 }]),
    },
    {
      name: 'unknown topic id',
      apiKey: ApiKey.Fetch,
      body: (ctx) =>
        fetch(ctx, [{ topic: 'fe-unknown', topicId: UNKNOWN_TOPIC_ID, partition: 0, offset: 0 }]),
    },
    {
      name: 'partition max bytes 1 (first batch anyway)',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 0, offset: 0, partitionMaxBytes: 1 }]),
    },
    {
      name: 'max bytes 1 (first batch anyway)',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 0, offset: 0 }], { maxBytes: 1 }),
    },
    {
      name: 'partition max bytes between batches',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 0, offset: 0, partitionMaxBytes: 120 }]),
    },
    {
      name: 'future leader epoch',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 0, offset: 0, currentLeaderEpoch: 7 }]),
    },
    {
      name: 'read_committed',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 0, offset: 3 }], { isolationLevel: 1 }),
    },
    {
      name: 'delete records below 2',
      apiKey: ApiKey.DeleteRecords,
      body: () => deleteRecords('fe-a', [{ partition: 0, offset: 2 }]),
    },
    {
      name: 'below the log start',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 0, offset: 0 }]),
    },
    {
      name: 'at the log start',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'fe-a', partition: 0, offset: 2 }]),
    },
    {
      name: 'version 11 (topic names)',
      apiKey: ApiKey.Fetch,
      version: 11,
      body: (ctx) =>
        fetch(ctx, [
          { topic: 'fe-a', partition: 0, offset: 3 },
          { topic: 'fe-missing', partition: 0, offset: 0 },
        ]),
    },
  ],
}

const listOffsetsSequence: Sequence = {
  name: 'list-offsets',
  steps: [
    create('create topic', [{ name: 'lo-a', partitions: 2 }]),
    awaitTopics(['lo-a']),
    {
      name: 'batch at +0',
      apiKey: ApiKey.Produce,
      body: () => produce('lo-a', 0, batch({ count: 3, timestampOffsetMs: 0 })),
    },
    {
      name: 'batch at +1000',
      apiKey: ApiKey.Produce,
      body: () => produce('lo-a', 0, batch({ count: 2, timestampOffsetMs: 1000 })),
    },
    {
      name: 'batch at +500',
      apiKey: ApiKey.Produce,
      body: () => produce('lo-a', 0, batch({ count: 2, timestampOffsetMs: 500 })),
    },
    {
      name: 'earliest, latest, max timestamp',
      apiKey: ApiKey.ListOffsets,
      body: () =>
        listOffsets('lo-a', [
          { partition: 0, timestamp: EARLIEST },
          { partition: 1, timestamp: LATEST },
        ]),
    },
    {
      name: 'latest',
      apiKey: ApiKey.ListOffsets,
      body: () => listOffsets('lo-a', [{ partition: 0, timestamp: LATEST }]),
    },
    {
      name: 'max timestamp',
      apiKey: ApiKey.ListOffsets,
      body: () => listOffsets('lo-a', [{ partition: 0, timestamp: MAX_TIMESTAMP }]),
    },
    {
      name: 'max timestamp of an empty partition',
      apiKey: ApiKey.ListOffsets,
      body: () => listOffsets('lo-a', [{ partition: 1, timestamp: MAX_TIMESTAMP }]),
    },
    {
      name: 'earliest local',
      apiKey: ApiKey.ListOffsets,
      body: () => listOffsets('lo-a', [{ partition: 0, timestamp: EARLIEST_LOCAL }]),
    },
    {
      name: 'by timestamp',
      apiKey: ApiKey.ListOffsets,
      body: (ctx) => listOffsets('lo-a', [{ partition: 0, timestamp: tsOf(ctx, 505) }]),
    },
    {
      name: 'by timestamp, exact',
      apiKey: ApiKey.ListOffsets,
      body: (ctx) => listOffsets('lo-a', [{ partition: 0, timestamp: tsOf(ctx, 1000) }]),
    },
    {
      name: 'by timestamp past every record',
      apiKey: ApiKey.ListOffsets,
      body: (ctx) => listOffsets('lo-a', [{ partition: 0, timestamp: tsOf(ctx, 60_000) }]),
    },
    {
      name: 'by timestamp 0',
      apiKey: ApiKey.ListOffsets,
      body: () => listOffsets('lo-a', [{ partition: 0, timestamp: 0 }]),
    },
    {
      name: 'unknown topic',
      apiKey: ApiKey.ListOffsets,
      body: () => listOffsets('lo-missing', [{ partition: 0, timestamp: LATEST }]),
    },
    {
      name: 'unknown partition',
      apiKey: ApiKey.ListOffsets,
      body: () => listOffsets('lo-a', [{ partition: 5, timestamp: LATEST }]),
    },
    {
      name: 'future leader epoch',
      apiKey: ApiKey.ListOffsets,
      body: () => listOffsets('lo-a', [{ partition: 0, timestamp: LATEST, currentLeaderEpoch: 9 }]),
    },
    {
      name: 'duplicate partitions',
      apiKey: ApiKey.ListOffsets,
      body: () =>
        listOffsets('lo-a', [
          { partition: 0, timestamp: LATEST },
          { partition: 0, timestamp: EARLIEST },
        ]),
    },
    {
      name: 'duplicate partitions, version 2',
      apiKey: ApiKey.ListOffsets,
      version: 2,
      body: () =>
        listOffsets('lo-a', [
          { partition: 0, timestamp: LATEST },
          { partition: 1, timestamp: LATEST },
          { partition: 0, timestamp: EARLIEST },
        ]),
    },
    {
      name: 'read_committed latest',
      apiKey: ApiKey.ListOffsets,
      body: () => listOffsets('lo-a', [{ partition: 0, timestamp: LATEST }], 1),
    },
    {
      name: 'version 1',
      apiKey: ApiKey.ListOffsets,
      version: 1,
      body: () => listOffsets('lo-a', [{ partition: 0, timestamp: LATEST }]),
    },
  ],
}

/** A record timestamp of the run: BASE_TIMESTAMP_MS plus `offsetMs`. */
function tsOf(_ctx: TargetContext, offsetMs: number): number {
  return BASE_TIMESTAMP_MS + offsetMs
}

const GROUP_TOPIC = 'gr-a'

const offsetsSequence: Sequence = {
  name: 'offsets',
  steps: [
    create('create topic', [{ name: GROUP_TOPIC, partitions: 2 }]),
    awaitTopics([GROUP_TOPIC]),
    findCoordinator('gr-simple', 0),
    {
      name: 'fetch of an unknown group',
      apiKey: ApiKey.OffsetFetch,
      body: (_ctx, version) =>
        offsetFetch('gr-unknown', [{ name: GROUP_TOPIC, partitions: [0, 1] }], version),
    },
    {
      name: 'commit of a simple group (generation -1)',
      apiKey: ApiKey.OffsetCommit,
      body: () =>
        offsetCommit('gr-simple', GROUP_TOPIC, [
          { partition: 0, offset: 5, metadata: 'm' },
          { partition: 1, offset: 0 },
        ]),
    },
    {
      name: 'fetch committed offsets',
      apiKey: ApiKey.OffsetFetch,
      body: (_ctx, version) =>
        offsetFetch('gr-simple', [{ name: GROUP_TOPIC, partitions: [0, 1, 2] }], version),
    },
    {
      name: 'fetch all topics',
      apiKey: ApiKey.OffsetFetch,
      body: (_ctx, version) => offsetFetch('gr-simple', null, version),
    },
    {
      name: 'commit with a generation to a group that does not exist',
      apiKey: ApiKey.OffsetCommit,
      body: () =>
        offsetCommit('gr-nogroup', GROUP_TOPIC, [{ partition: 0, offset: 1 }], {
          generation: 3,
          memberId: 'nobody',
        }),
    },
    {
      name: 'commit to an unknown topic',
      apiKey: ApiKey.OffsetCommit,
      body: () => offsetCommit('gr-simple', 'gr-missing', [{ partition: 0, offset: 1 }]),
    },
    {
      name: 'commit to an unknown partition',
      apiKey: ApiKey.OffsetCommit,
      body: () => offsetCommit('gr-simple', GROUP_TOPIC, [{ partition: 9, offset: 1 }]),
    },
    {
      name: 'join without a member id',
      apiKey: ApiKey.JoinGroup,
      body: () => joinGroup('gr-classic', '', [GROUP_TOPIC]),
      capture: (answer, ctx) => ctx.vars.set('member', answer.memberId),
    },
    {
      name: 'join with the member id',
      apiKey: ApiKey.JoinGroup,
      body: (ctx) => joinGroup('gr-classic', ctx.variable<string>('member'), [GROUP_TOPIC]),
      capture: (answer, ctx) => ctx.vars.set('generation', answer.generationId),
    },
    {
      name: 'sync',
      apiKey: ApiKey.SyncGroup,
      body: (ctx) =>
        syncGroup(
          'gr-classic',
          ctx.variable<number>('generation'),
          ctx.variable<string>('member'),
          Buffer.alloc(0),
        ),
    },
    {
      name: 'commit in the generation',
      apiKey: ApiKey.OffsetCommit,
      body: (ctx) =>
        offsetCommit('gr-classic', GROUP_TOPIC, [{ partition: 1, offset: 7 }], {
          generation: ctx.variable<number>('generation'),
          memberId: ctx.variable<string>('member'),
        }),
    },
    {
      name: 'commit with a wrong generation',
      apiKey: ApiKey.OffsetCommit,
      body: (ctx) =>
        offsetCommit('gr-classic', GROUP_TOPIC, [{ partition: 1, offset: 8 }], {
          generation: ctx.variable<number>('generation') + 1,
          memberId: ctx.variable<string>('member'),
        }),
    },
    {
      name: 'commit by an unknown member',
      apiKey: ApiKey.OffsetCommit,
      body: (ctx) =>
        offsetCommit('gr-classic', GROUP_TOPIC, [{ partition: 1, offset: 9 }], {
          generation: ctx.variable<number>('generation'),
          memberId: 'stranger',
        }),
    },
    {
      name: 'commit with generation -1 to a live group',
      apiKey: ApiKey.OffsetCommit,
      body: () => offsetCommit('gr-classic', GROUP_TOPIC, [{ partition: 0, offset: 2 }]),
    },
    {
      name: 'fetch the group offsets',
      apiKey: ApiKey.OffsetFetch,
      body: (_ctx, version) => offsetFetch('gr-classic', null, version),
    },
    {
      name: 'describe the group',
      apiKey: ApiKey.DescribeGroups,
      body: () => ({ groups: ['gr-classic', 'gr-simple', 'gr-unknown'], includeAuthorizedOperations: false }),
    },
    {
      name: 'heartbeat with a wrong generation',
      apiKey: ApiKey.Heartbeat,
      body: (ctx) => ({
        groupId: 'gr-classic',
        generationId: 99,
        memberId: ctx.variable<string>('member'),
        groupInstanceId: null,
      }),
    },
    {
      name: 'leave',
      apiKey: ApiKey.LeaveGroup,
      body: (ctx) => ({
        groupId: 'gr-classic',
        memberId: '',
        members: [{ memberId: ctx.variable<string>('member'), groupInstanceId: null, reason: null }],
      }),
    },
    {
      name: 'describe the empty group',
      apiKey: ApiKey.DescribeGroups,
      body: () => ({ groups: ['gr-classic'], includeAuthorizedOperations: false }),
    },
  ],
}

const TOPIC_CONFIG_KEYS = [
  'retention.ms',
  'cleanup.policy',
  'max.message.bytes',
  'segment.bytes',
  'compression.type',
  'min.insync.replicas',
  'message.timestamp.type',
  'no.such.config',
]

const BROKER_CONFIG_KEYS = [
  'message.max.bytes',
  'log.retention.hours',
  'log.retention.ms',
  'num.partitions',
  'auto.create.topics.enable',
  'default.replication.factor',
  'log.segment.bytes',
  'compression.type',
  'offsets.topic.num.partitions',
]

const describeConfigsSequence: Sequence = {
  name: 'describe-configs',
  steps: [
    create('create topic', [
      { name: 'dc-a', configs: { 'retention.ms': '3600000', 'compression.type': 'zstd' } },
    ]),
    awaitTopics(['dc-a']),
    {
      name: 'topic keys with synonyms',
      apiKey: ApiKey.DescribeConfigs,
      body: () => describeConfigs([{ type: RESOURCE_TOPIC, name: 'dc-a', keys: TOPIC_CONFIG_KEYS }]),
    },
    {
      name: 'topic keys without synonyms',
      apiKey: ApiKey.DescribeConfigs,
      body: () => describeConfigs([{ type: RESOURCE_TOPIC, name: 'dc-a', keys: TOPIC_CONFIG_KEYS }], false),
    },
    {
      name: 'every topic config',
      apiKey: ApiKey.DescribeConfigs,
      body: () => describeConfigs([{ type: RESOURCE_TOPIC, name: 'dc-a' }], false),
    },
    {
      name: 'broker keys with synonyms',
      apiKey: ApiKey.DescribeConfigs,
      body: (ctx) =>
        describeConfigs([{ type: RESOURCE_BROKER, name: String(ctx.nodeId(0)), keys: BROKER_CONFIG_KEYS }]),
      normalize: brokerResourceName,
    },
    {
      name: 'unknown topic',
      apiKey: ApiKey.DescribeConfigs,
      body: () => describeConfigs([{ type: RESOURCE_TOPIC, name: 'dc-missing', keys: ['retention.ms'] }]),
    },
    {
      name: 'another broker',
      apiKey: ApiKey.DescribeConfigs,
      body: () => describeConfigs([{ type: RESOURCE_BROKER, name: '77', keys: ['message.max.bytes'] }]),
    },
    {
      name: 'a broker name that is no number',
      apiKey: ApiKey.DescribeConfigs,
      body: () => describeConfigs([{ type: RESOURCE_BROKER, name: 'x', keys: ['message.max.bytes'] }]),
    },
    {
      name: 'unknown resource type',
      apiKey: ApiKey.DescribeConfigs,
      body: () => describeConfigs([{ type: 99, name: 'dc-a', keys: ['retention.ms'] }]),
    },
    {
      name: 'version 0 (no sources)',
      apiKey: ApiKey.DescribeConfigs,
      version: 0,
      body: () =>
        describeConfigs(
          [{ type: RESOURCE_TOPIC, name: 'dc-a', keys: ['retention.ms', 'cleanup.policy'] }],
          false,
        ),
    },
  ],
}

/** A broker resource is named by its node id: node#i. */
function brokerResourceName(answer: Record<string, unknown>, ctx: TargetContext): void {
  for (const result of answer.results as { resourceType: number; resourceName: string }[])
    if (result.resourceType === RESOURCE_BROKER && result.resourceName === String(ctx.nodeId(0)))
      result.resourceName = 'node#0'
}

const deleteRecordsSequence: Sequence = {
  name: 'delete-records',
  steps: [
    create('create topic', [{ name: 'dr-a', partitions: 2 }]),
    awaitTopics(['dr-a']),
    { name: 'produce 5', apiKey: ApiKey.Produce, body: () => produce('dr-a', 0, batch({ count: 5 })) },
    {
      name: 'delete below 2',
      apiKey: ApiKey.DeleteRecords,
      body: () => deleteRecords('dr-a', [{ partition: 0, offset: 2 }]),
    },
    {
      name: 'delete below 1 (already gone)',
      apiKey: ApiKey.DeleteRecords,
      body: () => deleteRecords('dr-a', [{ partition: 0, offset: 1 }]),
    },
    {
      name: 'delete below the high watermark (-1)',
      apiKey: ApiKey.DeleteRecords,
      body: () => deleteRecords('dr-a', [{ partition: 0, offset: -1 }]),
    },
    {
      name: 'delete past the end',
      apiKey: ApiKey.DeleteRecords,
      body: () => deleteRecords('dr-a', [{ partition: 0, offset: 10 }]),
    },
    {
      name: 'delete at -2',
      apiKey: ApiKey.DeleteRecords,
      body: () => deleteRecords('dr-a', [{ partition: 0, offset: -2 }]),
    },
    {
      name: 'empty partition',
      apiKey: ApiKey.DeleteRecords,
      body: () => deleteRecords('dr-a', [{ partition: 1, offset: 0 }]),
    },
    {
      name: 'unknown partition',
      apiKey: ApiKey.DeleteRecords,
      body: () => deleteRecords('dr-a', [{ partition: 4, offset: 0 }]),
    },
    {
      name: 'unknown topic',
      apiKey: ApiKey.DeleteRecords,
      body: () => deleteRecords('dr-missing', [{ partition: 0, offset: 0 }]),
    },
    {
      name: 'log start and end after',
      apiKey: ApiKey.ListOffsets,
      body: () =>
        listOffsets('dr-a', [
          { partition: 0, timestamp: EARLIEST },
          { partition: 1, timestamp: EARLIEST },
        ]),
    },
    { name: 'produce after', apiKey: ApiKey.Produce, body: () => produce('dr-a', 0, batch({ count: 1 })) },
  ],
}

const TXN = 'tx-a'

const transactionsSequence: Sequence = {
  name: 'transactions',
  steps: [
    create('create topic', [{ name: 'tx-topic' }]),
    awaitTopics(['tx-topic']),
    findCoordinator(TXN, 1),
    { name: 'timeout 0', apiKey: ApiKey.InitProducerId, body: () => initProducerId(TXN, 0) },
    {
      name: 'timeout above the maximum',
      apiKey: ApiKey.InitProducerId,
      body: () => initProducerId(TXN, 3_600_000),
    },
    {
      name: 'init',
      apiKey: ApiKey.InitProducerId,
      body: () => initProducerId(TXN),
      capture: captureProducer('t'),
    },
    {
      name: 'end a transaction that was never begun',
      apiKey: ApiKey.EndTxn,
      body: (ctx) => endTxn(TXN, producerOf(ctx, 't').id, producerOf(ctx, 't').epoch, true),
    },
    {
      name: 'add partitions with a wrong epoch',
      apiKey: ApiKey.AddPartitionsToTxn,
      version: 3,
      body: (ctx) =>
        addPartitionsToTxn(TXN, producerOf(ctx, 't').id, producerOf(ctx, 't').epoch + 1, 'tx-topic', [0]),
    },
    {
      name: 'add partitions with a wrong producer id',
      apiKey: ApiKey.AddPartitionsToTxn,
      version: 3,
      body: (ctx) =>
        addPartitionsToTxn(TXN, producerOf(ctx, 't').id + 1n, producerOf(ctx, 't').epoch, 'tx-topic', [0]),
    },
    {
      name: 'add partitions to an unknown transactional id',
      apiKey: ApiKey.AddPartitionsToTxn,
      version: 3,
      body: (ctx) => addPartitionsToTxn('tx-nobody', producerOf(ctx, 't').id, 0, 'tx-topic', [0]),
    },
    {
      name: 'add an unknown topic',
      apiKey: ApiKey.AddPartitionsToTxn,
      version: 3,
      body: (ctx) =>
        addPartitionsToTxn(TXN, producerOf(ctx, 't').id, producerOf(ctx, 't').epoch, 'tx-missing', [0]),
    },
    {
      name: 'add partitions',
      apiKey: ApiKey.AddPartitionsToTxn,
      version: 3,
      body: (ctx) =>
        addPartitionsToTxn(TXN, producerOf(ctx, 't').id, producerOf(ctx, 't').epoch, 'tx-topic', [0]),
    },
    {
      name: 'transactional produce',
      apiKey: ApiKey.Produce,
      body: (ctx) =>
        produce(
          'tx-topic',
          0,
          batch({
            producerId: producerOf(ctx, 't').id,
            producerEpoch: producerOf(ctx, 't').epoch,
            baseSequence: 0,
            isTransactional: true,
            prefix: 'tx',
          }),
          -1,
          TXN,
        ),
    },
    {
      name: 'last stable offset while open',
      apiKey: ApiKey.ListOffsets,
      body: () => listOffsets('tx-topic', [{ partition: 0, timestamp: LATEST }], 1),
    },
    {
      name: 'end with a wrong epoch',
      apiKey: ApiKey.EndTxn,
      body: (ctx) => endTxn(TXN, producerOf(ctx, 't').id, producerOf(ctx, 't').epoch + 1, true),
    },
    {
      name: 'end with a wrong producer id',
      apiKey: ApiKey.EndTxn,
      body: (ctx) => endTxn(TXN, producerOf(ctx, 't').id + 1n, producerOf(ctx, 't').epoch, true),
    },
    {
      name: 'commit',
      apiKey: ApiKey.EndTxn,
      body: (ctx) => endTxn(TXN, producerOf(ctx, 't').id, producerOf(ctx, 't').epoch, true),
    },
    {
      name: 'commit again (a retry)',
      apiKey: ApiKey.EndTxn,
      body: (ctx) => endTxn(TXN, producerOf(ctx, 't').id, producerOf(ctx, 't').epoch, true),
    },
    {
      name: 'abort after the commit',
      apiKey: ApiKey.EndTxn,
      body: (ctx) => endTxn(TXN, producerOf(ctx, 't').id, producerOf(ctx, 't').epoch, false),
    },
    {
      name: 'read_committed after the commit',
      apiKey: ApiKey.Fetch,
      body: (ctx) => fetch(ctx, [{ topic: 'tx-topic', partition: 0, offset: 0 }], { isolationLevel: 1 }),
    },
    {
      name: 'end an unknown transactional id',
      apiKey: ApiKey.EndTxn,
      body: (ctx) => endTxn('tx-nobody', producerOf(ctx, 't').id, 0, true),
    },
    { name: 'init again (epoch bump)', apiKey: ApiKey.InitProducerId, body: () => initProducerId(TXN) },
    {
      name: 'describe',
      apiKey: ApiKey.DescribeTransactions,
      body: () => ({ transactionalIds: [TXN, 'tx-nobody'] }),
      normalize: (answer) => {
        for (const state of answer.transactionStates as Record<string, unknown>[]) {
          if (typeof state.transactionStartTimeMs === 'number' && state.transactionStartTimeMs >= 0)
            state.transactionStartTimeMs = '<time>'
        }
      },
    },
  ],
}

const versionsSequence: Sequence = {
  name: 'api-versions',
  steps: [
    {
      name: 'version 3',
      apiKey: ApiKey.ApiVersions,
      version: 3,
      body: () => ({ clientSoftwareName: 'differential', clientSoftwareVersion: '1' }),
    },
    { name: 'version 0', apiKey: ApiKey.ApiVersions, version: 0, body: () => ({}) },
    {
      name: 'unknown version 99',
      apiKey: ApiKey.ApiVersions,
      version: 99,
      raw: { bodyVersion: 3, answerVersion: 0, answerHeaderVersion: 0 },
      body: () => ({ clientSoftwareName: 'differential', clientSoftwareVersion: '1' }),
    },
    {
      name: 'invalid client software name',
      apiKey: ApiKey.ApiVersions,
      version: 3,
      body: () => ({ clientSoftwareName: '!bad name!', clientSoftwareVersion: '1' }),
    },
    {
      name: 'Metadata version 99',
      apiKey: ApiKey.Metadata,
      version: 99,
      raw: { bodyVersion: 12, answerVersion: 12, answerHeaderVersion: 1 },
      body: () => metadata(['md-a']),
    },
    {
      name: 'Produce version 2 (removed in Kafka 4)',
      apiKey: ApiKey.Produce,
      version: 2,
      body: () => produce('pr-a', 0, batch()),
    },
    {
      name: 'Metadata version 0 (removed in Kafka 4)',
      apiKey: ApiKey.Metadata,
      version: 0,
      body: () => metadata(['md-a'], true),
    },
    { name: 'still served after', apiKey: ApiKey.Metadata, body: () => metadata(['md-missing']) },
  ],
}

/** A SCRAM credential's upsertion: 32 bytes of salted password, as a client sends it. */
function scramUpsert(name: string, mechanism: number, iterations: number) {
  return {
    name,
    mechanism,
    iterations,
    salt: Buffer.alloc(16, 7),
    saltedPassword: Buffer.alloc(mechanism === 1 ? 32 : 64, 9),
  }
}

/**
 * SCRAM credentials (KIP-554): AlterUserScramCredentials upserts and deletes, with the
 * invalid ones Kafka refuses (too few iterations, an unknown mechanism, a user both upserted
 * and deleted), then DescribeUserScramCredentials of every user, of named users, of a user
 * without credentials and of a user named twice.
 */
const scramSequence: Sequence = {
  name: 'scram-credentials',
  steps: [
    {
      name: 'upsert two mechanisms and one for a second user',
      apiKey: ApiKey.AlterUserScramCredentials,
      body: () => ({
        deletions: [],
        upsertions: [
          scramUpsert('sc-alice', 1, 4096),
          scramUpsert('sc-alice', 2, 8192),
          scramUpsert('sc-bob', 1, 4096),
        ],
      }),
    },
    {
      name: 'invalid: too few iterations, unknown mechanism, upsert and delete of one user',
      apiKey: ApiKey.AlterUserScramCredentials,
      body: () => ({
        deletions: [{ name: 'sc-carol', mechanism: 1 }],
        upsertions: [
          scramUpsert('sc-dave', 1, 100),
          scramUpsert('sc-erin', 9, 4096),
          scramUpsert('sc-carol', 1, 4096),
        ],
      }),
    },
    {
      name: 'delete a credential that does not exist',
      apiKey: ApiKey.AlterUserScramCredentials,
      body: () => ({ deletions: [{ name: 'sc-nobody', mechanism: 1 }], upsertions: [] }),
    },
    {
      name: 'describe named users',
      apiKey: ApiKey.DescribeUserScramCredentials,
      body: () => ({ users: [{ name: 'sc-alice' }, { name: 'sc-bob' }] }),
      // Kafka's broker learns sc-bob's upsert from the metadata log after the controller
      // answered it (sc-alice's two in one request were refused: RESOURCE_NOT_FOUND stays).
      retryWhile: (answer) =>
        (answer.results as { user: string; errorCode: number }[]).some(
          (r) => r.user === 'sc-bob' && r.errorCode !== 0,
        ),
    },
    {
      name: 'describe a user without credentials',
      apiKey: ApiKey.DescribeUserScramCredentials,
      body: () => ({ users: [{ name: 'sc-nobody' }] }),
    },
    {
      name: 'describe a user named twice',
      apiKey: ApiKey.DescribeUserScramCredentials,
      body: () => ({ users: [{ name: 'sc-bob' }, { name: 'sc-bob' }, { name: 'sc-alice' }] }),
    },
    {
      name: 'delete one of two mechanisms',
      apiKey: ApiKey.AlterUserScramCredentials,
      body: () => ({ deletions: [{ name: 'sc-alice', mechanism: 2 }], upsertions: [] }),
    },
    {
      name: 'describe every user (null)',
      apiKey: ApiKey.DescribeUserScramCredentials,
      body: () => ({ users: null }),
    },
    {
      name: 'describe every user (empty)',
      apiKey: ApiKey.DescribeUserScramCredentials,
      body: () => ({ users: [] }),
    },
  ],
}

/** The versions Kafka 4.x added (issue 33), each at its new version. */
const KAFKA44_TOPIC = 'v44-a'
const kafka44VersionsSequence: Sequence = {
  name: 'kafka-4.4-versions',
  steps: [
    create('create topic', [{ name: KAFKA44_TOPIC, partitions: 2 }]),
    awaitTopics([KAFKA44_TOPIC]),
    { name: 'Metadata v13', apiKey: ApiKey.Metadata, version: 13, body: () => metadata([KAFKA44_TOPIC]) },
    {
      name: 'ListOffsets v10 (timeout)',
      apiKey: ApiKey.ListOffsets,
      version: 10,
      body: () => ({ ...listOffsets(KAFKA44_TOPIC, [{ partition: 0, timestamp: LATEST }]), timeoutMs: 1000 }),
    },
    {
      name: 'ListOffsets v11 EARLIEST_PENDING_UPLOAD (-6)',
      apiKey: ApiKey.ListOffsets,
      version: 11,
      body: () => listOffsets(KAFKA44_TOPIC, [{ partition: 0, timestamp: -6 }]),
    },
    findCoordinator('v44-group', 0),
    {
      name: 'OffsetCommit v10 by topic id',
      apiKey: ApiKey.OffsetCommit,
      version: 10,
      body: () => offsetCommit('v44-group', KAFKA44_TOPIC, [{ partition: 1, offset: 3, metadata: 'm' }]),
    },
    {
      name: 'OffsetCommit v10, unknown topic id',
      apiKey: ApiKey.OffsetCommit,
      version: 10,
      body: () => {
        const body = offsetCommit('v44-group', KAFKA44_TOPIC, [{ partition: 0, offset: 1 }])
        return { ...body, topics: body.topics.map((t) => ({ ...t, topicId: UNKNOWN_TOPIC_ID })) }
      },
    },
    {
      name: 'OffsetFetch v10 by topic id',
      apiKey: ApiKey.OffsetFetch,
      version: 10,
      body: (_ctx, version) =>
        offsetFetch('v44-group', [{ name: KAFKA44_TOPIC, partitions: [0, 1] }], version),
    },
    {
      name: 'OffsetFetch v10, all topics',
      apiKey: ApiKey.OffsetFetch,
      version: 10,
      body: (_ctx, version) => offsetFetch('v44-group', null, version),
    },
    {
      name: 'OffsetFetch v10, unknown topic id',
      apiKey: ApiKey.OffsetFetch,
      version: 10,
      body: (_ctx, version) => {
        const body = offsetFetch('v44-group', [{ name: KAFKA44_TOPIC, partitions: [0] }], version) as {
          groups: { topics: { topicId: string }[] }[]
        }
        return {
          ...body,
          groups: body.groups.map((g) => ({
            ...g,
            topics: g.topics.map((t) => ({ ...t, topicId: UNKNOWN_TOPIC_ID })),
          })),
        }
      },
    },
    {
      name: 'Produce v13 by topic id',
      apiKey: ApiKey.Produce,
      version: 13,
      body: () => produce(KAFKA44_TOPIC, 0, batch({ prefix: 'v13' }), 1),
    },
    {
      name: 'Produce v13, unknown topic id',
      apiKey: ApiKey.Produce,
      version: 13,
      body: () => {
        const body = produce(KAFKA44_TOPIC, 0, batch({ prefix: 'v13x' }), 1)
        return { ...body, topicData: body.topicData.map((t) => ({ ...t, topicId: UNKNOWN_TOPIC_ID })) }
      },
    },
    ...(
      [
        ['by topic id', null],
        ['unknown topic id', UNKNOWN_TOPIC_ID],
      ] as const
    ).map(([what, topicId]) => ({
      name: `TxnOffsetCommit v6 ${what}, no such producer`,
      apiKey: ApiKey.TxnOffsetCommit,
      version: 6,
      body: () => {
        const body = txnOffsetCommit('v44-txn', 'v44-group', KAFKA44_TOPIC, 0, 5)
        return topicId === null ? body : { ...body, topics: body.topics.map((t) => ({ ...t, topicId })) }
      },
    })),
    findCoordinator('v44-unknown', 0),
    {
      name: 'DescribeGroups v6, unknown group',
      apiKey: ApiKey.DescribeGroups,
      version: 6,
      body: () => ({ groups: ['v44-unknown'], includeAuthorizedOperations: false }),
    },
    {
      name: 'DescribeGroups v5, unknown group (Dead, no error)',
      apiKey: ApiKey.DescribeGroups,
      version: 5,
      body: () => ({ groups: ['v44-unknown'], includeAuthorizedOperations: false }),
    },
    {
      name: 'DeleteGroups v3, unknown group',
      apiKey: ApiKey.DeleteGroups,
      version: 3,
      body: () => ({ groupsNames: ['v44-unknown'] }),
    },
    {
      name: 'ApiVersions v5, another cluster',
      apiKey: ApiKey.ApiVersions,
      version: 5,
      body: (ctx) => ({
        clientSoftwareName: 'differential',
        clientSoftwareVersion: '1',
        clusterId: 'elsewhere',
        nodeId: ctx.nodeId(0),
      }),
    },
    {
      name: 'DescribeLogDirs (the log dir, for AlterReplicaLogDirs)',
      apiKey: ApiKey.DescribeLogDirs,
      version: 4,
      body: () => ({ topics: null }),
      compare: false,
      capture: (answer, ctx) =>
        ctx.vars.set('logDir', (answer.results as { logDir: string }[] | undefined)?.[0]?.logDir),
    },
    ...(
      [
        ['the dir it is in', (ctx: TargetContext) => ctx.variable<string>('logDir'), KAFKA44_TOPIC, 0],
        ['a dir not in log.dirs', () => '/no/such/log/dir', KAFKA44_TOPIC, 0],
        ['unknown topic', (ctx: TargetContext) => ctx.variable<string>('logDir'), 'v44-unknown', 0],
        ['unknown partition', (ctx: TargetContext) => ctx.variable<string>('logDir'), KAFKA44_TOPIC, 9],
      ] as const
    ).map(([what, path, name, partition]) => ({
      name: `AlterReplicaLogDirs v2, ${what}`,
      apiKey: ApiKey.AlterReplicaLogDirs,
      version: 2,
      body: (ctx: TargetContext) => ({
        dirs: [{ path: path(ctx), topics: [{ name, partitions: [partition] }] }],
      }),
    })),
    {
      name: 'ApiVersions v5, node id without cluster id',
      apiKey: ApiKey.ApiVersions,
      version: 5,
      body: (ctx) => ({
        clientSoftwareName: 'differential',
        clientSoftwareVersion: '1',
        clusterId: null,
        nodeId: ctx.nodeId(0),
      }),
    },
  ],
}

type FeatureUpdateSpec = readonly [feature: string, level: number, upgradeType: number]

/**
 * UpdateFeatures of `updates` at `version` (v0 sends AllowDowngrade for a downgrade type,
 * which Kafka 4.4 ignores). Kafka's messages name what was refused, so unlike other steps
 * the message is compared too, with the controller's node id masked.
 */
function updateFeatures(
  name: string,
  version: number,
  updates: readonly FeatureUpdateSpec[],
  validateOnly = false,
): Step {
  const key = `features-message-${name}`
  return {
    name,
    apiKey: ApiKey.UpdateFeatures,
    version,
    body: () => ({
      timeoutMs: 30_000,
      featureUpdates: updates.map(([feature, level, upgradeType]) => ({
        feature,
        maxVersionLevel: level,
        allowDowngrade: version === 0 && upgradeType !== 1,
        upgradeType: version === 0 ? 1 : upgradeType,
      })),
      validateOnly: version >= 1 && validateOnly,
    }),
    capture: (answer, ctx) => {
      const message = answer.errorMessage as string | null
      ctx.vars.set(key, message?.replace(/Local controller \d+/, 'Local controller <node>') ?? null)
    },
    normalize: (answer, ctx) => {
      answer.errorMessage = ctx.variable<string | null>(key)
    },
  }
}

/** ApiVersions v4 reduced to group.version's finalized level (the supported ranges differ by design). */
function finalizedGroupVersion(name: string, level: number | null): Step {
  return {
    name,
    apiKey: ApiKey.ApiVersions,
    version: 4,
    body: () => ({ clientSoftwareName: 'differential', clientSoftwareVersion: '1' }),
    // Kafka's broker learns an UpdateFeatures from the metadata log after the controller
    // answered it: ask again until the level shows (or the harness's retries run out).
    retryWhile: (answer) => {
      const finalized = (answer.finalizedFeatures ?? []) as { name: string; maxVersionLevel: number }[]
      return (finalized.find((f) => f.name === 'group.version')?.maxVersionLevel ?? null) !== level
    },
    normalize: (answer) => {
      const finalized = answer.finalizedFeatures as { name: string }[]
      for (const field of Object.keys(answer)) if (field !== 'errorCode') delete answer[field]
      answer.groupVersion = finalized.filter((f) => f.name === 'group.version')
    },
  }
}

const UPGRADE = 1
const SAFE_DOWNGRADE = 2
const UNSAFE_DOWNGRADE = 3

/**
 * Issue 33 item 1: UpdateFeatures' checks and messages on the features both brokers run
 * alike (group.version 0-1; levels only Kafka supports are known differences not sent
 * here), and group.version 0 turning KIP-848's APIs off. Leaves group.version at 1.
 */
const featuresSequence: Sequence = {
  name: 'update-features',
  steps: [
    updateFeatures('group.version 1, as it is', 2, [['group.version', 1, UPGRADE]]),
    updateFeatures('group.version 2: above the supported range', 2, [['group.version', 2, UPGRADE]]),
    updateFeatures('unknown feature at 1', 2, [['no.such.feature', 1, UPGRADE]]),
    updateFeatures('unknown feature at 0', 2, [['no.such.feature', 0, SAFE_DOWNGRADE]]),
    updateFeatures('negative level', 2, [['group.version', -1, SAFE_DOWNGRADE]], true),
    updateFeatures('downgrade without a downgrade type', 2, [['group.version', 0, UPGRADE]], true),
    updateFeatures('safe downgrade, validate only', 2, [['group.version', 0, SAFE_DOWNGRADE]], true),
    updateFeatures('unsafe downgrade, validate only', 2, [['group.version', 0, UNSAFE_DOWNGRADE]], true),
    updateFeatures('unknown upgrade type', 2, [['group.version', 0, 0]], true),
    updateFeatures(
      'two refused updates: the first in HashMap order is named',
      2,
      [
        ['share.version', 9, UPGRADE],
        ['group.version', 0, UPGRADE],
      ],
      true,
    ),
    updateFeatures('one refused of two fails both', 2, [
      ['group.version', 0, SAFE_DOWNGRADE],
      ['no.such.feature', 1, UPGRADE],
    ]),
    updateFeatures('v1 names each feature', 1, [['group.version', 0, SAFE_DOWNGRADE]], true),
    updateFeatures('v1, no update', 1, [], true),
    updateFeatures('v0 upgrade to the same level', 0, [['group.version', 1, UPGRADE]]),
    updateFeatures('v0 AllowDowngrade is ignored', 0, [['group.version', 0, SAFE_DOWNGRADE]]),
    finalizedGroupVersion('group.version still 1', 1),
    updateFeatures('downgrade group.version to 0', 2, [['group.version', 0, SAFE_DOWNGRADE]]),
    finalizedGroupVersion('group.version 0: not finalized', null),
    {
      name: 'ConsumerGroupHeartbeat at group.version 0',
      apiKey: ApiKey.ConsumerGroupHeartbeat,
      version: 1,
      body: () => ({
        groupId: 'uf-group',
        memberId: 'uf-member-0000000000000',
        memberEpoch: 0,
        rebalanceTimeoutMs: 30_000,
        subscribedTopicNames: ['uf-topic'],
        topicPartitions: [],
      }),
    },
    {
      name: 'ConsumerGroupDescribe at group.version 0',
      apiKey: ApiKey.ConsumerGroupDescribe,
      version: 1,
      body: () => ({ groupIds: ['uf-group'], includeAuthorizedOperations: false }),
    },
    updateFeatures('upgrade group.version to 1 again', 2, [['group.version', 1, UPGRADE]]),
    finalizedGroupVersion('group.version 1 again', 1),
  ],
}

/** The fixed set, in the order the test runs it. */
export const FIXED_SEQUENCES: readonly Sequence[] = [
  metadataSequence,
  createTopicsSequence,
  produceSequence,
  idempotentSequence,
  fetchSequence,
  listOffsetsSequence,
  offsetsSequence,
  describeConfigsSequence,
  deleteRecordsSequence,
  transactionsSequence,
  versionsSequence,
  scramSequence,
  kafka44VersionsSequence,
  featuresSequence,
  ...KAFKA4_SEQUENCES,
]

/**
 * Issue 38: Metadata answers from descriptions and encodings kept per topic image
 * (handlers/metadata-topics.ts, metadata-encoding.ts). The bytes are the generated codec's
 * in every version; a description is made again when what it read changed (the topic, the
 * registered brokers, a leader's served record); and authorization stays per request: a
 * topic one principal may not describe never reaches its answer because another filled the
 * cache, nor do another principal's authorized operations.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type BrokerId, toPartitionEpoch } from '../../src/common/types.js'
import {
  type BrokerRegistration,
  type ClusterImage,
  type PartitionState,
  type ServedRecord,
  STORAGE_ERROR_LEADER_EPOCH,
  servedRecordFrom,
  type TopicImage,
} from '../../src/metadata/cluster-image.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import {
  decodeMetadataResponse,
  defaultMetadataRequest,
  encodeMetadataResponse,
  type MetadataResponse,
} from '../../src/protocol/generated/apis/metadata.js'
import { Reader, Writer } from '../../src/protocol/primitives.js'
import { AclOperation } from '../../src/security/authorizer/acl.js'
import { metadataHandler } from '../../src/server/handlers/metadata.js'
import { encodeMetadataResponseCached } from '../../src/server/handlers/metadata-encoding.js'
import type { RequestContext } from '../../src/server/request-context.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'

const VERSIONS = Array.from({ length: 14 }, (_, v) => v)
const OMITTED = -2147483648

function bytesOf(encode: (w: Writer) => void): Buffer {
  const w = new Writer(64)
  encode(w)
  return Buffer.concat(w.toChunks())
}

function codecBytes(version: number, body: MetadataResponse): Buffer {
  return bytesOf((w) => encodeMetadataResponse(w, version, body))
}

function cachedBytes(version: number, body: MetadataResponse): Buffer {
  return bytesOf((w) => encodeMetadataResponseCached(w, version, body))
}

function partition(
  index: number,
  leader: number,
  leaderEpoch: number,
  replicas = ids(1, 2, 3),
): PartitionState {
  return {
    partition: index,
    replicas,
    isr: replicas.filter((id) => id !== 3),
    leader: toBrokerId(leader),
    leaderEpoch,
    partitionEpoch: toPartitionEpoch(leaderEpoch),
  }
}

function broker(nodeId: number, rack: string | null = null): BrokerRegistration {
  return {
    nodeId: toBrokerId(nodeId),
    host: `host-${nodeId}`,
    port: 9092 + nodeId,
    rack,
    brokerEpoch: 10 + nodeId,
  }
}

/** Topics: one served at epoch 0, one re-elected, one half served with a storage error, an internal one. */
function image(): ClusterImage {
  const topics: TopicImage[] = [
    {
      name: 'alpha',
      topicId: 'AAAAAAAAAAAAAAAAAAAAAQ',
      partitions: [0, 1, 2].map((i) => partition(i, 1 + (i % 2), 0)),
      configs: {},
    },
    {
      name: 'beta',
      topicId: 'AAAAAAAAAAAAAAAAAAAAAg',
      partitions: [partition(0, 2, 4), partition(1, -1, 5)],
      configs: {},
    },
    {
      name: 'gamma',
      topicId: 'AAAAAAAAAAAAAAAAAAAAAw',
      partitions: [0, 1, 2].map((i) => partition(i, 1, 0)),
      configs: {},
    },
    {
      name: '__consumer_offsets',
      topicId: 'AAAAAAAAAAAAAAAAAAAABA',
      partitions: [partition(0, 1, 2)],
      configs: {},
    },
    { name: 'secret', topicId: 'AAAAAAAAAAAAAAAAAAAABQ', partitions: [partition(0, 2, 1)], configs: {} },
  ]
  const served = new Map<BrokerId, ServedRecord>([
    [
      toBrokerId(1),
      servedRecordFrom([
        ['AAAAAAAAAAAAAAAAAAAAAQ', 0, 0],
        ['AAAAAAAAAAAAAAAAAAAAAQ', 2, 0],
        ['AAAAAAAAAAAAAAAAAAAAAw', 0, 0],
        ['AAAAAAAAAAAAAAAAAAAAAw', 1, STORAGE_ERROR_LEADER_EPOCH],
      ]),
    ],
    [toBrokerId(2), servedRecordFrom([['AAAAAAAAAAAAAAAAAAAAAQ', 1, 0]])],
  ])
  return {
    clusterId: 'cluster-1',
    controllerId: toBrokerId(2),
    brokers: new Map([broker(1, 'rack-a'), broker(2), broker(3, 'rack-b')].map((b) => [b.nodeId, b])),
    topics: new Map(topics.map((t) => [t.name, t])),
    servedLeaderEpochs: served,
  }
}

/** A context whose principal may describe every topic but `hidden`, with its own operations bitfield. */
function contextOf(
  version: number,
  current: () => ClusterImage,
  operationsBits: number,
  hidden = '',
): RequestContext {
  return {
    apiVersion: version,
    connection: { listenerName: 'PLAINTEXT' },
    broker: { metadataImage: current, config: { values: new Map() } },
    authorize: (operation: AclOperation, _type: unknown, name: string) =>
      !(operation === AclOperation.DESCRIBE && name === hidden),
    authorizedOperations: () => operationsBits,
  } as unknown as RequestContext
}

async function answer(
  context: RequestContext,
  topics: string[] | null,
  withOperations = false,
): Promise<MetadataResponse> {
  const request = {
    ...defaultMetadataRequest(),
    topics: topics?.map((name) => ({ topicId: 'AAAAAAAAAAAAAAAAAAAAAA', name })) ?? null,
    includeTopicAuthorizedOperations: withOperations,
    includeClusterAuthorizedOperations: withOperations,
  }
  const response = await metadataHandler.handle(context, request)
  assert.ok(response)
  return response
}

test('the cached encoding is the codec’s, byte for byte, in every version, twice (the second from the cache)', async () => {
  for (const version of VERSIONS) {
    const current = image()
    const body = await answer(
      contextOf(version, () => current, version >= 8 ? 0b1010_1000 : OMITTED),
      null,
      version >= 8,
    )
    if (version < 8) assert.equal(body.topics[0].topicAuthorizedOperations, OMITTED)
    const expected = codecBytes(version, structuredClone(body))
    assert.ok(cachedBytes(version, body).equals(expected), `v${version}: first encoding`)
    assert.ok(cachedBytes(version, body).equals(expected), `v${version}: from the cache`)
    assert.ok(
      cachedBytes(version, { ...body, throttleTimeMs: 250 }).equals(
        codecBytes(version, { ...body, throttleTimeMs: 250 }),
      ),
      `v${version}: throttled copy`,
    )
    // Named topics, one unknown and one refused, and a null name (v12+) or not.
    const named = await answer(
      contextOf(version, () => current, 0, 'secret'),
      ['gamma', 'nope', 'secret'],
    )
    assert.ok(
      cachedBytes(version, named).equals(codecBytes(version, structuredClone(named))),
      `v${version}: named`,
    )
  }
})

test('what the codec refuses or alone can write goes to the codec', () => {
  const body = {
    ...structuredClone(
      decodeMetadataResponse(
        new Reader(
          codecBytes(12, {
            throttleTimeMs: 0,
            brokers: [],
            clusterId: null,
            controllerId: 1,
            topics: [],
            clusterAuthorizedOperations: OMITTED,
            errorCode: 0,
          }),
        ),
        12,
      ),
    ),
  }
  const tagged: MetadataResponse = { ...body, _unknownTaggedFields: [{ tag: 7, data: Buffer.from([1, 2]) }] }
  assert.ok(cachedBytes(12, tagged).equals(codecBytes(12, tagged)))
  const nullName: MetadataResponse = {
    ...body,
    topics: [
      {
        errorCode: 100,
        name: null,
        topicId: 'AAAAAAAAAAAAAAAAAAAAAQ',
        isInternal: false,
        partitions: [],
        topicAuthorizedOperations: OMITTED,
      },
    ],
  }
  assert.throws(() => cachedBytes(11, nullName), /name/)
  assert.throws(
    () => cachedBytes(7, { ...body, clusterAuthorizedOperations: 5 }),
    /clusterAuthorizedOperations/,
  )
  assert.throws(() => cachedBytes(14, body), /version 14/)
})

/** The answer of `current` equals the answer of a copy of it no cache has seen. */
async function assertFresh(version: number, current: ClusterImage, what: string): Promise<void> {
  const cached = await answer(
    contextOf(version, () => current, 0),
    null,
  )
  const copy = structuredClone(current)
  const fresh = await answer(
    contextOf(version, () => copy, 0),
    null,
  )
  assert.deepEqual(
    decodeMetadataResponse(new Reader(cachedBytes(version, cached)), version),
    decodeMetadataResponse(new Reader(codecBytes(version, fresh)), version),
    what,
  )
}

test('a description is made again when its topic, the registered brokers or a leader’s served record change', async () => {
  for (const version of [1, 5, 9, 12]) {
    let current = image()
    await assertFresh(version, current, 'first answer')
    // gamma-1's leader now serves it (its storage error gone): only the served record changed.
    const served = new Map(current.servedLeaderEpochs)
    const entries: [string, number, number][] = []
    for (const [topicId, ranges] of served.get(toBrokerId(1))!)
      for (const range of ranges.values())
        for (const [p, epoch] of range)
          entries.push([topicId, p, epoch === STORAGE_ERROR_LEADER_EPOCH ? 0 : epoch])
    served.set(toBrokerId(1), servedRecordFrom(entries))
    current = { ...current, servedLeaderEpochs: served }
    await assertFresh(version, current, 'served record changed')
    // Broker 3 gone: offline replicas, every topic object unchanged.
    const brokers = new Map(current.brokers)
    brokers.delete(toBrokerId(3))
    current = { ...current, brokers }
    await assertFresh(version, current, 'broker 3 unregistered')
    // One partition re-elected.
    const alpha = current.topics.get('alpha')!
    const partitions = [...alpha.partitions]
    partitions[1] = partition(1, 1, 1)
    current = { ...current, topics: new Map(current.topics).set('alpha', { ...alpha, partitions }) }
    await assertFresh(version, current, 'alpha-1 re-elected')
  }
})

test('a topic the principal may not describe never comes from the cache, nor another principal’s operations', async () => {
  const current = image()
  const all = await answer(
    contextOf(12, () => current, 0b1111_1000),
    null,
    true,
  )
  assert.ok(all.topics.some((t) => t.name === 'secret'))
  const limited = await answer(
    contextOf(12, () => current, 0b0000_1000, 'secret'),
    null,
    true,
  )
  const decoded = decodeMetadataResponse(new Reader(cachedBytes(12, limited)), 12)
  assert.deepEqual(
    decoded.topics.map((t) => t.name),
    ['__consumer_offsets', 'alpha', 'beta', 'gamma'],
  )
  for (const t of decoded.topics) assert.equal(t.topicAuthorizedOperations, 0b0000_1000, t.name ?? '')
  const named = await answer(
    contextOf(12, () => current, 0, 'secret'),
    ['secret'],
  )
  assert.equal(named.topics[0].errorCode, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
  assert.deepEqual(named.topics[0].partitions, [])
  // The first principal's answer again: its own operations, the shared descriptions unchanged.
  const again = decodeMetadataResponse(
    new Reader(
      cachedBytes(
        12,
        await answer(
          contextOf(12, () => current, 0b1111_1000),
          null,
          true,
        ),
      ),
    ),
    12,
  )
  for (const t of again.topics) assert.equal(t.topicAuthorizedOperations, 0b1111_1000, t.name ?? '')
  const plain = await answer(
    contextOf(12, () => current, 0),
    null,
  )
  for (const t of plain.topics) assert.equal(t.topicAuthorizedOperations, OMITTED)
})

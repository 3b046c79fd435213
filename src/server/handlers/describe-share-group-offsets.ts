/**
 * DescribeShareGroupOffsets (key 90), KIP-932.
 * Behavior: each share-partition's start offset (SPSO) and lag (the high watermark less SPSO
 * and the records done above it, Kafka's formula), read from the partition leader's state
 * (share/share-state-access.ts). Topics null: every partition the group has state for (was
 * assigned or altered). A partition without state, or a topic that does not exist, has
 * start offset -1 and lag -1 with no error, as Kafka.
 * Authorization: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED for the group) and on
 * each topic (TOPIC_AUTHORIZATION_FAILED on its partitions; left out when topics are null).
 * Version notes: v0-1 as Kafka 4.4; v1 adds the lag.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DescribeShareGroupOffsetsRequest,
  type DescribeShareGroupOffsetsResponse,
  type DescribeShareGroupOffsetsResponseDescribeShareGroupOffsetsResponseGroup as ResponseGroup,
  type DescribeShareGroupOffsetsResponseDescribeShareGroupOffsetsResponseTopic as ResponseTopic,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import type { ShareTopicPartition } from '../share/share-partition-manager.js'
import { readStateSummaries } from '../share/share-state-access.js'
import type { ApiHandler } from './registry.js'

const RETRIABLE = new Set<number>([ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_LEADER_OR_FOLLOWER])

type RequestGroup = DescribeShareGroupOffsetsRequest['groups'][number]

export const describeShareGroupOffsetsHandler: ApiHandler<
  DescribeShareGroupOffsetsRequest,
  DescribeShareGroupOffsetsResponse
> = {
  apiKey: ApiKey.DescribeShareGroupOffsets,
  minVersion: 0,
  maxVersion: 1,
  async handle(context, request) {
    const groups = await Promise.all(request.groups.map((group) => describeGroup(context, group)))
    return { throttleTimeMs: 0, groups }
  },
}

function groupError(groupId: string, errorCode: number, errorMessage: string | null): ResponseGroup {
  return { groupId, topics: [], errorCode, errorMessage }
}

async function describeGroup(context: RequestContext, request: RequestGroup): Promise<ResponseGroup> {
  const { groupId } = request
  if (!context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, groupId))
    return groupError(groupId, ErrorCode.GROUP_AUTHORIZATION_FAILED, null)
  const target = context.broker.groupCoordinator.share.offsetsTarget(groupId, false)
  // An unknown group has no offsets: Kafka answers no topics rather than an error.
  if (!('groupEpoch' in target) && target.errorCode !== ErrorCode.GROUP_ID_NOT_FOUND)
    return groupError(groupId, target.errorCode, target.errorMessage)
  const image = context.broker.metadataImage()
  const topics: ResponseTopic[] = []
  const wanted: { tp: ShareTopicPartition; topicIndex: number }[] = []
  if (request.topics === null) {
    const initialized = 'groupEpoch' in target ? target.initialized : new Map<string, Set<number>>()
    for (const [name, topic] of image.topics) {
      const partitions = initialized.get(topic.topicId)
      if (!partitions || !context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)) continue
      const topicIndex = topics.push({ topicName: name, topicId: topic.topicId, partitions: [] }) - 1
      for (const partition of [...partitions].sort((a, b) => a - b))
        wanted.push({ tp: { topic: name, topicId: topic.topicId, partition }, topicIndex })
    }
  } else {
    for (const t of request.topics) {
      const topic = image.topics.get(t.topicName)
      const authorized = context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topicName)
      if (!authorized || !topic) {
        topics.push({
          topicName: t.topicName,
          topicId: ZERO_UUID,
          partitions: t.partitions.map((partitionIndex) => ({
            partitionIndex,
            startOffset: -1n,
            // Kafka leaves the schema's 0 here, as for a partition without state.
            leaderEpoch: 0,
            lag: -1n,
            errorCode: authorized ? ErrorCode.NONE : ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            errorMessage: null,
          })),
        })
        continue
      }
      const topicIndex = topics.push({ topicName: t.topicName, topicId: topic.topicId, partitions: [] }) - 1
      for (const partition of t.partitions)
        wanted.push({ tp: { topic: t.topicName, topicId: topic.topicId, partition }, topicIndex })
    }
  }
  const summaries = await readStateSummaries(
    context.broker,
    groupId,
    wanted.map((w) => w.tp),
  )
  wanted.forEach(({ tp, topicIndex }, i) => {
    const s = summaries[i]
    const known = s.errorCode === ErrorCode.NONE && s.startOffset >= 0
    topics[topicIndex].partitions.push({
      partitionIndex: tp.partition,
      startOffset: BigInt(known ? s.startOffset : -1),
      leaderEpoch: known ? s.leaderEpoch : 0,
      lag: BigInt(known ? s.highWatermark - s.startOffset - s.deliveryCompleteCount : -1),
      // A leader that did not answer, or lost its leadership meanwhile: worth a retry. Any other
      // error means no state to show, which Kafka answers without an error.
      errorCode: RETRIABLE.has(s.errorCode) ? s.errorCode : ErrorCode.NONE,
      errorMessage: null,
    })
  })
  return { groupId, topics, errorCode: ErrorCode.NONE, errorMessage: null }
}

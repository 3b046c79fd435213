/**
 * AlterShareGroupOffsets (key 91), KIP-932.
 * Behavior: sets the start offset (SPSO) of an empty share group's share-partitions: each
 * starts over there on its leader (share/share-state-access.ts), what it held forgotten, and
 * the group has state there from now on. An unknown group id makes an empty share group, as
 * Kafka. A group with members answers NON_EMPTY_GROUP, a classic or consumer group
 * GROUP_ID_NOT_FOUND ("not a share group"), both for the whole request;
 * a topic that does not exist or a partition it lacks UNKNOWN_TOPIC_OR_PARTITION, a negative
 * offset INVALID_REQUEST, on those partitions.
 * Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED for the request) and on each
 * topic (TOPIC_AUTHORIZATION_FAILED on its partitions).
 * Version notes: v0 only, as Kafka 4.4.
 */

import { markInitialized } from '../../coordinator/share-group-coordinator.js'
import { ErrorCode, errorMessage } from '../../protocol/error-codes.js'
import {
  type AlterShareGroupOffsetsRequest,
  type AlterShareGroupOffsetsResponse,
  ApiKey,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ShareTopicPartition } from '../share/share-partition-manager.js'
import { initializeStates } from '../share/share-state-access.js'
import type { ApiHandler } from './registry.js'

type ResponseTopic = AlterShareGroupOffsetsResponse['responses'][number]

export const alterShareGroupOffsetsHandler: ApiHandler<
  AlterShareGroupOffsetsRequest,
  AlterShareGroupOffsetsResponse
> = {
  apiKey: ApiKey.AlterShareGroupOffsets,
  minVersion: 0,
  maxVersion: 0,
  async handle(context, request) {
    const fail = (errorCode: number, errorMessage: string | null): AlterShareGroupOffsetsResponse => ({
      throttleTimeMs: 0,
      errorCode,
      errorMessage,
      responses: [],
    })
    const { groupId } = request
    if (!context.authorize(AclOperation.READ, ResourceType.GROUP, groupId))
      return fail(ErrorCode.GROUP_AUTHORIZATION_FAILED, null)
    const group = context.broker.groupCoordinator.share.offsetsTarget(groupId, true, true)
    if (!('groupEpoch' in group)) return fail(group.errorCode, group.errorMessage)
    const image = context.broker.metadataImage()
    const responses: ResponseTopic[] = []
    const wanted: { tp: ShareTopicPartition & { startOffset: number }; topicIndex: number }[] = []
    for (const t of request.topics) {
      const topic = image.topics.get(t.topicName)
      const authorized = context.authorize(AclOperation.READ, ResourceType.TOPIC, t.topicName)
      const topicIndex =
        responses.push({ topicName: t.topicName, topicId: topic?.topicId ?? ZERO_UUID, partitions: [] }) - 1
      for (const p of t.partitions) {
        const errorCode = !authorized
          ? ErrorCode.TOPIC_AUTHORIZATION_FAILED
          : !topic || p.partitionIndex < 0 || p.partitionIndex >= topic.partitions.length
            ? ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            : p.startOffset < 0n || p.startOffset > BigInt(Number.MAX_SAFE_INTEGER)
              ? ErrorCode.INVALID_REQUEST
              : ErrorCode.NONE
        if (errorCode !== ErrorCode.NONE || !topic) {
          responses[topicIndex].partitions.push({
            partitionIndex: p.partitionIndex,
            errorCode,
            errorMessage: errorMessage(errorCode),
          })
          continue
        }
        const tp = { topic: t.topicName, topicId: topic.topicId, partition: p.partitionIndex }
        wanted.push({ tp: { ...tp, startOffset: Number(p.startOffset) }, topicIndex })
      }
    }
    const codes = await initializeStates(
      context.broker,
      groupId,
      wanted.map((w) => w.tp),
    )
    // The group's ShareGroupStatePartitionMetadata record lists the share-partitions now initialized.
    const written = await context.broker.groupCoordinator.share.update(group, (g) =>
      wanted.forEach(({ tp }, i) => {
        if (codes[i] === ErrorCode.NONE) markInitialized(g, tp.topicId, [tp.partition])
      }),
    )
    if (written !== ErrorCode.NONE) return fail(written, null)
    wanted.forEach(({ tp, topicIndex }, i) => {
      responses[topicIndex].partitions.push({
        partitionIndex: tp.partition,
        errorCode: codes[i],
        errorMessage: codes[i] === ErrorCode.NONE ? null : errorMessage(codes[i]),
      })
    })
    return { throttleTimeMs: 0, errorCode: ErrorCode.NONE, errorMessage: null, responses }
  },
}

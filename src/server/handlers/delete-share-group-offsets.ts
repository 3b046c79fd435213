/**
 * DeleteShareGroupOffsets (key 92), KIP-932.
 * Behavior: an empty share group forgets its state on every partition of each topic
 * (share/share-state-access.ts); a later fetch starts the partition over at the reset
 * point. A group with members answers NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND,
 * for the whole request; a topic that does not exist or the group has no state on
 * UNKNOWN_TOPIC_OR_PARTITION, on that topic.
 * Authorization: DELETE on the group (GROUP_AUTHORIZATION_FAILED for the request) and READ
 * on each topic (TOPIC_AUTHORIZATION_FAILED on it).
 * Version notes: v0 only, as Kafka 4.4.
 */
import { ErrorCode, errorMessage } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DeleteShareGroupOffsetsRequest,
  type DeleteShareGroupOffsetsResponse,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import { deleteStates } from '../share/share-state-access.js'
import type { ApiHandler } from './registry.js'

type ResponseTopic = DeleteShareGroupOffsetsResponse['responses'][number]

export const deleteShareGroupOffsetsHandler: ApiHandler<
  DeleteShareGroupOffsetsRequest,
  DeleteShareGroupOffsetsResponse
> = {
  apiKey: ApiKey.DeleteShareGroupOffsets,
  minVersion: 0,
  maxVersion: 0,
  async handle(context, request) {
    const fail = (code: number, message: string | null): DeleteShareGroupOffsetsResponse => ({
      throttleTimeMs: 0,
      errorCode: code,
      errorMessage: message,
      responses: [],
    })
    const { groupId } = request
    if (!context.authorize(AclOperation.DELETE, ResourceType.GROUP, groupId))
      return fail(ErrorCode.GROUP_AUTHORIZATION_FAILED, null)
    const group = context.broker.groupCoordinator.share.offsetsTarget(groupId, true)
    if (!('groupEpoch' in group)) return fail(group.errorCode, group.errorMessage)
    const image = context.broker.metadataImage()
    const responses: ResponseTopic[] = await Promise.all(
      request.topics.map(async ({ topicName }): Promise<ResponseTopic> => {
        const topic = image.topics.get(topicName)
        const topicId = topic?.topicId ?? ZERO_UUID
        const answer = (code: number): ResponseTopic => ({
          topicName,
          topicId,
          errorCode: code,
          errorMessage: code === ErrorCode.NONE ? null : errorMessage(code),
        })
        if (!context.authorize(AclOperation.READ, ResourceType.TOPIC, topicName))
          return answer(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        const partitions = group.initialized.get(topicId)
        if (!topic || !partitions) return answer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        const codes = await deleteStates(
          context.broker,
          groupId,
          [...partitions].map((partition) => ({ topic: topicName, topicId, partition })),
        )
        const failed = codes.find((code) => code !== ErrorCode.NONE)
        if (failed !== undefined) return answer(failed)
        return answer(
          await context.broker.groupCoordinator.share.update(group, (g) => g.initialized.delete(topicId)),
        )
      }),
    )
    return { throttleTimeMs: 0, errorCode: ErrorCode.NONE, errorMessage: null, responses }
  },
}

/**
 * DeleteTopics (key 20).
 * Behavior: removes the named topics (or, v6, topics by id) in one metadata change made on
 * the controller's side (metadata/topic-admin.ts); the replica manager deletes their logs when it sees the new image. A
 * name or id given twice gets INVALID_REQUEST "Duplicate topic name."/"Duplicate topic id.";
 * unknown names UNKNOWN_TOPIC_OR_PARTITION; unknown ids UNKNOWN_TOPIC_ID. With
 * delete.topic.enable=false every topic gets TOPIC_DELETION_DISABLED (v3+) or
 * INVALID_REQUEST (v0-v2), as Kafka's controller answers.
 * Authorization: DELETE on the topic, else TOPIC_AUTHORIZATION_FAILED (without its name
 * when asked by id by a principal that may not describe it).
 * Version notes: v1 adds throttle time; v4 is flexible; v5 adds error messages; v6 replaces
 * the name list with (name, topicId) pairs: a null name means "by id".
 */
import { topicById } from '../../metadata/cluster-image.js'
import type { DeletedTopic } from '../../metadata/topic-admin.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DeleteTopicsRequest,
  type DeleteTopicsResponse,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const deleteTopicsHandler: ApiHandler<DeleteTopicsRequest, DeleteTopicsResponse> = {
  apiKey: ApiKey.DeleteTopics,
  minVersion: 0,
  maxVersion: 6,
  async handle(context, request) {
    const wanted =
      context.apiVersion >= 6
        ? request.topics.map((t) => ({ name: t.name, topicId: t.topicId }))
        : request.topicNames.map((name) => ({ name, topicId: ZERO_UUID }))
    const image = context.broker.metadataImage()
    const denied: DeletedTopic[] = []
    const allowed = wanted.filter((w) => {
      const name = w.name ?? topicById(image, w.topicId)?.name
      if (name === undefined || context.authorize(AclOperation.DELETE, ResourceType.TOPIC, name)) return true
      // A topic named by id keeps its name from a principal that may not describe it.
      const hidden = w.name === null && !context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
      denied.push({
        name: hidden ? null : name,
        topicId: w.topicId,
        errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        errorMessage: 'Authorization failed.',
      })
      return false
    })
    const results = [...(await context.broker.topicAdmin.deleteTopics(allowed)), ...denied]
    return {
      throttleTimeMs: 0,
      responses: results.map((r) =>
        // TOPIC_DELETION_DISABLED exists from v3; older clients get INVALID_REQUEST, as from Kafka.
        r.errorCode === ErrorCode.TOPIC_DELETION_DISABLED && context.apiVersion < 3
          ? { ...r, errorCode: ErrorCode.INVALID_REQUEST }
          : r,
      ),
    }
  },
}

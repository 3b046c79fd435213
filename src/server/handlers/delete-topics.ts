/**
 * DeleteTopics (key 20).
 * Behavior: removes the named topics (or, v6, topics by id) from the cluster image in one
 * metadata change; the replica manager deletes their logs when it sees the new image. A
 * name or id given twice gets INVALID_REQUEST "Duplicate topic name."/"Duplicate topic id.";
 * unknown names UNKNOWN_TOPIC_OR_PARTITION; unknown ids UNKNOWN_TOPIC_ID. With
 * delete.topic.enable=false every topic gets TOPIC_DELETION_DISABLED (v3+) or
 * INVALID_REQUEST (v0-v2), as Kafka's controller answers.
 * Version notes: v1 adds throttle time; v4 is flexible; v5 adds error messages; v6 replaces
 * the name list with (name, topicId) pairs: a null name means "by id".
 */
import { type ClusterImage, topicById } from '../../metadata/cluster-image.js'
import { ErrorCode, errorMessage } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DeleteTopicsRequest,
  type DeleteTopicsResponse,
  type DeleteTopicsResponseDeletableTopicResult,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import type { ApiHandler } from './registry.js'

type Wanted = { name: string | null; topicId: string }

export const deleteTopicsHandler: ApiHandler<DeleteTopicsRequest, DeleteTopicsResponse> = {
  apiKey: ApiKey.DeleteTopics,
  minVersion: 0,
  maxVersion: 6,
  async handle(context, request) {
    const wanted: Wanted[] =
      context.apiVersion >= 6
        ? request.topics.map((t) => ({ name: t.name, topicId: t.topicId }))
        : request.topicNames.map((name) => ({ name, topicId: ZERO_UUID }))
    if (context.broker.config.values.get('delete.topic.enable') === false) {
      const code = context.apiVersion < 3 ? ErrorCode.INVALID_REQUEST : ErrorCode.TOPIC_DELETION_DISABLED
      return {
        throttleTimeMs: 0,
        responses: wanted.map((w) => result(w.name, w.topicId, code, 'Topic deletion is disabled.')),
      }
    }
    const results = resolve(context.broker.metadataImage(), wanted)
    const doomed = results.filter((r) => r.errorCode === ErrorCode.NONE)
    if (doomed.length > 0) {
      const gone = new Set(doomed.map((r) => r.topicId))
      await context.broker.updateMetadata((image) => {
        const topics = new Map([...image.topics].filter(([, t]) => !gone.has(t.topicId)))
        return topics.size === image.topics.size ? image : { ...image, topics }
      })
      for (const r of doomed)
        context.broker.logger.info({ topic: r.name, topicId: r.topicId }, 'deleted topic')
    }
    return { throttleTimeMs: 0, responses: results }
  },
}

function resolve(image: ClusterImage, wanted: readonly Wanted[]): DeleteTopicsResponseDeletableTopicResult[] {
  const count = (key: string) => wanted.filter((w) => (w.name ?? `id:${w.topicId}`) === key).length
  return wanted.map((w) => {
    if (w.name !== null) {
      if (count(w.name) > 1)
        return result(w.name, ZERO_UUID, ErrorCode.INVALID_REQUEST, 'Duplicate topic name.')
      const topic = image.topics.get(w.name)
      if (!topic) return result(w.name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
      return result(topic.name, topic.topicId, ErrorCode.NONE)
    }
    if (count(`id:${w.topicId}`) > 1)
      return result(null, w.topicId, ErrorCode.INVALID_REQUEST, 'Duplicate topic id.')
    if (w.topicId === ZERO_UUID) {
      return result(
        null,
        w.topicId,
        ErrorCode.INVALID_REQUEST,
        `Attempt to find topic with invalid topicId ${w.topicId}`,
      )
    }
    const topic = topicById(image, w.topicId)
    if (!topic) return result(null, w.topicId, ErrorCode.UNKNOWN_TOPIC_ID)
    return result(topic.name, topic.topicId, ErrorCode.NONE)
  })
}

function result(
  name: string | null,
  topicId: string,
  errorCode: number,
  message?: string,
): DeleteTopicsResponseDeletableTopicResult {
  return {
    name,
    topicId,
    errorCode,
    errorMessage: errorCode === ErrorCode.NONE ? null : (message ?? errorMessage(errorCode)),
  }
}

/**
 * CreatePartitions (key 37).
 * Behavior: translates the request for the controller's side (metadata/topic-admin.ts),
 * which raises partition counts as Kafka's controller does: unknown topics get
 * UNKNOWN_TOPIC_OR_PARTITION; a count equal to or below the current one INVALID_PARTITIONS;
 * manual assignments must number exactly the added partitions and name registered brokers,
 * each list as long as the topic's replication factor (INVALID_REPLICA_ASSIGNMENT
 * otherwise); a name given twice INVALID_REQUEST "Duplicate topic name.". validateOnly
 * checks and changes nothing; otherwise all increases land in one metadata change and the
 * answer comes once the new partitions are served, within timeoutMs (REQUEST_TIMED_OUT past it).
 * Authorization: ALTER on the topic, else TOPIC_AUTHORIZATION_FAILED.
 * Version notes: v1 adds nothing on the wire; v2 is flexible; v3 is v2 (KIP-599 quota).
 */
import { brokerIdFromWire } from '../../common/types.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type CreatePartitionsRequest,
  type CreatePartitionsResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const createPartitionsHandler: ApiHandler<CreatePartitionsRequest, CreatePartitionsResponse> = {
  apiKey: ApiKey.CreatePartitions,
  minVersion: 0,
  maxVersion: 3,
  async handle(context, request) {
    const allowed = (name: string) => context.authorize(AclOperation.ALTER, ResourceType.TOPIC, name)
    const results = await context.broker.topicAdmin.createPartitions(
      request.topics
        .filter((topic) => allowed(topic.name))
        .map((topic) => ({
          name: topic.name,
          count: topic.count,
          assignments: topic.assignments?.map((a) => a.brokerIds.map(brokerIdFromWire)) ?? null,
        })),
      { validateOnly: request.validateOnly, timeoutMs: request.timeoutMs },
    )
    for (const topic of request.topics)
      if (!allowed(topic.name))
        results.push({
          name: topic.name,
          errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          errorMessage: 'Authorization failed.',
        })
    return { throttleTimeMs: 0, results }
  },
}

import { ErrorCode } from '../protocol/error-codes.js'
import type { FindCoordinatorResponse } from '../protocol/generated/find-coordinator-response.js'
import { ApiKey } from '../protocol/generated/index.js'
import type { KafkaClient } from './client.js'
import { KafkaProtocolError } from './errors.js'

/**
 * One FindCoordinator for a consumer group (key type 0) on any broker: the coordinator's
 * node id, or a KafkaProtocolError with the answer's error code. Versions 4+ batch the keys;
 * the single key goes in `coordinatorKeys` there and in `key` before.
 */
export async function findGroupCoordinator(client: KafkaClient, groupId: string): Promise<number> {
  const response = await client.request<FindCoordinatorResponse>(
    'any',
    ApiKey.FindCoordinator,
    (version) => ({
      key: version >= 4 ? '' : groupId,
      keyType: 0,
      coordinatorKeys: version >= 4 ? [groupId] : [],
    }),
  )
  const entry = response.coordinators.length > 0 ? response.coordinators[0] : response
  if (entry.errorCode !== ErrorCode.NONE) {
    const what = `coordinator of group ${groupId}`
    throw new KafkaProtocolError(
      entry.errorCode,
      entry.errorMessage ? `${what}: ${entry.errorMessage}` : what,
    )
  }
  return entry.nodeId
}

import { ErrorCode } from '../protocol/error-codes.js'
import type { FindCoordinatorResponse } from '../protocol/generated/find-coordinator-response.js'
import { ApiKey } from '../protocol/generated/index.js'
import type { KafkaClient } from './client.js'
import { KafkaProtocolError } from './errors.js'

/** FindCoordinator's key types. */
export const CoordinatorKeyType = { GROUP: 0, TRANSACTION: 1 } as const
export type CoordinatorKeyType = (typeof CoordinatorKeyType)[keyof typeof CoordinatorKeyType]

/**
 * One FindCoordinator on any broker for a consumer group (key type 0) or a transactional
 * id (key type 1): the coordinator's node id, or a KafkaProtocolError with the answer's
 * error code. Versions 4+ batch the keys; the single key goes in `coordinatorKeys` there
 * and in `key` before (v0 knows groups only).
 */
export async function findCoordinator(
  client: KafkaClient,
  key: string,
  keyType: CoordinatorKeyType,
): Promise<number> {
  const response = await client.request<FindCoordinatorResponse>(
    'any',
    ApiKey.FindCoordinator,
    (version) => ({
      key: version >= 4 ? '' : key,
      keyType,
      coordinatorKeys: version >= 4 ? [key] : [],
    }),
  )
  const entry = response.coordinators.length > 0 ? response.coordinators[0] : response
  if (entry.errorCode !== ErrorCode.NONE) {
    const what = `coordinator of ${keyType === CoordinatorKeyType.GROUP ? 'group' : 'transactional id'} ${key}`
    throw new KafkaProtocolError(
      entry.errorCode,
      entry.errorMessage ? `${what}: ${entry.errorMessage}` : what,
    )
  }
  return entry.nodeId
}

export function findGroupCoordinator(client: KafkaClient, groupId: string): Promise<number> {
  return findCoordinator(client, groupId, CoordinatorKeyType.GROUP)
}

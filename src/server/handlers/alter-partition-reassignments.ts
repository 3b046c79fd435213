/**
 * AlterPartitionReassignments (key 45).
 * Behavior: starts moving each partition to the given replicas (every broker registered,
 * no duplicates: INVALID_REPLICA_ASSIGNMENT otherwise) or, with null replicas, cancels the
 * reassignment in progress (NO_REASSIGNMENT_IN_PROGRESS when there is none). New replicas
 * catch up as followers; the controller completes the move once all of them are in the
 * ISR (see metadata/reassignment.ts). One compare-and-set covers the whole request.
 * Version notes: v0 only, flexible.
 */
import type { BrokerId, ClusterImage, PartitionState } from '../../metadata/cluster-image.js'
import { cancelReassignment, startReassignment } from '../../metadata/reassignment.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  type AlterPartitionReassignmentsRequest,
  type AlterPartitionReassignmentsResponse,
  ApiKey,
  type AlterPartitionReassignmentsResponseReassignablePartitionResponse as PartitionResponse,
} from '../../protocol/generated/index.js'
import type { ApiHandler } from './registry.js'

type Outcome = { errorCode: number; errorMessage: string | null }
const OK: Outcome = { errorCode: ErrorCode.NONE, errorMessage: null }

export const alterPartitionReassignmentsHandler: ApiHandler<
  AlterPartitionReassignmentsRequest,
  AlterPartitionReassignmentsResponse
> = {
  apiKey: ApiKey.AlterPartitionReassignments,
  minVersion: 0,
  maxVersion: 0,
  async handle(context, request) {
    let outcomes = new Map<string, PartitionResponse[]>()
    await context.broker.updateMetadata((image) => {
      const result = applyAll(image, request)
      outcomes = result.outcomes
      return result.image
    })
    return {
      throttleTimeMs: 0,
      errorCode: ErrorCode.NONE,
      errorMessage: null,
      responses: [...outcomes].map(([name, partitions]) => ({ name, partitions })),
    }
  },
}

function applyAll(image: ClusterImage, request: AlterPartitionReassignmentsRequest) {
  const outcomes = new Map<string, PartitionResponse[]>()
  const topics = new Map(image.topics)
  for (const wanted of request.topics) {
    const topic = topics.get(wanted.name)
    const partitions = topic ? [...topic.partitions] : []
    const results: PartitionResponse[] = []
    for (const p of wanted.partitions) {
      const state = partitions[p.partitionIndex]
      const { outcome, next } = state
        ? decide(state, p.replicas, image)
        : {
            outcome: { errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, errorMessage: 'Unknown partition' },
            next: null,
          }
      if (next) partitions[p.partitionIndex] = next
      results.push({ partitionIndex: p.partitionIndex, ...outcome })
    }
    outcomes.set(wanted.name, results)
    if (topic) topics.set(wanted.name, { ...topic, partitions })
  }
  return { image: { ...image, topics }, outcomes }
}

function decide(
  state: PartitionState,
  replicas: BrokerId[] | null,
  image: ClusterImage,
): { outcome: Outcome; next: PartitionState | null } {
  if (replicas === null) {
    const cancelled = cancelReassignment(state)
    if (cancelled) return { outcome: OK, next: cancelled }
    return {
      outcome: {
        errorCode: ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        errorMessage: 'No reassignment is in progress',
      },
      next: null,
    }
  }
  const problem =
    replicas.length === 0
      ? 'The replica list is empty'
      : new Set(replicas).size !== replicas.length
        ? 'The replica list has duplicates'
        : replicas.find((id) => !image.brokers.has(id)) !== undefined
          ? `Broker ${replicas.find((id) => !image.brokers.has(id))} is not registered`
          : null
  if (problem)
    return { outcome: { errorCode: ErrorCode.INVALID_REPLICA_ASSIGNMENT, errorMessage: problem }, next: null }
  return { outcome: OK, next: startReassignment(state, replicas) }
}

/**
 * ElectLeaders (key 43).
 * Behavior: PREFERRED (0) moves each partition's leadership to its first replica when that
 * replica is live and in the ISR (PREFERRED_LEADER_NOT_AVAILABLE otherwise,
 * ELECTION_NOT_NEEDED when it already leads); UNCLEAN (1) gives an offline partition a
 * leader from its live replicas even outside the ISR (ELIGIBLE_LEADERS_NOT_AVAILABLE when
 * none is live, ELECTION_NOT_NEEDED when it has a leader). Null partitions mean all. The
 * change is a compare-and-set on the partition states, like the controller's own.
 * Version notes: v1 adds the election type and a top-level error code, v2+ flexible.
 */
import { NO_LEADER, type PartitionState } from '../../metadata/cluster-image.js'
import { electPreferred, onBrokerChange } from '../../metadata/elections.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ElectLeadersRequest,
  type ElectLeadersResponse,
  type ElectLeadersResponsePartitionResult,
} from '../../protocol/generated/index.js'
import type { ApiHandler } from './registry.js'

const PREFERRED = 0
const UNCLEAN = 1

type Outcome = { errorCode: number; errorMessage: string | null }

export const electLeadersHandler: ApiHandler<ElectLeadersRequest, ElectLeadersResponse> = {
  apiKey: ApiKey.ElectLeaders,
  minVersion: 0,
  maxVersion: 2,
  async handle(context, request) {
    const electionType = context.apiVersion >= 1 ? request.electionType : PREFERRED
    if (electionType !== PREFERRED && electionType !== UNCLEAN) {
      return { throttleTimeMs: 0, errorCode: ErrorCode.INVALID_REQUEST, replicaElectionResults: [] }
    }
    const outcomes = new Map<string, Map<number, Outcome>>()
    await context.broker.updateMetadata((image) => {
      outcomes.clear()
      const live = new Set(image.brokers.keys())
      const wanted =
        request.topicPartitions?.map((t) => ({ topic: t.topic, partitions: t.partitions })) ??
        [...image.topics.values()].map((t) => ({
          topic: t.name,
          partitions: t.partitions.map((p) => p.partition),
        }))
      const topics = new Map(image.topics)
      for (const { topic, partitions } of wanted) {
        const results = new Map<number, Outcome>()
        outcomes.set(topic, results)
        const current = topics.get(topic)
        const states = current ? [...current.partitions] : []
        for (const index of partitions) {
          const state = states[index]
          const { outcome, next } = state
            ? decide(state, live, electionType)
            : {
                outcome: failure(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, `${topic}-${index} does not exist`),
                next: null,
              }
          results.set(index, outcome)
          if (next) states[index] = next
        }
        if (current) topics.set(topic, { ...current, partitions: states })
      }
      return { ...image, topics }
    })
    return {
      throttleTimeMs: 0,
      errorCode: ErrorCode.NONE,
      replicaElectionResults: [...outcomes].map(([topic, results]) => ({
        topic,
        partitionResult: [...results].map(
          ([partitionId, outcome]): ElectLeadersResponsePartitionResult => ({ partitionId, ...outcome }),
        ),
      })),
    }
  },
}

function failure(errorCode: number, errorMessage: string): Outcome {
  return { errorCode, errorMessage }
}

function decide(
  state: PartitionState,
  live: ReadonlySet<number>,
  electionType: number,
): { outcome: Outcome; next: PartitionState | null } {
  const ok = { errorCode: ErrorCode.NONE, errorMessage: null }
  if (electionType === PREFERRED) {
    if (state.leader === state.replicas[0])
      return {
        outcome: failure(ErrorCode.ELECTION_NOT_NEEDED, 'Leader is already the preferred replica'),
        next: null,
      }
    const result = electPreferred({ state, live, uncleanLeaderElection: false })
    if (!result)
      return {
        outcome: failure(
          ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
          'Preferred replica is not live or not in the ISR',
        ),
        next: null,
      }
    return { outcome: ok, next: result.state }
  }
  if (state.leader !== NO_LEADER && live.has(state.leader)) {
    return { outcome: failure(ErrorCode.ELECTION_NOT_NEEDED, 'Partition has a live leader'), next: null }
  }
  const result = onBrokerChange({ state, live, uncleanLeaderElection: true })
  if (!result || result.state.leader === NO_LEADER) {
    return {
      outcome: failure(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, 'No live replica to elect'),
      next: null,
    }
  }
  return { outcome: ok, next: result.state }
}

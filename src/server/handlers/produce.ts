/**
 * Produce (key 0).
 * Behavior: appends each partition's record batches on its leader, assigning offsets in
 * place; per-partition errors never fail the whole request. acks=1 answers after the
 * leader's append, acks=-1 once the ISR has the records (with min.insync.replicas checked
 * first), acks=0 gets no response at all; if an acks=0 write fails the connection is
 * closed, as Kafka does, so the producer notices and refreshes its metadata.
 * Version notes: v2 adds logAppendTime, v3 transactionalId (magic v2 only), v5
 * logStartOffset, v8 record errors and an error message, v9+ flexible, v10 the current
 * leader and node endpoints as tagged fields (left empty: clients then refresh metadata).
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ProduceRequest,
  type ProduceResponse,
  type ProduceResponsePartitionProduceResponse,
  type ProduceResponseTopicProduceResponse,
} from '../../protocol/generated/index.js'
import { toErrorCode } from '../../replication/kafka-error.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

const VALID_ACKS = new Set([-1, 0, 1])

export const produceHandler: ApiHandler<ProduceRequest, ProduceResponse> = {
  apiKey: ApiKey.Produce,
  minVersion: 0,
  maxVersion: 11,
  // acks=0 gets no response, so a failure closes the connection; nothing pipelined behind
  // it may be appended before that is known.
  holdsConnection: (request) => request.acks === 0,
  async handle(context, request) {
    const acks = request.acks
    const topics = request.topicData.map((topic) => produceTopic(context, topic, acks, request.timeoutMs))
    const responses: ProduceResponseTopicProduceResponse[] = []
    for (const topic of topics)
      responses.push({ name: topic.name, partitionResponses: await Promise.all(topic.partitions) })
    if (acks === 0) {
      const failed = responses.some((t) => t.partitionResponses.some((p) => p.errorCode !== ErrorCode.NONE))
      if (failed)
        context.connection.close('acks=0 produce failed; closing so the producer refreshes metadata')
      return null
    }
    return { responses, throttleTimeMs: 0, nodeEndpoints: [] }
  },
}

function produceTopic(
  context: RequestContext,
  topic: ProduceRequest['topicData'][number],
  acks: number,
  timeoutMs: number,
): { name: string; partitions: Promise<ProduceResponsePartitionProduceResponse>[] } {
  const partitions = topic.partitionData.map((data) => {
    if (!VALID_ACKS.has(acks))
      return Promise.resolve(failure(data.index, ErrorCode.INVALID_REQUIRED_ACKS, null))
    if (data.records === null)
      return Promise.resolve(failure(data.index, ErrorCode.INVALID_RECORD, 'no records'))
    // Called synchronously so appends keep the order requests arrived in.
    return context.broker.replicaManager
      .appendToLeader(topic.name, data.index, data.records as Buffer, acks, timeoutMs, context.purgatoryTimer)
      .then(
        (result): ProduceResponsePartitionProduceResponse => ({
          index: data.index,
          errorCode: result.errorCode,
          baseOffset: BigInt(result.baseOffset),
          logAppendTimeMs: BigInt(result.logAppendTimeMs),
          logStartOffset: BigInt(result.logStartOffset),
          recordErrors: [],
          errorMessage: null,
          currentLeader: { leaderId: -1, leaderEpoch: -1 },
        }),
        (error: unknown) => {
          const code = toErrorCode(error)
          if (code === null) throw error
          return failure(data.index, code, error instanceof Error ? error.message : null)
        },
      )
  })
  return { name: topic.name, partitions }
}

function failure(
  index: number,
  errorCode: number,
  message: string | null,
): ProduceResponsePartitionProduceResponse {
  return {
    index,
    errorCode,
    baseOffset: -1n,
    logAppendTimeMs: -1n,
    logStartOffset: -1n,
    recordErrors: [],
    errorMessage: message,
    currentLeader: { leaderId: -1, leaderEpoch: -1 },
  }
}

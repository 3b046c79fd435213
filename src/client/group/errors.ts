/**
 * Errors of group membership. A commit the group refused (the member's generation is
 * over, it is unknown, or a rebalance is completing) is a CommitFailedError: a
 * KafkaProtocolError with the coordinator's error code, so `code` stays
 * `ERR_KAFKA_<NAME>` and `errorCode` the number, plus the partitions that failed.
 */
import { KafkaProtocolError } from '../errors.js'
import type { TopicPartition } from '../leader-requests.js'

export class CommitFailedError extends KafkaProtocolError {
  readonly partitions: TopicPartition[]

  constructor(errorCode: number, detail: string, partitions: readonly TopicPartition[]) {
    super(errorCode, `commit failed: ${detail}`)
    this.name = 'CommitFailedError'
    this.partitions = [...partitions]
  }
}

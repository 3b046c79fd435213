/**
 * AlterReplicaLogDirs (key 34).
 * Behavior: moves this broker's replicas of the given partitions into the given log dirs
 * (ReplicaManager.moveReplica: the replica stops, its closed log's directory is copied and
 * swapped, crash-safely, and it serves again from there). Answers at once, as Kafka does
 * once its future replica is started; DescribeLogDirs shows the partition in its new dir
 * when the move is done. Per partition, Kafka's checks in its order
 * (ReplicaManager.alterReplicaLogDirs): a topic name too long for the move's directory
 * name INVALID_TOPIC_EXCEPTION; a path that is not one of `log.dirs` (absolute)
 * LOG_DIR_NOT_FOUND; an offline dir, or a replica on one, KAFKA_STORAGE_ERROR; a partition
 * the metadata does not have UNKNOWN_TOPIC_OR_PARTITION; one not hosted here
 * REPLICA_NOT_AVAILABLE (Kafka also remembers the dir for when it is created here; tidelog
 * does not). A replica already in that dir: NONE, nothing moves.
 * Authorization: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every partition.
 * Version notes: v0-2 (Kafka 4.4 serves 1-2; v1 only changed throttling), v2 flexible.
 */
import { resolve } from 'node:path'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  type AlterReplicaLogDirsRequest,
  type AlterReplicaLogDirsResponse,
  ApiKey,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import { FUTURE_DIR_SUFFIX, markedDirName } from '../../storage/log-dir-move.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

/** The longest file name most file systems take. */
const MAX_FILE_NAME_LENGTH = 255

export const alterReplicaLogDirsHandler: ApiHandler<AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse> =
  {
    apiKey: ApiKey.AlterReplicaLogDirs,
    minVersion: 0,
    maxVersion: 2,
    handle(context, request) {
      const authorized = context.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
      // One answer per partition (the last dir named wins, as Kafka's map of them).
      const answers = new Map<string, Map<number, number>>()
      for (const dir of request.dirs)
        for (const topic of dir.topics)
          for (const partition of topic.partitions) {
            const errorCode = authorized
              ? alterOne(context, dir.path, topic.name, partition)
              : ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            let partitions = answers.get(topic.name)
            if (!partitions) answers.set(topic.name, (partitions = new Map()))
            partitions.set(partition, errorCode)
          }
      return {
        throttleTimeMs: 0,
        results: [...answers].map(([topicName, partitions]) => ({
          topicName,
          partitions: [...partitions].map(([partitionIndex, errorCode]) => ({ partitionIndex, errorCode })),
        })),
      }
    },
  }

function alterOne(context: RequestContext, path: string, topic: string, partition: number): number {
  const { logManager, replicaManager } = context.broker
  // The move's directory name must fit a file name (Kafka's KAFKA-4893 check).
  if (markedDirName({ topic, partition }, '0'.repeat(32), FUTURE_DIR_SUFFIX).length > MAX_FILE_NAME_LENGTH)
    return ErrorCode.INVALID_TOPIC_EXCEPTION
  // Kafka matches the path against each log dir's absolute path.
  const logDir = logManager.logDirs.find((dir) => resolve(dir) === path)
  if (logDir === undefined) return ErrorCode.LOG_DIR_NOT_FOUND
  if (!logManager.isLogDirOnline(logDir)) return ErrorCode.KAFKA_STORAGE_ERROR
  if (replicaManager.isOffline(topic, partition)) return ErrorCode.KAFKA_STORAGE_ERROR
  const hosted = replicaManager.getPartition(topic, partition)
  if (hosted === undefined) {
    const known = context.broker.metadataImage().topics.get(topic)?.partitions[partition] !== undefined
    return known ? ErrorCode.REPLICA_NOT_AVAILABLE : ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
  }
  if (logManager.logDirOf({ topic, partition }) === logDir) return ErrorCode.NONE
  const log = context.broker.logger.child({ topic, partition, logDir })
  replicaManager.moveReplica(topic, partition, logDir).then(
    () => log.info('replica moved to another log dir'),
    (err: unknown) => log.warn({ err }, 'could not move the replica to another log dir'),
  )
  return ErrorCode.NONE
}

/**
 * DescribeLogDirs (key 35).
 * Behavior: lists this broker's log directories with the size of each hosted partition's
 * log and its offset lag (a follower: the leader's committed end minus its own log end; a
 * leader: 0), optionally filtered by topic and partition. Offline directories carry
 * KAFKA_STORAGE_ERROR.
 * Authorization: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED (v3+; v0-v2 get no dirs).
 * Version notes: v2+ flexible, v3 top-level error code, v4 total and usable bytes, v5
 * isCordoned (KIP-1066; tidelog never cordons a directory).
 */
import { dirname, resolve } from 'node:path'
import type { FileSystem } from '../../common/file-system.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DescribeLogDirsRequest,
  type DescribeLogDirsResponse,
  type DescribeLogDirsResponseDescribeLogDirsResult,
  type DescribeLogDirsResponseDescribeLogDirsTopic,
} from '../../protocol/generated/index.js'
import type { Partition } from '../../replication/partition.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const describeLogDirsHandler: ApiHandler<DescribeLogDirsRequest, DescribeLogDirsResponse> = {
  apiKey: ApiKey.DescribeLogDirs,
  minVersion: 0,
  maxVersion: 5,
  async handle(context, request) {
    if (!context.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME))
      return { throttleTimeMs: 0, errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results: [] }
    const wanted = wantedFilter(request)
    const offline = new Set(context.broker.logManager.offlineLogDirs.map((d) => resolve(d)))
    const byDir = new Map<string, Partition[]>()
    for (const dir of context.broker.logManager.logDirs) byDir.set(resolve(dir), [])
    for (const partition of context.broker.replicaManager.hostedPartitions) {
      if (!wanted(partition.topic, partition.partition)) continue
      byDir.get(resolve(dirname(partition.log.dir)))?.push(partition)
    }
    const results: DescribeLogDirsResponseDescribeLogDirsResult[] = []
    for (const [logDir, partitions] of byDir) {
      const space = await diskSpace(context.broker.fileSystem, logDir)
      results.push({
        errorCode: offline.has(logDir) ? ErrorCode.KAFKA_STORAGE_ERROR : ErrorCode.NONE,
        logDir,
        topics: groupTopics(partitions),
        totalBytes: space.totalBytes,
        usableBytes: space.usableBytes,
        // v5 (KIP-1066): tidelog has no cordoned log directories.
        isCordoned: false,
      })
    }
    return { throttleTimeMs: 0, errorCode: ErrorCode.NONE, results }
  },
}

function wantedFilter(request: DescribeLogDirsRequest): (topic: string, partition: number) => boolean {
  if (request.topics === null) return () => true
  const wanted = new Map(request.topics.map((t) => [t.topic, new Set(t.partitions)]))
  return (topic, partition) => wanted.get(topic)?.has(partition) === true
}

function groupTopics(partitions: readonly Partition[]): DescribeLogDirsResponseDescribeLogDirsTopic[] {
  const topics = new Map<string, DescribeLogDirsResponseDescribeLogDirsTopic>()
  for (const p of partitions) {
    let topic = topics.get(p.topic)
    if (!topic) topics.set(p.topic, (topic = { name: p.topic, partitions: [] }))
    topic.partitions.push({
      partitionIndex: p.partition,
      partitionSize: BigInt(p.log.size),
      offsetLag: BigInt(p.offsetLag),
      isFutureKey: false,
    })
  }
  return [...topics.values()]
}

/** -1 when the file system cannot tell, as Kafka reports unknown sizes. */
async function diskSpace(fs: FileSystem, dir: string): Promise<{ totalBytes: bigint; usableBytes: bigint }> {
  try {
    const space = await fs.statfs(dir)
    return { totalBytes: BigInt(space.totalBytes), usableBytes: BigInt(space.usableBytes) }
  } catch {
    return { totalBytes: -1n, usableBytes: -1n }
  }
}

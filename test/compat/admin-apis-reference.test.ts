/**
 * Issue 33 item 6: the Kafka 4.4 admin API versions tidelog added, replayed as raw requests
 * against tidelog and against Apache Kafka 4.4 (the reference broker), three brokers each,
 * and the transcripts compared line by line:
 *
 * - AlterPartitionReassignments v1 (KIP-1101): AllowReplicationFactorChange=false refuses a
 *   replica list of another length with INVALID_REPLICATION_FACTOR and Kafka's message,
 *   after the list's own checks; v0, and v1 with the flag true, change it. The response
 *   echoes the flag. (During a move the factor is the target's: metadata/topic-admin.test.ts;
 *   a move here finishes before the next request, as moves changed in flight is where the
 *   two part, flag or not: see replicasAre.)
 * - ListConfigResources v0 and v1 (KIP-1142): v0 lists client metrics subscriptions; v1
 *   lists the types asked for (none: every type) in Kafka's order, and a type v1 does not
 *   list fails the request with UNSUPPORTED_VERSION.
 *
 * Node ids are written as node#rank; names within one resource type are sorted (Kafka
 * lists topics from a hash set).
 */
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { errorName } from '../../src/protocol/error-codes.js'
import type { AlterPartitionReassignmentsResponse } from '../../src/protocol/generated/alter-partition-reassignments-response.js'
import type { CreateTopicsResponse } from '../../src/protocol/generated/create-topics-response.js'
import type { IncrementalAlterConfigsResponse } from '../../src/protocol/generated/incremental-alter-configs-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { ListConfigResourcesResponse } from '../../src/protocol/generated/list-config-resources-response.js'
import type { MetadataResponse } from '../../src/protocol/generated/metadata-response.js'
import { ZERO_UUID } from '../../src/protocol/primitives.js'
import { type KafkaReference, startKafkaReference, TIDELOG_AS_REFERENCE } from '../helpers/kafka-reference.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { startCluster, type TestCluster } from '../helpers/testing.js'
import { waitUntil } from '../helpers/wait.js'

const TOPIC = 'rf-check'
const SUBSCRIPTION = 'lcr-subscription'
const CLIENT_METRICS = 16

/** The answers Kafka 4.4 gives, step by step (tidelog must give the same). */
const KAFKA_ANSWERS = [
  'CreateTopics NONE',
  'IncrementalAlterConfigs CLIENT_METRICS NONE',
  'APR v1 allow=false [0,1,2]: INVALID_REPLICATION_FACTOR The replication factor is changed from 2 to 3 (allow=false)',
  'APR v1 allow=false [0]: INVALID_REPLICATION_FACTOR The replication factor is changed from 2 to 1 (allow=false)',
  'APR v1 allow=false [0,0]: INVALID_REPLICA_ASSIGNMENT',
  'APR v1 allow=false []: INVALID_REPLICA_ASSIGNMENT',
  'APR v1 allow=false [1,2]: NONE (allow=false)',
  'APR v1 allow=false [0,1,2]: INVALID_REPLICATION_FACTOR The replication factor is changed from 2 to 3 (allow=false)',
  'APR v0 [0,1,2]: NONE',
  'APR v1 allow=false [0,1]: INVALID_REPLICATION_FACTOR The replication factor is changed from 3 to 2 (allow=false)',
  'APR v1 allow=true [0,1]: NONE (allow=true)',
  'APR v1 allow=false cancel: NO_REASSIGNMENT_IN_PROGRESS (allow=false)',
  'LCR v0: NONE CLIENT_METRICS:lcr-subscription',
  'LCR v1 []: NONE CLIENT_METRICS:lcr-subscription BROKER_LOGGER:node#0 BROKER_LOGGER:node#1 BROKER_LOGGER:node#2 BROKER:node#0 BROKER:node#1 BROKER:node#2 TOPIC:rf-check',
  'LCR v1 [TOPIC]: NONE TOPIC:rf-check',
  'LCR v1 [BROKER]: NONE BROKER:node#0 BROKER:node#1 BROKER:node#2',
  'LCR v1 [TOPIC,BROKER_LOGGER]: NONE BROKER_LOGGER:node#0 BROKER_LOGGER:node#1 BROKER_LOGGER:node#2 TOPIC:rf-check',
  'LCR v1 [CLIENT_METRICS]: NONE CLIENT_METRICS:lcr-subscription',
  'LCR v1 [GROUP]: NONE',
  'LCR v1 [ANY]: UNSUPPORTED_VERSION',
  'LCR v1 [TOPIC,UNKNOWN]: UNSUPPORTED_VERSION',
]

const TYPE_NAMES: Readonly<Record<number, string>> = {
  0: 'UNKNOWN',
  1: 'ANY',
  2: 'TOPIC',
  4: 'BROKER',
  8: 'BROKER_LOGGER',
  16: 'CLIENT_METRICS',
  32: 'GROUP',
}

/** Sends every step to the broker on `port` and returns the transcript. */
async function replay(port: number): Promise<string[]> {
  const client = await RawClient.connect(port)
  const log: string[] = []
  try {
    const call = <T>(apiKey: number, version: number, body: unknown) =>
      rawCall<T>(client, apiKey, version, body, 30_000)
    const metadata = await call<MetadataResponse>(ApiKey.Metadata, 12, { topics: [] })
    const ids = metadata.brokers.map((b) => b.nodeId).sort((a, b) => a - b)
    const node = (rank: number) => ids[rank]
    const rankOf = (name: string) => `node#${ids.indexOf(Number(name))}`

    const created = await call<CreateTopicsResponse>(ApiKey.CreateTopics, 5, {
      topics: [
        {
          name: TOPIC,
          numPartitions: -1,
          replicationFactor: -1,
          assignments: [{ partitionIndex: 0, brokerIds: [node(0), node(1)] }],
          configs: [],
        },
      ],
      timeoutMs: 30_000,
      validateOnly: false,
    })
    log.push(`CreateTopics ${errorName(created.topics[0].errorCode)}`)
    const altered = await call<IncrementalAlterConfigsResponse>(ApiKey.IncrementalAlterConfigs, 1, {
      resources: [
        {
          resourceType: CLIENT_METRICS,
          resourceName: SUBSCRIPTION,
          configs: [{ name: 'interval.ms', configOperation: 0, value: '60000' }],
        },
      ],
      validateOnly: false,
    })
    log.push(`IncrementalAlterConfigs CLIENT_METRICS ${errorName(altered.responses[0].errorCode)}`)

    const reassign = async (version: number, ranks: number[] | null, allow: boolean) => {
      const answer = await call<AlterPartitionReassignmentsResponse>(
        ApiKey.AlterPartitionReassignments,
        version,
        {
          timeoutMs: 30_000,
          allowReplicationFactorChange: allow,
          topics: [
            {
              name: TOPIC,
              partitions: [{ partitionIndex: 0, replicas: ranks === null ? null : ranks.map(node) }],
            },
          ],
        },
      )
      const p = answer.responses[0].partitions[0]
      const what = ranks === null ? 'cancel' : `[${ranks.join(',')}]`
      const flag = version >= 1 ? ` allow=${allow}` : ''
      // Messages are compared where tidelog words them as Kafka (not the replica list's checks).
      const message = errorName(p.errorCode) === 'INVALID_REPLICATION_FACTOR' ? ` ${p.errorMessage}` : ''
      const echo =
        version >= 1 && errorName(p.errorCode) !== 'INVALID_REPLICA_ASSIGNMENT'
          ? ` (allow=${answer.allowReplicationFactorChange})`
          : ''
      log.push(`APR v${version}${flag} ${what}: ${errorName(p.errorCode)}${message}${echo}`)
    }
    /** Waits until the partition's replicas are these (the move, if any, finished). */
    const replicasAre = async (ranks: number[]) => {
      const wanted = ranks.map(node).sort((a, b) => a - b)
      await waitUntil(
        `${TOPIC} on ${wanted}`,
        60_000,
        async () => {
          const m = await call<MetadataResponse>(ApiKey.Metadata, 12, {
            topics: [{ name: TOPIC, topicId: ZERO_UUID }],
          })
          const replicas = [...(m.topics[0]?.partitions[0]?.replicaNodes ?? [])].sort((a, b) => a - b)
          return replicas.join() === wanted.join()
        },
        200,
      )
    }
    await reassign(1, [0, 1, 2], false)
    await reassign(1, [0], false)
    await reassign(1, [0, 0], false)
    await reassign(1, [], false)
    await reassign(1, [1, 2], false)
    // Each move is let finish before the next request: changing a move in flight is where
    // Kafka's model (the replica list now, adding and removing kept from the move before)
    // and tidelog's (the replicas before the move) part, with no flag involved.
    await replicasAre([1, 2])
    await reassign(1, [0, 1, 2], false)
    await reassign(0, [0, 1, 2], true)
    await replicasAre([0, 1, 2])
    await reassign(1, [0, 1], false)
    await reassign(1, [0, 1], true)
    await replicasAre([0, 1])
    await reassign(1, null, false)

    const list = async (version: number, types: number[]) => {
      const answer = await call<ListConfigResourcesResponse>(ApiKey.ListConfigResources, version, {
        resourceTypes: types,
      })
      const order: number[] = []
      for (const r of answer.configResources) if (!order.includes(r.resourceType)) order.push(r.resourceType)
      const resources = [...answer.configResources]
        .map((r) => ({
          type: r.resourceType,
          name: r.resourceType === 4 || r.resourceType === 8 ? rankOf(r.resourceName) : r.resourceName,
        }))
        .sort((a, b) => order.indexOf(a.type) - order.indexOf(b.type) || a.name.localeCompare(b.name))
        .map((r) => ` ${TYPE_NAMES[r.type] ?? r.type}:${r.name}`)
      const asked = version >= 1 ? ` [${types.map((t) => TYPE_NAMES[t] ?? t).join(',')}]` : ''
      log.push(`LCR v${version}${asked}: ${errorName(answer.errorCode)}${resources.join('')}`)
    }
    await list(0, [])
    await list(1, [])
    await list(1, [2])
    await list(1, [4])
    await list(1, [2, 8])
    await list(1, [16])
    await list(1, [32])
    await list(1, [1])
    await list(1, [2, 0])
  } finally {
    client.socket.destroy()
  }
  return log
}

describe('Kafka 4.4 admin API versions (AlterPartitionReassignments v1, ListConfigResources v1): tidelog answers as Kafka', () => {
  let cluster: TestCluster | undefined
  let kafka: KafkaReference | undefined
  after(async () => {
    await cluster?.stop()
    await kafka?.stop()
  })

  let tidelogLog: string[] = []
  it('tidelog (3 brokers)', { timeout: 180_000 }, async () => {
    cluster = await startCluster({ brokers: 3, properties: { ...TIDELOG_AS_REFERENCE } })
    tidelogLog = await replay(cluster.broker(cluster.brokerIds[0]).port)
    await cluster.stop()
    cluster = undefined
    assert.deepEqual(tidelogLog, KAFKA_ANSWERS)
  })

  it('Kafka 4.4 (3 nodes): the same answers', { timeout: 400_000 }, async () => {
    kafka = await startKafkaReference({ nodes: 3 })
    const referenceLog = await replay(Number(kafka.bootstrap.split(',')[0]?.split(':')[1]))
    assert.deepEqual(referenceLog, KAFKA_ANSWERS, 'Kafka answers as recorded')
    if (tidelogLog.length > 0) assert.deepEqual(tidelogLog, referenceLog)
  })
})

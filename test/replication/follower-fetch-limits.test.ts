/**
 * A follower's or a consumer's fetch reads its partitions side by side, yet must answer
 * exactly what reading them one after another does: each partition gets at most
 * partitionMaxBytes and what is left of maxBytes, except that a partition given any bytes
 * returns at least its first batch (fetchers always make progress).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey, type FetchResponse } from '../../src/protocol/generated/index.js'
import { ZERO_UUID } from '../../src/protocol/primitives.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { simpleBatch } from '../storage/helpers.js'
import { ReplicationCluster } from './in-process-cluster.js'

/**
 * What reading in order takes from each partition, given its batch sizes in offset order. A
 * follower gets each partition's first batch even past the limit (Partition.readForFollower
 * reads with minOneMessage); a consumer only in the first partition that returns data
 * (Kafka's minOneMessage, cleared once a partition returned records).
 */
function sequentialBytes(
  batches: readonly number[][],
  maxBytes: number,
  partitionMaxBytes: number,
  reader: 'follower' | 'consumer',
): number[] {
  let budget = maxBytes
  let minOneMessage = true
  return batches.map((sizes) => {
    const limit = Math.min(budget, partitionMaxBytes)
    let taken = 0
    if (limit === 0) return 0 // the log reads nothing for 0 bytes, minOneMessage or not
    for (const size of sizes) {
      if (taken + size > limit && !(minOneMessage && taken === 0)) break
      taken += size
    }
    if (reader === 'consumer' && taken > 0) minOneMessage = false
    budget = Math.max(0, budget - taken)
    return taken
  })
}

const MiB = 1024 * 1024

/** Per partition, [records, bytes] of each batch in offset order; the limits to fetch with. */
interface Layout {
  readonly batches: readonly (readonly number[])[]
  readonly cases: readonly [maxBytes: number, partitionMaxBytes: number][]
}

// Batch sizes differ per partition: one large, two small, one very large, one small.
const SMALL: Layout = {
  batches: [
    [30, 3000],
    [15, 1500, 15, 1500],
    [50, 5000],
    [5, 400],
  ],
  cases: [
    [1 << 20, 1 << 20],
    [100000, 2000],
    [7000, 2000],
    [4500, 1125],
    [3000, 3000],
    [1, 1],
    [20000, 100],
    [0, 1000],
  ],
}

// librdkafka-sized batches (0.65-0.9 MB), several MiB a partition: reads of 2 MiB or more,
// which are cut into pieces read side by side (storage/segment-read-pieces.ts).
const LARGE: Layout = {
  batches: [
    Array.from({ length: 4 }, () => [700, 910_000]).flat(),
    [5, 400],
    Array.from({ length: 5 }, () => [500, 650_000]).flat(),
    Array.from({ length: 3 }, () => [700, 910_000]).flat(),
  ],
  cases: [
    [50 * MiB, 10 * MiB],
    [50 * MiB, 3 * MiB],
    [6 * MiB, 10 * MiB],
    [(5 * MiB) / 2, 4 * MiB],
    [1, 1],
  ],
}

for (const [size, layout] of [
  ['small', SMALL],
  ['large', LARGE],
] as const)
  for (const [reader, replicaId] of [
    ['follower', 7],
    ['consumer', -1],
  ] as const)
    test(`a ${reader} fetch of several partitions takes what reading them in order takes (${size} batches)`, async () => {
      const cluster = await ReplicationCluster.start(1, {})
      let client: RawClient | null = null
      try {
        await cluster.createTopic('limits', 4, 1)
        const broker = cluster.broker(0)
        const batches: number[][] = []
        for (const [partition, spec] of layout.batches.entries()) {
          batches.push([])
          for (let i = 0; i < spec.length; i += 2) {
            const batch = simpleBatch(spec[i], spec[i + 1] / spec[i], i)
            const result = await broker.replicaManager.appendToLeader({
              topic: 'limits',
              partition: partition,
              records: batch,
              requiredAcks: 1,
              timeoutMs: 5000,
            })
            assert.equal(result.errorCode, ErrorCode.NONE)
            batches[partition].push(batch.length)
          }
        }
        client = await RawClient.connect(Number(broker.bootstrapServers.split(':')[1]))
        for (const [maxBytes, partitionMaxBytes] of layout.cases) {
          const response: FetchResponse = await rawCall<FetchResponse>(
            client,
            ApiKey.Fetch,
            11,
            {
              replicaId,
              maxWaitMs: 0,
              minBytes: 1,
              maxBytes,
              isolationLevel: 0,
              sessionId: 0,
              sessionEpoch: -1,
              topics: [
                {
                  topic: 'limits',
                  topicId: ZERO_UUID,
                  partitions: layout.batches.map((_, partition) => ({
                    partition,
                    currentLeaderEpoch: -1,
                    fetchOffset: 0n,
                    lastFetchedEpoch: -1,
                    logStartOffset: 0n,
                    partitionMaxBytes,
                  })),
                },
              ],
            },
            // RawClient gathers an answer of several MB slowly on a loaded machine.
            30_000,
          )
          const got: number[] = response.responses[0].partitions.map((p) => {
            assert.equal(p.errorCode, ErrorCode.NONE)
            return (p.records as Buffer | null)?.length ?? 0
          })
          assert.deepEqual(
            got,
            sequentialBytes(batches, maxBytes, partitionMaxBytes, reader),
            `maxBytes ${maxBytes}, partitionMaxBytes ${partitionMaxBytes}`,
          )
        }
      } finally {
        client?.close()
        await cluster.close()
      }
    })

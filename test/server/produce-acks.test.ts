/**
 * The produce handler checks acks once: -1, 0 and 1 are appended, any other number is
 * answered INVALID_REQUIRED_ACKS on every partition and nothing is appended (Kafka's
 * ReplicaManager.isValidRequiredAcks).
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey, type ProduceResponse } from '../../src/protocol/generated/index.js'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import type { Cluster } from '../../src/server/cluster.js'
import { startCluster } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { createTopic } from '../helpers/topics.js'

const TOPIC = 'produce-acks'

function produce(acks: number): object {
  return {
    transactionalId: null,
    acks,
    timeoutMs: 5000,
    topicData: [
      {
        name: TOPIC,
        partitionData: [0, 1].map((index) => ({
          index,
          records: encodeRecordBatchSync({ records: [{ value: Buffer.from(`acks ${acks}`), timestamp: 1 }] }),
        })),
      },
    ],
  }
}

describe('produce acks', () => {
  let cluster: Cluster
  let client: RawClient

  before(async () => {
    cluster = await startCluster({ brokers: 1, port: 0 })
    await createTopic(cluster, TOPIC, { partitions: 2 })
    client = await RawClient.connect(Number(cluster.bootstrapServers.split(':').at(-1)))
  })
  after(async () => {
    client?.socket.destroy()
    await cluster?.stop()
  })

  const logEnds = () =>
    [0, 1].map((p) => Number(cluster.brokers[0].replicaManager.getPartition(TOPIC, p)!.log.logEndOffset))

  test('acks other than -1, 0 and 1 are answered INVALID_REQUIRED_ACKS and append nothing', async () => {
    const before = logEnds()
    for (const acks of [2, -2, 32767]) {
      const response = await rawCall<ProduceResponse>(client, ApiKey.Produce, 9, produce(acks))
      const codes = response.responses.flatMap((t) => t.partitionResponses.map((p) => p.errorCode))
      assert.deepEqual(
        codes,
        [ErrorCode.INVALID_REQUIRED_ACKS, ErrorCode.INVALID_REQUIRED_ACKS],
        `acks ${acks}`,
      )
    }
    assert.deepEqual(logEnds(), before)
  })

  test('acks -1 and 1 append and answer NONE', async () => {
    const before = logEnds()
    for (const acks of [-1, 1]) {
      const response = await rawCall<ProduceResponse>(client, ApiKey.Produce, 9, produce(acks))
      const codes = response.responses.flatMap((t) => t.partitionResponses.map((p) => p.errorCode))
      assert.deepEqual(codes, [ErrorCode.NONE, ErrorCode.NONE], `acks ${acks}`)
    }
    assert.deepEqual(
      logEnds(),
      before.map((end) => end + 2),
    )
  })
})

/**
 * acks=0 produce requests a client wrote before closing its connection are all appended,
 * as Kafka reads and handles every request on a socket before it sees the close: an acks=0
 * producer's stop() closes right after its last write, with nothing to wait for.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ApiKey, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import { startCluster } from '../helpers/cluster.js'
import { RawClient } from '../helpers/raw-client.js'
import { createTopic } from '../helpers/topics.js'
import { waitUntil } from '../helpers/wait.js'

await loadAllApiCodecs()

const TOPIC = 'acks-zero-close'

function produceFrame(correlationId: number, partition: number, value: string): Buffer {
  return RawClient.frame(ApiKey.Produce, 9, correlationId, {
    transactionalId: null,
    acks: 0,
    timeoutMs: 5000,
    topicData: [
      {
        name: TOPIC,
        partitionData: [
          {
            index: partition,
            records: encodeRecordBatchSync({
              records: [{ value: Buffer.from(value), timestamp: Date.now() }],
            }),
          },
        ],
      },
    ],
  })
}

test('acks=0 produces written just before the client closes are all appended', async () => {
  const cluster = await startCluster({ brokers: 1, port: 0 })
  try {
    await createTopic(cluster, TOPIC, { partitions: 2 })
    const port = Number(cluster.bootstrapServers.split(':').at(-1))
    const rounds = 20
    const perRound = 10
    for (let round = 0; round < rounds; round++) {
      const client = await RawClient.connect(port)
      const frames = Array.from({ length: perRound }, (_, i) =>
        produceFrame(round * 100 + i, i % 2, `r${round}-${i}`),
      )
      client.socket.end(Buffer.concat(frames))
      await new Promise<void>((resolve) => client.socket.once('close', () => resolve()))
    }
    const broker = cluster.brokers[0]
    const total = () =>
      [0, 1].reduce((n, p) => n + Number(broker.replicaManager.getPartition(TOPIC, p)!.log.logEndOffset), 0)
    await waitUntil('every acks=0 record appended', 10000, () => total() === rounds * perRound, 50).catch(
      () => undefined,
    )
    assert.equal(total(), rounds * perRound)
  } finally {
    await cluster.stop()
  }
})

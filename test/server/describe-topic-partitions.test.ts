/**
 * DescribeTopicPartitions (key 75): topics sorted by name, Kafka's cursor paging under
 * responsePartitionLimit, unknown topics, and INVALID_REQUEST for a cursor outside the
 * requested topics.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { DescribeTopicPartitionsResponse } from '../../src/protocol/generated/index.js'
import { ApiKey, apis, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { decodeResponseHeader } from '../../src/protocol/generated/response-header.js'
import { Reader } from '../../src/protocol/primitives.js'
import { RawClient } from '../helpers/raw-client.js'
import { startCluster } from '../helpers/testing.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

async function describe(port: number, body: object): Promise<DescribeTopicPartitionsResponse> {
  const client = await RawClient.connect(port)
  try {
    client.write(RawClient.frame(ApiKey.DescribeTopicPartitions, 0, 1, body))
    const frame = await client.readFrame()
    assert.ok(frame)
    const r = new Reader(frame)
    const api = apis.get(ApiKey.DescribeTopicPartitions)!
    decodeResponseHeader(r, api.responseHeaderVersion(0))
    return api.decodeResponse(r, 0) as DescribeTopicPartitionsResponse
  } finally {
    client.socket.destroy()
  }
}

const shape = (response: DescribeTopicPartitionsResponse) =>
  response.topics.map(
    (t) => `${t.name}:${t.errorCode}:${t.partitions.map((p) => p.partitionIndex).join(',')}`,
  )

test('DescribeTopicPartitions pages by cursor and answers unknown topics and bad cursors', async () => {
  const cluster = await startCluster({
    brokers: 1,
    properties: { 'offsets.topic.replication.factor': 1 },
    topics: [
      { name: 'b-topic', partitions: 3 },
      { name: 'a-topic', partitions: 3 },
    ],
  })
  try {
    const port = cluster.broker(0).port
    const topics = [{ name: 'b-topic' }, { name: 'a-topic' }, { name: 'missing' }]
    const first = await describe(port, { topics, responsePartitionLimit: 4, cursor: null })
    assert.deepEqual(shape(first), ['a-topic:0:0,1,2', 'b-topic:0:0'])
    assert.deepEqual(
      { topicName: first.nextCursor?.topicName, partitionIndex: first.nextCursor?.partitionIndex },
      { topicName: 'b-topic', partitionIndex: 1 },
    )
    const p = first.topics[0].partitions[0]
    assert.equal(p.leaderId, 0)
    assert.deepEqual(p.isrNodes, [0])
    assert.deepEqual(p.eligibleLeaderReplicas, [])
    const second = await describe(port, { topics, responsePartitionLimit: 4, cursor: first.nextCursor })
    assert.deepEqual(shape(second), ['b-topic:0:1,2', 'missing:3:'], 'UNKNOWN_TOPIC_OR_PARTITION (3)')
    assert.equal(second.nextCursor, null)
    const bad = await describe(port, {
      topics: [{ name: 'a-topic' }],
      responsePartitionLimit: 10,
      cursor: { topicName: 'b-topic', partitionIndex: 0 },
    })
    assert.deepEqual(shape(bad), ['a-topic:42:'], 'INVALID_REQUEST (42)')
    const all = await describe(port, { topics: [], responsePartitionLimit: 2000, cursor: null })
    assert.ok(all.topics.some((t) => t.name === 'a-topic') && all.topics.some((t) => t.name === 'b-topic'))
  } finally {
    await cluster.stop()
  }
})

/**
 * Issue 33 item 2: share sessions on one broker, over raw requests. A member whose connection
 * closes has its share session ended and its acquired records released at once (Kafka's
 * ClientConnectionDisconnectListener), not after the 30 s lock: another member gets them
 * again with delivery count 2. The share session cache holds group.share.max.share.sessions
 * (2 here): a third member's opening fetch is SHARE_SESSION_LIMIT_REACHED, a member opening
 * its own session again is not, and a closed connection frees its place. The share metrics
 * on /metrics (KIP-932's names, Kafka 4.4's) count sessions, evictions, acknowledged records by
 * type, a share-partition's in-flight records and the share groups coordinated here, share
 * fetches and acknowledgements per topic and their failures (BrokerTopicMetrics), the
 * share-partitions' load times (ShareGroupMetrics' PartitionLoadTimeMs), the share group
 * rebalances (share-group-rebalance-count) and the share coordinator's state writes.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Admin } from '../../../src/client/admin.js'
import { Producer } from '../../../src/client/producer.js'
import { parsePrometheusText, sumSamples } from '../../../src/ops/prometheus-text.js'
import { ErrorCode } from '../../../src/protocol/error-codes.js'
import {
  ApiKey,
  type ShareAcknowledgeResponse,
  type ShareFetchResponse,
  type ShareGroupHeartbeatResponse,
} from '../../../src/protocol/generated/index.js'
import type { Cluster } from '../../../src/server/cluster.js'
import { createTopics } from '../../client/helpers.js'
import { startBroker } from '../../helpers/cluster.js'
import { rawCall } from '../../helpers/raw-call.js'
import { RawClient } from '../../helpers/raw-client.js'
import { waitUntil } from '../../helpers/wait.js'

const TOPIC = 'share-sessions'
const GROUP = 'share-sessions-group'
const METRICS_TOPIC = 'share-metrics'
const METRICS_GROUP = 'share-metrics-group'

describe('share sessions on a broker', () => {
  let cluster: Cluster | undefined
  let topicId = ''
  const clients: RawClient[] = []
  before(async () => {
    cluster = await startBroker({
      port: 0,
      properties: {
        'offsets.topic.num.partitions': 1,
        'share.coordinator.state.topic.num.partitions': 1,
        'tidelog.share.auto.offset.reset': 'earliest',
        'group.share.max.share.sessions': 2,
        'tidelog.http.listener': '127.0.0.1:0',
      },
    })
    await createTopics(cluster.bootstrapServers, [
      { topic: TOPIC, partitions: 1, replicationFactor: 1 },
      { topic: METRICS_TOPIC, partitions: 1, replicationFactor: 1 },
    ])
    topicId = cluster.brokers[0].metadataImage().topics.get(TOPIC)?.topicId ?? ''
    const producer = new Producer({ bootstrapServers: cluster.bootstrapServers, lingerMs: 0 })
    for (let i = 0; i < 10; i++)
      await producer.send({ topic: TOPIC, partition: 0, value: Buffer.from(`v${i}`) })
    for (let i = 0; i < 5; i++)
      await producer.send({ topic: METRICS_TOPIC, partition: 0, value: Buffer.from(`m${i}`) })
    await producer.close()
    const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
    await admin.findCoordinator(GROUP)
    admin.close()
  })
  after(async () => {
    for (const raw of clients) raw.close()
    await cluster?.stop()
  })

  const connect = async () => {
    const raw = await RawClient.connect(Number((cluster as Cluster).bootstrapServers.split(':')[1]))
    clients.push(raw)
    return raw
  }

  /** One share fetch of partition 0: the top-level error and the acquired ranges as first-last×count. */
  const shareFetch = async (
    raw: RawClient,
    memberId: string,
    epoch: number,
    groupId = GROUP,
    id = topicId,
  ) => {
    const r = await rawCall<ShareFetchResponse>(raw, ApiKey.ShareFetch, 1, {
      groupId,
      memberId,
      shareSessionEpoch: epoch,
      maxWaitMs: 100,
      minBytes: 1,
      maxBytes: 1 << 20,
      maxRecords: 100,
      batchSize: 100,
      topics:
        epoch === 0
          ? [
              {
                topicId: id,
                partitions: [{ partitionIndex: 0, partitionMaxBytes: 0, acknowledgementBatches: [] }],
              },
            ]
          : [],
      forgottenTopicsData: [],
    })
    const acquired = r.responses
      .flatMap((t) => t.partitions)
      .flatMap((p) => p.acquiredRecords)
      .map((a) => `${a.firstOffset}-${a.lastOffset}x${a.deliveryCount}`)
    return { errorCode: r.errorCode, acquired }
  }

  it("releases a member's acquired records when its connection closes", async () => {
    const first = await connect()
    const second = await connect()
    let acquired: string[] = []
    let epoch = 0
    await waitUntil('the first member acquires 0-9', 15_000, async () => {
      acquired = (await shareFetch(first, 'Zmlyc3QtbWVtYmVyLTAwMDAw', epoch++)).acquired
      return acquired.length > 0
    })
    assert.deepEqual(acquired, ['0-9x1'])
    assert.deepEqual((await shareFetch(second, 'c2Vjb25kLW1lbWJlci0wMDAw', 0)).acquired, [], 'all locked')
    first.close()
    let again: string[] = []
    let secondEpoch = 1
    // Well within the 30 s lock: released by the close, not by the lock running out.
    await waitUntil('the second member gets them', 5_000, async () => {
      again = (await shareFetch(second, 'c2Vjb25kLW1lbWJlci0wMDAw', secondEpoch++)).acquired
      return again.length > 0
    })
    assert.deepEqual(again, ['0-9x2'])
    second.close()
  })

  it('refuses a share session beyond group.share.max.share.sessions', async () => {
    const [a, b, c] = [await connect(), await connect(), await connect()]
    // The previous test's sessions end with their connections (asynchronously on the broker).
    await waitUntil('a first session opens', 5_000, async () => {
      return (await shareFetch(a, 'bWVtYmVyLWEtMDAwMDAwMDAw', 0)).errorCode === ErrorCode.NONE
    })
    await waitUntil('a second session opens', 5_000, async () => {
      return (await shareFetch(b, 'bWVtYmVyLWItMDAwMDAwMDAw', 0)).errorCode === ErrorCode.NONE
    })
    assert.equal(
      (await shareFetch(c, 'bWVtYmVyLWMtMDAwMDAwMDAw', 0)).errorCode,
      ErrorCode.SHARE_SESSION_LIMIT_REACHED,
    )
    assert.equal(
      (await shareFetch(b, 'bWVtYmVyLWItMDAwMDAwMDAw', 0)).errorCode,
      ErrorCode.NONE,
      'a member opening its session again frees its old one first',
    )
    a.close()
    await waitUntil('the closed connection frees its place', 5_000, async () => {
      return (await shareFetch(c, 'bWVtYmVyLWMtMDAwMDAwMDAw', 0)).errorCode === ErrorCode.NONE
    })
    b.close()
    c.close()
  })

  it('serves the share metrics on /metrics', async () => {
    const broker = (cluster as Cluster).brokers[0]
    const scrape = async () => parsePrometheusText(await (await fetch(`${broker.httpUrl}metrics`)).text())
    const before = await scrape()
    const metricsTopicId = broker.metadataImage().topics.get(METRICS_TOPIC)?.topicId ?? ''
    const raw = await connect()
    const member = 'bWV0cmljcy1tZW1iZXItMDAw'
    const joined = await rawCall<ShareGroupHeartbeatResponse>(raw, ApiKey.ShareGroupHeartbeat, 1, {
      groupId: METRICS_GROUP,
      memberId: member,
      memberEpoch: 0,
      rackId: null,
      subscribedTopicNames: [METRICS_TOPIC],
    })
    assert.equal(joined.errorCode, ErrorCode.NONE)
    let acquired: string[] = []
    let epoch = 0
    // The previous tests' sessions end with their connections (asynchronously on the broker).
    await waitUntil('the member acquires 0-4', 15_000, async () => {
      const got = await shareFetch(raw, member, epoch, METRICS_GROUP, metricsTopicId)
      if (got.errorCode === ErrorCode.NONE) epoch++
      acquired = got.acquired
      return acquired.length > 0
    })
    assert.deepEqual(acquired, ['0-4x1'])
    const acked = await rawCall<ShareAcknowledgeResponse>(raw, ApiKey.ShareAcknowledge, 1, {
      groupId: METRICS_GROUP,
      memberId: member,
      shareSessionEpoch: epoch,
      topics: [
        {
          topicId: metricsTopicId,
          partitions: [
            {
              partitionIndex: 0,
              acknowledgementBatches: [
                { firstOffset: 0n, lastOffset: 1n, acknowledgeTypes: [1] },
                { firstOffset: 2n, lastOffset: 2n, acknowledgeTypes: [2] },
                { firstOffset: 3n, lastOffset: 3n, acknowledgeTypes: [3] },
              ],
            },
          ],
        },
      ],
    })
    assert.equal(acked.responses[0].partitions[0].errorCode, ErrorCode.NONE)
    const during = await scrape()
    const delta = (name: string, match: Record<string, string> = {}) =>
      sumSamples(during, name, match) - sumSamples(before, name, match)
    const acks = 'kafka_server_sharegroupmetrics_recordacknowledgements_total'
    assert.equal(delta(acks, { ackType: 'Accept' }), 2)
    assert.equal(delta(acks, { ackType: 'Release' }), 1)
    assert.equal(delta(acks, { ackType: 'Reject' }), 1)
    assert.equal(sumSamples(during, 'kafka_server_sharesessioncache_sharesessionscount'), 1)
    assert.equal(sumSamples(during, 'kafka_server_sharesessioncache_sharepartitionscount'), 1)
    // 0-1 accepted (below the start offset now), 2 released, 3 rejected, 4 held: 2-4 in flight.
    assert.equal(
      sumSamples(during, 'kafka_server_sharepartitionmetrics_inflightmessagecount', {
        group: METRICS_GROUP,
        topic: METRICS_TOPIC,
        partition: '0',
      }),
      3,
    )
    assert.ok(
      sumSamples(during, 'kafka_server_group_coordinator_metrics_group_count', { protocol: 'share' }) >= 1,
    )
    assert.ok(
      sumSamples(during, 'kafka_server_group_coordinator_metrics_share_group_count', { state: 'stable' }) >=
        1,
    )
    assert.equal(delta('kafka_server_group_coordinator_metrics_share_group_rebalance_count'), 1, 'the join')
    const scm = 'kafka_server_share_coordinator_metrics'
    assert.ok(delta(`${scm}_write_total`) >= 1, "the acknowledgement's state write")
    assert.ok(
      sumSamples(during, `${scm}_write_latency_max`) >= sumSamples(during, `${scm}_write_latency_avg`),
    )
    const btm = 'kafka_server_brokertopicmetrics'
    const topic = { topic: METRICS_TOPIC }
    assert.ok(delta(`${btm}_totalsharefetchrequests_total`, topic) >= 1, 'the fetches counted')
    assert.equal(delta(`${btm}_failedsharefetchrequests_total`, topic), 0)
    assert.equal(delta(`${btm}_totalshareacknowledgementrequests_total`, topic), 1)
    assert.equal(delta(`${btm}_failedshareacknowledgementrequests_total`, topic), 0)
    const loads = 'kafka_server_sharegroupmetrics_partitionloadtimems'
    assert.ok(delta(`${loads}_count`) >= 1, "the group's share-partition was loaded")
    assert.ok(sumSamples(during, `${loads}_max`) >= sumSamples(during, `${loads}_mean`))
    // Offset 4 accepted once cannot be accepted again; a partition the topic lacks fails a fetch.
    const again = await rawCall<ShareAcknowledgeResponse>(raw, ApiKey.ShareAcknowledge, 1, {
      groupId: METRICS_GROUP,
      memberId: member,
      shareSessionEpoch: epoch + 1,
      topics: [
        {
          topicId: metricsTopicId,
          partitions: [
            {
              partitionIndex: 0,
              acknowledgementBatches: [{ firstOffset: 4n, lastOffset: 4n, acknowledgeTypes: [1] }],
            },
          ],
        },
      ],
    })
    assert.equal(again.errorCode, ErrorCode.NONE)
    assert.equal(again.responses[0].partitions[0].errorCode, ErrorCode.NONE)
    const wrong = await rawCall<ShareAcknowledgeResponse>(raw, ApiKey.ShareAcknowledge, 1, {
      groupId: METRICS_GROUP,
      memberId: member,
      shareSessionEpoch: epoch + 2,
      topics: [
        {
          topicId: metricsTopicId,
          partitions: [
            {
              partitionIndex: 0,
              acknowledgementBatches: [{ firstOffset: 4n, lastOffset: 4n, acknowledgeTypes: [1] }],
            },
          ],
        },
      ],
    })
    assert.equal(wrong.responses[0].partitions[0].errorCode, ErrorCode.INVALID_RECORD_STATE)
    const missing = await rawCall<ShareFetchResponse>(raw, ApiKey.ShareFetch, 1, {
      groupId: METRICS_GROUP,
      memberId: member,
      shareSessionEpoch: 0,
      maxWaitMs: 0,
      minBytes: 1,
      maxBytes: 1 << 20,
      maxRecords: 100,
      batchSize: 100,
      topics: [
        {
          topicId: metricsTopicId,
          partitions: [{ partitionIndex: 7, partitionMaxBytes: 0, acknowledgementBatches: [] }],
        },
      ],
      forgottenTopicsData: [],
    })
    assert.equal(missing.responses[0].partitions[0].errorCode, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    const failed = await scrape()
    const failedDelta = (name: string) => sumSamples(failed, name, topic) - sumSamples(before, name, topic)
    assert.equal(failedDelta(`${btm}_failedshareacknowledgementrequests_total`), 1)
    assert.equal(failedDelta(`${btm}_totalshareacknowledgementrequests_total`), 3)
    assert.equal(failedDelta(`${btm}_failedsharefetchrequests_total`), 1)
    raw.close()
    await waitUntil('the closed connection counts as an eviction', 5_000, async () => {
      const after = await scrape()
      return (
        sumSamples(after, 'kafka_server_sharesessioncache_sharesessionevictions_total') -
          sumSamples(before, 'kafka_server_sharesessioncache_sharesessionevictions_total') ===
        1
      )
    })
  })
})

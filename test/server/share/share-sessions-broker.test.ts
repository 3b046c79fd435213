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
import { parsePrometheusText, sumSamples } from '../../../src/ops/prometheus-text.js'
import { ErrorCode } from '../../../src/protocol/error-codes.js'
import {
  ApiKey,
  type ShareAcknowledgeResponse,
  type ShareFetchResponse,
  type ShareGroupHeartbeatResponse,
} from '../../../src/protocol/generated/index.js'
import { rawCall } from '../../helpers/raw-call.js'
import type { RawClient } from '../../helpers/raw-client.js'
import {
  acquiredRanges,
  ShareBroker,
  shareAcknowledgeBody,
  shareFetchBody,
  shareHeartbeatBody,
} from '../../helpers/share-broker.js'
import { waitUntil } from '../../helpers/wait.js'

const TOPIC = 'share-sessions'
const GROUP = 'share-sessions-group'
const METRICS_TOPIC = 'share-metrics'
const METRICS_GROUP = 'share-metrics-group'

describe('share sessions on a broker', () => {
  let broker: ShareBroker | undefined
  let topicId = ''
  before(async () => {
    broker = await ShareBroker.start({
      properties: { 'group.share.max.share.sessions': 2, 'tidelog.http.listener': '127.0.0.1:0' },
      topics: [
        { topic: TOPIC, records: 10, valuePrefix: 'v' },
        { topic: METRICS_TOPIC, records: 5, valuePrefix: 'm' },
      ],
      coordinatorGroup: GROUP,
    })
    topicId = broker.topicId(TOPIC)
  })
  after(async () => {
    await broker?.stop()
  })

  const connect = () => (broker as ShareBroker).connect()

  /** One share fetch of partition 0: the top-level error and the acquired ranges as first-last×count. */
  const shareFetch = async (
    raw: RawClient,
    memberId: string,
    epoch: number,
    groupId = GROUP,
    id = topicId,
  ) => {
    const r = await rawCall<ShareFetchResponse>(
      raw,
      ApiKey.ShareFetch,
      1,
      shareFetchBody({ groupId, memberId, shareSessionEpoch: epoch, topicId: id }),
    )
    return { errorCode: r.errorCode, acquired: acquiredRanges(r) }
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
    const node = (broker as ShareBroker).cluster.brokers[0]
    const scrape = async () => parsePrometheusText(await (await fetch(`${node.httpUrl}metrics`)).text())
    const before = await scrape()
    const metricsTopicId = (broker as ShareBroker).topicId(METRICS_TOPIC)
    const raw = await connect()
    const member = 'bWV0cmljcy1tZW1iZXItMDAw'
    const joined = await rawCall<ShareGroupHeartbeatResponse>(
      raw,
      ApiKey.ShareGroupHeartbeat,
      1,
      shareHeartbeatBody(METRICS_GROUP, member, 0, [METRICS_TOPIC]),
    )
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
    const acked = await rawCall<ShareAcknowledgeResponse>(
      raw,
      ApiKey.ShareAcknowledge,
      1,
      shareAcknowledgeBody(METRICS_GROUP, member, epoch, metricsTopicId, [
        { firstOffset: 0n, lastOffset: 1n, acknowledgeTypes: [1] },
        { firstOffset: 2n, lastOffset: 2n, acknowledgeTypes: [2] },
        { firstOffset: 3n, lastOffset: 3n, acknowledgeTypes: [3] },
      ]),
    )
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
    const again = await rawCall<ShareAcknowledgeResponse>(
      raw,
      ApiKey.ShareAcknowledge,
      1,
      shareAcknowledgeBody(METRICS_GROUP, member, epoch + 1, metricsTopicId, [
        { firstOffset: 4n, lastOffset: 4n, acknowledgeTypes: [1] },
      ]),
    )
    assert.equal(again.errorCode, ErrorCode.NONE)
    assert.equal(again.responses[0].partitions[0].errorCode, ErrorCode.NONE)
    const wrong = await rawCall<ShareAcknowledgeResponse>(
      raw,
      ApiKey.ShareAcknowledge,
      1,
      shareAcknowledgeBody(METRICS_GROUP, member, epoch + 2, metricsTopicId, [
        { firstOffset: 4n, lastOffset: 4n, acknowledgeTypes: [1] },
      ]),
    )
    assert.equal(wrong.responses[0].partitions[0].errorCode, ErrorCode.INVALID_RECORD_STATE)
    const missing = await rawCall<ShareFetchResponse>(
      raw,
      ApiKey.ShareFetch,
      1,
      shareFetchBody({
        groupId: METRICS_GROUP,
        memberId: member,
        shareSessionEpoch: 0,
        topicId: metricsTopicId,
        partition: 7,
        maxWaitMs: 0,
      }),
    )
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

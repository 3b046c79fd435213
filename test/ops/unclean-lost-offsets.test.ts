/**
 * The offsets an unclean election lost, as /metrics counts them: a follower falls out of
 * the ISR, the leader commits more records alone and stops, the out-of-sync follower is
 * elected uncleanly, and when the old leader returns it truncates the records it had
 * committed: kafka_controller_controllerstats_uncleanleaderelection_lostoffsets_total on
 * that broker counts exactly them, and the controller counts one unclean election.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { parsePrometheusText, sumSamples } from '../../src/ops/prometheus-text.js'
import { kafka } from '../helpers/cluster-clients.js'
import { ReplicationCluster, waitUntil } from '../replication/in-process-cluster.js'

const TOPIC = 'ops-unclean'
const LOST = 'kafka_controller_controllerstats_uncleanleaderelection_lostoffsets_total'

let cluster: ReplicationCluster

before(async () => {
  cluster = await ReplicationCluster.start(3, {
    'tidelog.http.listener': '127.0.0.1:0',
    'unclean.leader.election.enable': true,
    'replica.lag.time.max.ms': 1000,
    'auto.leader.rebalance.enable': false,
    'broker.session.timeout.ms': 3000,
  })
  await cluster.createTopic(TOPIC, 1, 2)
})

after(async () => {
  await cluster?.close()
})

async function scrapeSum(index: number, name: string): Promise<number> {
  const response = await fetch(`${cluster.broker(index).httpUrl}metrics`)
  return sumSamples(parsePrometheusText(await response.text()), name)
}

async function produce(count: number, prefix: string): Promise<void> {
  const producer = kafka(cluster.bootstrap).producer({ allowAutoTopicCreation: false })
  await producer.connect()
  try {
    await producer.send({
      topic: TOPIC,
      acks: -1,
      messages: Array.from({ length: count }, (_, i) => ({ partition: 0, value: `${prefix}-${i}` })),
    })
  } finally {
    await producer.disconnect()
  }
}

test('the committed records an unclean election lost are counted where they are truncated', async () => {
  const initial = cluster.state(TOPIC, 0)
  const leader = initial.leader
  const follower = initial.replicas.find((id) => id !== leader)!
  await produce(5, 'both')
  await waitUntil(
    'the follower has the first records',
    10000,
    () => cluster.replica(follower, TOPIC, 0).highWatermark === 5,
  )
  for (const index of [0, 1, 2]) assert.equal(await scrapeSum(index, LOST), 0)

  // The follower stops fetching: the leader shrinks the ISR to itself and commits alone.
  cluster.transports[follower].freeze()
  await waitUntil('ISR shrunk to the leader', 15000, () => cluster.state(TOPIC, 0).isr.length === 1)
  await produce(10, 'leader-only')
  assert.equal(cluster.replica(leader, TOPIC, 0).highWatermark, 15)

  // The leader goes; the out-of-sync follower is the only replica left: elected uncleanly.
  await cluster.stopBroker(leader)
  cluster.transports[follower].thaw()
  await waitUntil('unclean leader elected', 15000, () => cluster.state(TOPIC, 0).leader === follower)
  const running = [0, 1, 2].filter((i) => cluster.brokers[i] !== null)
  let unclean = 0
  for (const index of running)
    unclean += await scrapeSum(index, 'kafka_controller_controllerstats_uncleanleaderelections_total')
  assert.equal(unclean, 1, 'one unclean election, counted by the controller')

  // The old leader returns, follows the new one and truncates offsets 5..14, committed once.
  await cluster.startBroker(leader)
  await waitUntil(
    'old leader truncated',
    15000,
    () => cluster.replica(leader, TOPIC, 0).log.logEndOffset === 5,
  )
  assert.equal(await scrapeSum(leader, LOST), 10)
  assert.equal(await scrapeSum(follower, LOST), 0)
})

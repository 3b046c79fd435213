/**
 * Issue 20, broker incarnations: kill -9 of a broker and its immediate restart. The new
 * process registers at once over its predecessor's registration (whose lease lives on for
 * broker.session.timeout.ms), with a new incarnation id and a higher broker epoch, and is
 * back in every ISR long before the old session would end, where waiting for the old
 * session took its whole timeout.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { toBrokerId } from '../helpers/broker-ids.js'
import { startCluster } from '../helpers/testing.js'

const TOPIC = 'incarnations'
/**
 * Longer than Kafka's default (9 s), so the bound can be generous and still tell the fix from
 * the bug: the fix takes about 1 s on a quiet machine; the bug waited out the old session,
 * which is still over 20 s after a restart that itself took up to 10 s on a loaded machine.
 */
const SESSION_TIMEOUT_MS = 30_000
const FULL_ISR_BOUND_MS = 10_000

test('a broker killed and restarted at once is back in every ISR before its old session ends, as a new incarnation', async () => {
  const cluster = await startCluster({
    brokers: 3,
    properties: { 'broker.session.timeout.ms': SESSION_TIMEOUT_MS },
    topics: [{ name: TOPIC, partitions: 3, replicationFactor: 3, configs: { 'min.insync.replicas': 2 } }],
  })
  const kafka = new Kafka({
    clientId: 'incarnations',
    brokers: cluster.bootstrapServers.split(','),
    logLevel: logLevel.NOTHING,
  })
  const producer = kafka.producer()
  try {
    await producer.connect()
    await producer.send({
      topic: TOPIC,
      acks: -1,
      messages: Array.from({ length: 100 }, (_, i) => ({ value: `before ${i}` })),
    })
    const victim = cluster.leaderOf(TOPIC, 0)
    const before = cluster
      .broker(victim === 0 ? 1 : 0)
      .metadataImage()
      .brokers.get(toBrokerId(victim))!
    const leaderEpochBefore = cluster.partitionState(TOPIC, 0).leaderEpoch
    cluster.kill(victim)
    await cluster.restart(victim)
    const restartedAt = performance.now()
    await cluster.waitForIsr(TOPIC, { timeoutMs: FULL_ISR_BOUND_MS })
    const elapsedMs = performance.now() - restartedAt
    assert.ok(elapsedMs < FULL_ISR_BOUND_MS, `full ISR ${elapsedMs.toFixed(0)} ms after the restart`)
    const after = cluster
      .broker(victim === 0 ? 1 : 0)
      .metadataImage()
      .brokers.get(toBrokerId(victim))!
    assert.notEqual(after.incarnationId, before.incarnationId, 'a new incarnation id')
    assert.ok(
      after.brokerEpoch! > before.brokerEpoch!,
      `broker epoch ${after.brokerEpoch} > ${before.brokerEpoch}`,
    )
    assert.ok(
      cluster.partitionState(TOPIC, 0).leaderEpoch > leaderEpochBefore,
      'the previous incarnation lost its leadership (a new leader epoch)',
    )
    // Acknowledged writes survived, and the cluster takes acks=all writes again.
    await producer.send({ topic: TOPIC, acks: -1, messages: [{ value: 'after' }] })
    const admin = kafka.admin()
    await admin.connect()
    const offsets = await admin.fetchTopicOffsets(TOPIC)
    await admin.disconnect()
    assert.equal(
      offsets.reduce((sum, p) => sum + Number(p.high), 0),
      101,
    )
  } finally {
    await producer.disconnect()
    await cluster.stop()
  }
})

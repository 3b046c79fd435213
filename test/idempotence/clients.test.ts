/**
 * Idempotent producers with real clients on three in-process brokers (shared embedded
 * store, RF=3, min.insync.replicas=2), each behind a TCP proxy it advertises. Retries are
 * forced two ways: the proxies lose the responses of some Produce requests after the
 * broker wrote them, and the leader of a partition is stopped mid-stream (its followers,
 * which applied the producer state from what they fetched, take over) and started again.
 * Checked from the logs: every record present exactly once, in send order per partition.
 * Also InitProducerId across versions and brokers.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kafka, logLevel } from 'kafkajs'
import { systemClock } from '../../src/common/clock.js'
import { silentLogger } from '../../src/common/logger.js'
import { ProducerIdManager } from '../../src/metadata/producer-id-manager.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { InitProducerIdResponse } from '../../src/protocol/generated/init-producer-id-response.js'
import { PYTHON, repoRoot } from '../helpers/compat-clients.js'
import { ProxiedCluster, problems } from '../helpers/proxied-cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { waitUntil } from '../replication/in-process-cluster.js'

describe('idempotent producers with forced retries (3 brokers behind proxies)', () => {
  let cluster: ProxiedCluster
  before(async () => {
    cluster = await ProxiedCluster.start()
  })
  after(async () => {
    await cluster?.close()
  })

  it('InitProducerId v0-v5: fresh ids from every broker, epoch 0; transactional ids sent to their coordinator', async () => {
    const ids = new Set<bigint>()
    for (const broker of cluster.brokers) {
      const client = await RawClient.connect(broker?.port ?? -1)
      try {
        for (let version = 0; version <= 5; version++) {
          const body = version >= 3 ? { transactionalId: null, producerId: 5n, producerEpoch: 3 } : {}
          const r = await rawCall<InitProducerIdResponse>(client, ApiKey.InitProducerId, version, {
            transactionalId: null,
            ...body,
          })
          assert.equal(r.errorCode, ErrorCode.NONE)
          assert.equal(r.producerEpoch, 0)
          ids.add(r.producerId)
        }
        const txn = await rawCall<InitProducerIdResponse>(client, ApiKey.InitProducerId, 4, {
          transactionalId: 'tx',
          transactionTimeoutMs: 60000,
        })
        // No FindCoordinator for a transactional id yet: no __transaction_state, no coordinator here.
        assert.equal(txn.errorCode, ErrorCode.NOT_COORDINATOR)
        const half = await rawCall<InitProducerIdResponse>(client, ApiKey.InitProducerId, 3, {
          transactionalId: null,
          producerId: 5n,
          producerEpoch: -1,
        })
        assert.equal(half.errorCode, ErrorCode.INVALID_REQUEST)
      } finally {
        client.close()
      }
    }
    assert.equal(ids.size, 18, 'every answer a new producer id')
  })

  it('kafkajs idempotent: lost responses and a stopped leader leave every record once, in order', async () => {
    const topic = 'idem-kafkajs'
    const partitions = 3
    await cluster.createTopic(topic, partitions)
    const kafka = new Kafka({
      clientId: 'idem-kafkajs',
      brokers: cluster.bootstrap.split(','),
      logLevel: logLevel.NOTHING,
      retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 1000 },
    })
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 5 })
    await producer.connect()
    const expected: string[][] = [[], [], []]
    const victim = cluster.leaderOf(topic, 0)
    cluster.dropEvery(4)
    try {
      for (let i = 0; i < 150; i++) {
        if (i === 50) await cluster.stopBroker(victim)
        if (i === 100) await cluster.startBroker(victim)
        // One partition per send: kafkajs 2.2.4 remembers which brokers answered across a
        // send's retries, so a partition whose leader moved to a broker that already answered
        // for another partition is never sent (a client bug, not a broker one).
        for (let p = 0; p < partitions; p++) {
          await producer.send({ topic, acks: -1, messages: [{ partition: p, value: `k-${i}-${p}` }] })
          expected[p].push(`k-${i}-${p}`)
        }
      }
    } finally {
      const dropped = cluster.stopDropping()
      await producer.disconnect()
      assert.ok(dropped >= 10, `only ${dropped} responses were lost`)
    }
    for (let p = 0; p < partitions; p++) {
      await waitUntil('high watermark at the log end', 10000, async () => {
        return (await cluster.values(topic, p)).length >= expected[p].length
      }).catch(() => undefined)
      const actual = await cluster.values(topic, p)
      assert.deepEqual(problems(actual, expected[p]), [], `${topic}-${p}: ${actual.slice(45, 56)}`)
    }
  })

  it('librdkafka enable.idempotence (5 in flight): lost responses and a stopped leader leave every record once, in order', async () => {
    const topic = 'idem-librdkafka'
    const partitions = 3
    await cluster.createTopic(topic, partitions)
    const victim = cluster.leaderOf(topic, 1)
    cluster.dropEvery(3)
    const producer = spawn(PYTHON, [join(repoRoot(), 'test', 'fault', 'producer.py')], {
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    let output = ''
    producer.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString()
    })
    const exited = new Promise<number | null>((resolve) => producer.on('exit', resolve))
    const spec = {
      bootstrap: cluster.bootstrap,
      topic,
      partitions,
      producer: 'r',
      rate: 300,
      config: {
        'enable.idempotence': true,
        acks: 'all',
        'max.in.flight.requests.per.connection': 5,
        'request.timeout.ms': 3000,
        'message.timeout.ms': 60000,
      },
    }
    producer.stdin.write(`${JSON.stringify(spec)}\n`)
    await sleep(2500)
    await cluster.stopBroker(victim)
    await sleep(2500)
    await cluster.startBroker(victim)
    await sleep(2500)
    // Responses stop being lost before the final flush: with only retries left, every third
    // Produce request can be the same partition's retry, lost each round until its records
    // time out (seen in CI: one partition starved for 60 s, the broker never at fault).
    const dropped = cluster.stopDropping()
    producer.stdin.end()
    assert.equal(await exited, 0)
    const lines = output
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map(
        (l) => JSON.parse(l) as { s?: number; p?: number; e?: string | null; done?: boolean; sent?: number },
      )
    const done = lines.find((l) => l.done)
    assert.ok(done && (done.sent ?? 0) > 1000, `sent ${done?.sent}`)
    const failed = lines.filter((l) => l.s !== undefined && l.e !== null)
    assert.deepEqual(failed.slice(0, 5), [], 'every record delivered')
    assert.ok(dropped >= 10, `only ${dropped} responses were lost`)
    for (let p = 0; p < partitions; p++) {
      const expected: string[] = []
      for (let seq = p; seq < (done?.sent ?? 0); seq += partitions) expected.push(`r-${seq}`)
      await waitUntil(
        'replicated',
        10000,
        async () => (await cluster.values(topic, p)).length >= expected.length,
      ).catch(() => undefined)
      assert.deepEqual(problems(await cluster.values(topic, p), expected), [], `${topic}-${p}`)
    }
  })
})

describe('producer id blocks', () => {
  it('brokers claiming blocks concurrently on one store never hand out the same id', async () => {
    const store = await EmbeddedStore.open({ clock: systemClock })
    try {
      const managers = [0, 1, 2].map(
        () => new ProducerIdManager({ store, logger: silentLogger, blockSize: 7 }),
      )
      const ids = await Promise.all(
        managers.flatMap((m) => Array.from({ length: 50 }, () => m.generateProducerId())),
      )
      assert.equal(new Set(ids).size, ids.length)
      assert.ok(ids.every((id) => id >= 0n && id < 7n * 30n))
    } finally {
      await store.close()
    }
  })
})

/**
 * tidelog's own Producer (acks=all, idempotent) and Consumer over the simulated network,
 * against simulated brokers, with per-seed delivery delays and connection resets: one
 * partition's leader is cut off from its followers (its ISR shrinks, acks=all writes wait),
 * the other partition's leader crashes and comes back.
 * Every acknowledged record must be read back once, at the offset its acknowledgement gave,
 * and no record may be in the log twice (the idempotent producer's retries are deduplicated).
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Consumer } from '../../src/client/consumer.js'
import { Producer } from '../../src/client/producer.js'
import { RealClientWorld } from './real-client-world.js'

const TOPIC = 'sim'
const PARTITIONS = 2
const SEND_INTERVAL_MS = 20
const SENDS = 600

interface Acked {
  readonly partition: number
  readonly offset: number
}

/** Sends `sends` records, one every SEND_INTERVAL_MS, alternating partitions; settles them all. */
function produceAll(
  world: RealClientWorld,
  producer: Producer,
  acked: Map<string, Acked>,
  failed: string[],
  sends = SENDS,
): Promise<void> {
  return new Promise((resolve) => {
    let sent = 0
    let settled = 0
    const sendNext = (): void => {
      const value = `v${sent}`
      const partition = sent % PARTITIONS
      sent++
      producer.produce({ topic: TOPIC, partition, value }, (error, metadata) => {
        if (error || !metadata) failed.push(`${value}: ${error?.message}`)
        else {
          assert.ok(!acked.has(value), `${value} acknowledged twice`)
          acked.set(value, { partition: metadata.partition, offset: metadata.offset })
        }
        if (++settled === sends) resolve()
      })
      if (sent < sends) world.scheduler.schedule(SEND_INTERVAL_MS, sendNext)
    }
    sendNext()
  })
}

/** Reads both partitions from offset 0 up to their current end; returns value -> places read. */
async function readAll(world: RealClientWorld): Promise<Map<string, Acked[]>> {
  const consumer = new Consumer({
    ...world.clientOptions(),
    requestTimeoutMs: 3000,
  })
  const tps = Array.from({ length: PARTITIONS }, (_, partition) => ({ topic: TOPIC, partition }))
  try {
    consumer.assign(tps.map((tp) => ({ ...tp, offset: 0 })))
    const ends = await world.until(consumer.endOffsets(tps))
    const read = new Map<string, Acked[]>()
    const done = (): boolean =>
      tps.every(
        (tp) =>
          (consumer.position(tp) ?? -1) >=
          (ends.get(`${tp.topic}/${tp.partition}`) ?? Number.POSITIVE_INFINITY),
      )
    while (!done()) {
      for (const record of await world.until(consumer.poll(500))) {
        const value = record.value?.toString() ?? ''
        const places = read.get(value) ?? []
        places.push({ partition: record.partition, offset: record.offset })
        read.set(value, places)
      }
    }
    return read
  } finally {
    await world.until(consumer.close())
  }
}

interface Run {
  readonly trace: string[]
  readonly acked: Map<string, Acked>
  readonly read: Map<string, Acked[]>
}

/** One run of seed `seed`: the faults below while the producer sends, then a full read. */
async function runOnce(seed: number): Promise<Run> {
  const world = new RealClientWorld(seed)
  try {
    await world.setup(TOPIC, PARTITIONS)
    const producer = new Producer({
      ...world.clientOptions(),
      acks: 'all',
      enableIdempotence: true,
      lingerMs: 5,
      requestTimeoutMs: 3000,
      deliveryTimeoutMs: 120_000,
      metadataMaxAgeMs: 5000,
    })
    const acked = new Map<string, Acked>()
    const failed: string[] = []
    const produced = produceAll(world, producer, acked, failed)

    // Per seed: delivery delays up to 5-80 ms and up to 1.5% of deliveries resetting their
    // connection, from a fork of the seed so the faults below stay at their draws.
    const draw = world.random.fork()
    world.network.faults = {
      delayMinMs: 1,
      delayMaxMs: draw.int(5, 80),
      resetProbability: draw.int(0, 3) / 200,
    }
    world.log(`network ${JSON.stringify(world.network.faults)}`)
    // p0's leader loses its followers for 4 s (longer than replica.lag.time.max.ms: its ISR
    // shrinks below min.insync.replicas), then p1's leader crashes and returns 4 s later.
    await world.runFor(draw.int(500, 3000))
    const cut = world.leaderOf(TOPIC, 0)!
    world.isolate(cut)
    await world.runFor(4000)
    world.healNetwork()
    await world.runFor(1000)
    const crashed = world.leaderOf(TOPIC, 1)!
    world.crash(crashed)
    await world.until(
      world.poll(() => ![null, crashed].includes(world.leaderOf(TOPIC, 1))),
      10_000,
    )
    world.log(`p1 led by broker ${world.leaderOf(TOPIC, 1)} after broker ${crashed} crashed`)
    await world.runFor(2000)
    world.restart(crashed)

    await world.until(produced, 180_000)
    await world.until(producer.close())
    const metrics = producer.metrics()
    world.log(
      `producer: ${acked.size} acknowledged, ${failed.length} failed, ${metrics.retries} batch retries`,
    )
    assert.deepEqual(failed, [], 'no send fails within its delivery timeout')
    assert.equal(acked.size, SENDS)
    // The faults must reach the producer, or the run proves nothing about its retries.
    assert.ok(metrics.retries > 0, `no batch was retried\n${world.trace.join('\n')}`)
    const read = await readAll(world)
    // SIM_TRACE=1: the run's trace (faults, broker warnings, the producer's counts).
    if (process.env.SIM_TRACE === '1') console.log(world.trace.join('\n'))
    return { trace: world.trace, acked, read }
  } finally {
    world.close()
  }
}

function checkReadBackOnce({ acked, read }: Run): void {
  for (const [value, place] of acked) {
    const places = read.get(value)
    assert.ok(places, `acknowledged ${value} (p${place.partition}@${place.offset}) not read back`)
    assert.deepEqual(
      places,
      [place],
      `${value}: read at ${JSON.stringify(places)}, acknowledged at p${place.partition}@${place.offset}`,
    )
  }
  for (const [value, places] of read)
    assert.equal(places.length, 1, `${value} in the log ${places.length} times: ${JSON.stringify(places)}`)
}

describe("tidelog's client over the simulated network", () => {
  it('seed 1: a cut leader and a crashed leader; every acknowledged record read back once; replays', async () => {
    const first = await runOnce(1)
    checkReadBackOnce(first)
    // The real client adds no nondeterminism: the same seed, the same run.
    const again = await runOnce(1)
    assert.deepEqual(again.trace, first.trace)
    assert.deepEqual([...again.acked], [...first.acked])
  })

  it('seed 2: a cut leader and a crashed leader; every acknowledged record read back once', async () => {
    checkReadBackOnce(await runOnce(2))
  })

  it('seed 26: an answer lost ahead of later ones closes the connection, the retry finds its batch', async () => {
    // Seed 26 loses the answer to p1's batch at sequence 257 while the answers behind it
    // arrive (the simulated network drops a reset connection's delivery before the reset
    // lands). A client matching answers by correlation id alone acknowledged the later
    // batches and retried 257 after six more had passed the broker's five-batch duplicate
    // window: OUT_OF_ORDER_SEQUENCE_NUMBER until its delivery timeout, for records that were
    // in the log. The client now closes a connection whose answers skip one, as Kafka's does.
    checkReadBackOnce(await runOnce(26))
  })

  it('acks=0: each send completes once its bytes are on the simulated network, and the records arrive', async () => {
    const world = new RealClientWorld(3)
    try {
      await world.setup(TOPIC, PARTITIONS)
      const producer = new Producer({
        ...world.clientOptions(),
        acks: 0,
        lingerMs: 5,
      })
      const acked = new Map<string, Acked>()
      const failed: string[] = []
      await world.until(produceAll(world, producer, acked, failed, 100), 30_000)
      assert.deepEqual(failed, [])
      assert.equal(acked.size, 100)
      // Completed means written, not appended: the last requests are still on their way, and
      // closing now would reset the connections under them (a simulated close is a reset).
      await world.runFor(1000)
      await world.until(producer.close())
      // No answer, so no offsets: the values must all be in the log, each once.
      const read = await readAll(world)
      assert.deepEqual([...read.keys()].sort(), [...acked.keys()].sort())
      for (const [value, places] of read)
        assert.equal(places.length, 1, `${value} read ${places.length} times`)
    } finally {
      world.close()
    }
  })
})

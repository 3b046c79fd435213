/**
 * The simulated network's stalled link (`SimNetwork.stallLink`), which makes the
 * transactional workload's late writes: bytes a client sends over it arrive once the stall
 * ends, in order, even after the client closed the connection; without a stall, closing
 * drops what is still in flight, as a reset does.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { ByteStream } from '../../src/common/network.js'
import { SimNetwork } from '../../src/sim/network.js'
import { SimRandom } from '../../src/sim/random.js'
import { SimScheduler } from '../../src/sim/scheduler.js'

const CLIENT = 400
const BROKER = 1

/** A broker listening on the network, and what it received (time, bytes) and when it saw the close. */
async function setup(): Promise<{
  scheduler: SimScheduler
  network: SimNetwork
  client: ByteStream
  received: [number, string][]
  serverClosedAtMs: () => number | null
}> {
  const scheduler = new SimScheduler()
  const network = new SimNetwork(scheduler, new SimRandom(1))
  const received: [number, string][] = []
  let closedAtMs: number | null = null
  await network
    .nodeNetwork(BROKER, () => true)
    .listen(SimNetwork.hostOf(BROKER), 9092, (stream) => {
      stream.onData((chunk) => received.push([scheduler.now, chunk.toString()]))
      stream.onClose(() => {
        closedAtMs = scheduler.now
      })
    })
  const connecting = network.transportFor(CLIENT, () => true).connect(SimNetwork.hostOf(BROKER), 9092)
  while (await scheduler.step()) {}
  return { scheduler, network, client: await connecting, received, serverClosedAtMs: () => closedAtMs }
}

async function runAll(scheduler: SimScheduler): Promise<void> {
  while (await scheduler.step()) {}
}

describe('simulated network: stalled links', () => {
  it('holds the bytes until the stall ends and delivers them in order after the client closed', async () => {
    const { scheduler, network, client, received, serverClosedAtMs } = await setup()
    const start = scheduler.now
    network.stallLink(CLIENT, BROKER, start + 1000)
    client.write([Buffer.from('a')])
    client.write([Buffer.from('b')])
    scheduler.schedule(500, () => client.destroy())
    await runAll(scheduler)
    assert.deepEqual(
      received.map(([, bytes]) => bytes),
      ['a', 'b'],
    )
    for (const [atMs] of received) assert.equal(atMs, start + 1000)
    assert.equal(serverClosedAtMs(), start + 1000, 'the server end closes after the held bytes')
  })

  it('without a stall, a client close drops what is in flight', async () => {
    const { scheduler, client, received, serverClosedAtMs } = await setup()
    client.write([Buffer.from('a')])
    client.destroy()
    await runAll(scheduler)
    assert.deepEqual(received, [])
    assert.notEqual(serverClosedAtMs(), null)
  })

  it('a stall ends: later bytes take the ordinary delay', async () => {
    const { scheduler, network, client, received } = await setup()
    const start = scheduler.now
    network.stallLink(CLIENT, BROKER, start + 100)
    scheduler.schedule(200, () => client.write([Buffer.from('late')]))
    await runAll(scheduler)
    assert.equal(received.length, 1)
    assert.ok(received[0][0] > start + 200 && received[0][0] <= start + 205, `arrived at ${received[0][0]}`)
  })
})

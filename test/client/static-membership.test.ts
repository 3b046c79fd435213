/**
 * Static membership (KIP-345) with tidelog's consumer: three members with a
 * groupInstanceId share six partitions; the group leader closes (a static member sends no
 * LeaveGroup, as Java) and a new consumer with the same groupInstanceId rejoins within the
 * session timeout. It gets its old partitions back without a rebalance: the two others see
 * no revocation and keep consuming.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Consumer, type ConsumerRecord } from '../../src/client/consumer.js'
import { Producer } from '../../src/client/producer.js'
import { assertConsumedOnce, consumedAll } from '../helpers/consumed.js'
import { waitUntil } from '../helpers/wait.js'
import { createTopics, text, withBroker } from './helpers.js'

const GROUP_PROPERTIES = { 'group.initial.rebalance.delay.ms': 0, 'offsets.topic.num.partitions': 3 }
const TOPIC = 'static-members'

class StaticMember {
  readonly consumer: Consumer
  readonly records: ConsumerRecord[] = []
  readonly revoked: number[][] = []
  private running: Promise<void> | null = null
  private stopping = false
  error: unknown = null

  constructor(
    bootstrap: string,
    readonly instance: string,
  ) {
    this.consumer = new Consumer({
      bootstrapServers: bootstrap,
      groupId: 'static-group',
      groupInstanceId: instance,
      sessionTimeoutMs: 10000,
      heartbeatIntervalMs: 200,
      autoOffsetReset: 'earliest',
      fetchMaxWaitMs: 100,
      autoCommitIntervalMs: 200,
      onPartitionsRevoked: (tps) => {
        this.revoked.push(tps.map((tp) => tp.partition))
      },
    })
    this.consumer.subscribe([TOPIC])
    this.running = this.pollLoop()
  }

  private async pollLoop(): Promise<void> {
    while (!this.stopping) {
      try {
        this.records.push(...(await this.consumer.poll(200)))
      } catch (error) {
        this.error = error
        return
      }
    }
  }

  partitions(): number[] {
    return this.consumer
      .assignment()
      .map((tp) => tp.partition)
      .sort((a, b) => a - b)
  }

  async close(): Promise<void> {
    this.stopping = true
    await this.running
    await this.consumer.close()
  }
}

const waitFor = waitUntil

async function produce(bootstrap: string, tag: string): Promise<string[]> {
  const producer = new Producer({ bootstrapServers: bootstrap, lingerMs: 0 })
  try {
    const values = Array.from({ length: 6 }, (_, p) => `${tag}-${p}`)
    await Promise.all(values.map((value, partition) => producer.send({ topic: TOPIC, partition, value })))
    return values
  } finally {
    await producer.close()
  }
}

test('tidelog client: a static leader that closes and rejoins gets its partitions back, the others see no revocation', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: TOPIC, partitions: 6 }])
      const first = await produce(bootstrap, 'first')
      // The returning member joins first: it leads the group (the case that rebalanced).
      const leaver = new StaticMember(bootstrap, 'returner')
      await waitFor('the first member owns all 6', 20000, () => leaver.partitions().length === 6)
      const stayers = [new StaticMember(bootstrap, 'stayer-a'), new StaticMember(bootstrap, 'stayer-b')]
      const all = [leaver, ...stayers]
      const values = (members: readonly StaticMember[]) =>
        members.flatMap((m) => m.records.map((r) => text(r.value) ?? ''))
      await waitFor('2 partitions each', 20000, () => all.every((m) => m.partitions().length === 2))
      await waitFor('first consumed', 20000, () => consumedAll(values(all), first))
      const revokedBefore = stayers.map((m) => m.revoked.length)
      const owned = leaver.partitions()
      await leaver.close()
      const returner = new StaticMember(bootstrap, 'returner')
      try {
        await waitFor('the returning member is assigned', 20000, () => returner.partitions().length > 0)
        assert.deepEqual(returner.partitions(), owned, 'its old partitions')
        const second = await produce(bootstrap, 'second')
        const after = [...stayers, returner]
        await waitFor('second consumed', 20000, () => consumedAll(values(after), second))
        // The tidelog client commits before it gives partitions up (the first rebalance, the
        // leaver's close), and the returner resumes at the leaver's commit: nothing is read twice.
        assertConsumedOnce(values([...all, returner]), [...first, ...second], 'static members')
        assert.deepEqual(
          stayers.map((m) => m.revoked.length),
          revokedBefore,
          `no revocation for the others: ${JSON.stringify(stayers.map((m) => m.revoked))}`,
        )
        for (const m of after) assert.equal(m.error, null, `${m.instance}: ${String(m.error)}`)
      } finally {
        await Promise.all([...stayers, returner].map((m) => m.close()))
      }
    },
    { port: 0, properties: GROUP_PROPERTIES },
  )
})

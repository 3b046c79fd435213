/**
 * The shape of a bad-input test beside Apache Kafka 4.4: one sequence of raw requests runs on
 * a tidelog broker and on a Kafka 4.4 node set up alike, each returning the lines it noted (the
 * error codes and messages of each step), and the two lists must be equal. Kafka's lines are
 * printed, so a difference reads against them.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Cluster } from '../../src/server/cluster.js'
import { startBroker } from './cluster.js'
import { type KafkaReference, type KafkaReferenceOptions, startKafkaReference } from './kafka-reference.js'

export interface BesideKafka {
  /** startBroker's options for the tidelog side. */
  readonly tidelog: Parameters<typeof startBroker>[0]
  /** The Kafka 4.4 node's options (one node). */
  readonly kafka: Omit<KafkaReferenceOptions, 'nodes'>
  /** Runs the steps against `bootstrap` and returns one line per outcome. */
  readonly sequence: (bootstrap: string) => Promise<string[]>
}

/** A describe block with the two runs and their comparison; `more` adds tests to it. */
export function describeBesideKafka(title: string, setup: BesideKafka, more?: () => void): void {
  const outcomes: { tidelog?: string[]; kafka?: string[] } = {}
  describe(title, () => {
    describe('tidelog', () => {
      let cluster: Cluster | undefined
      before(async () => {
        cluster = await startBroker(setup.tidelog)
      })
      after(async () => {
        await cluster?.stop()
      })
      it('answers each step', { timeout: 120_000 }, async () => {
        assert.ok(cluster)
        outcomes.tidelog = await setup.sequence(cluster.bootstrapServers)
      })
    })

    describe('Apache Kafka 4.4 (the reference)', () => {
      let kafka: KafkaReference | undefined
      before(async () => {
        kafka = await startKafkaReference({ ...setup.kafka, nodes: 1 })
      })
      after(async () => {
        await kafka?.stop()
      })
      it('answers each step', { timeout: 180_000 }, async () => {
        assert.ok(kafka)
        outcomes.kafka = await setup.sequence(kafka.bootstrap)
        console.log(outcomes.kafka.join('\n'))
      })
    })

    it('gives the same answers', () => {
      assert.ok(outcomes.tidelog && outcomes.kafka, 'both runs finished')
      assert.deepEqual(outcomes.tidelog, outcomes.kafka)
    })

    more?.()
  })
}

/**
 * The two brokers the differential harness compares: one tidelog broker in this process and
 * one Kafka 4.4 KRaft node (scripts/kafka-reference.sh), set up alike (topic auto-creation
 * off, 1 partition and RF 1 by default, small internal topics, no initial rebalance delay).
 */
import type { Cluster } from '../../src/server/cluster.js'
import { startBroker } from '../helpers/cluster.js'
import { type KafkaReference, startKafkaReference, TIDELOG_AS_REFERENCE } from '../helpers/kafka-reference.js'
import { Target } from './harness.js'

/** Settings both brokers run with. */
export const SHARED_PROPERTIES = {
  'auto.create.topics.enable': false,
  'num.partitions': 1,
  'default.replication.factor': 1,
  'offsets.topic.replication.factor': 1,
  'transaction.state.log.replication.factor': 1,
  'transaction.state.log.min.isr': 1,
} as const

export interface Brokers {
  readonly tidelog: Target
  readonly kafka: Target
  stop(): Promise<void>
}

export async function startBrokers(): Promise<Brokers> {
  let cluster: Cluster | undefined
  let reference: KafkaReference | undefined
  try {
    // Kafka's JVM takes 10-30 s on a loaded machine: start it while tidelog starts.
    const referenceStarted = startKafkaReference({ properties: SHARED_PROPERTIES })
    cluster = await startBroker({ properties: { ...TIDELOG_AS_REFERENCE, ...SHARED_PROPERTIES } }).catch(
      async (error: unknown) => {
        await referenceStarted.then((r) => r.stop()).catch(() => undefined)
        throw error
      },
    )
    reference = await referenceStarted
    const tidelog = new Target('tidelog', cluster.brokers[0].port)
    const kafka = new Target('kafka', Number(reference.bootstrap.split(',')[0].split(':')[1]))
    await Promise.all([tidelog.open(), kafka.open()])
    const started = { cluster, reference }
    return {
      tidelog,
      kafka,
      stop: async () => {
        tidelog.close()
        kafka.close()
        await Promise.all([started.cluster.stop(), started.reference.stop()])
      },
    }
  } catch (error) {
    await cluster?.stop()
    await reference?.stop()
    throw error
  }
}

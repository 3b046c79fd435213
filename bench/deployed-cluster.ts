/**
 * Three broker processes as each system is deployed, behind one interface so a bench runs
 * the same steps on both: tidelog as the README deploys it (three `tidelog broker` processes
 * on an etcd with its default limits, broker defaults apart from ports and log dirs), and
 * Apache Kafka 4.4 as three KRaft combined nodes (scripts/kafka-reference.sh) with Kafka's
 * own JVM settings. Node ids are 1..3 on both.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { type EtcdCluster, withEtcdCluster } from '../test/helpers/broker-process.js'
import { type KafkaReference, startKafkaReference } from '../test/helpers/kafka-reference.js'
import { KAFKA_JVM, kafkaNodePids } from './reference-kafka.js'

export type System = 'tidelog' | 'Kafka'

export interface DeployedCluster {
  readonly system: System
  readonly nodeIds: readonly number[]
  address(nodeId: number): string
  isRunning(nodeId: number): boolean
  /** The broker's process id while it runs, else null. */
  brokerPid(nodeId: number): number | null
  /** The system's processes that are not brokers (tidelog's etcd; none for KRaft combined nodes). */
  storePids(): number[]
  /** kill -9; resolves once the process is gone. */
  kill(nodeId: number): Promise<void>
  /** Starts a stopped broker again on its ports and data; resolves once it accepts connections. */
  start(nodeId: number): Promise<void>
  /** SIGTERM (a controlled shutdown); resolves once the process has exited. */
  terminate(nodeId: number): Promise<void>
  /** The broker session timeout the cluster runs with (a failover's lower bound). */
  readonly sessionTimeoutMs: number
}

/** Kafka's default broker.session.timeout.ms, and tidelog's (src/server/broker-config.ts). */
export const DEFAULT_SESSION_TIMEOUT_MS = 9000
const NODE_IDS = [1, 2, 3] as const
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

async function untilGone(pid: number): Promise<void> {
  while (isAlive(pid)) await sleep(10)
}

function tidelogCluster(cluster: EtcdCluster): DeployedCluster {
  return {
    system: 'tidelog',
    nodeIds: NODE_IDS,
    address: (id) => cluster.broker(id).address,
    isRunning: (id) => cluster.broker(id).isRunning,
    brokerPid: (id) => (cluster.broker(id).isRunning ? cluster.broker(id).current.pid : null),
    storePids: () => [cluster.etcd.pid],
    kill: (id) => cluster.broker(id).kill(),
    start: (id) => cluster.broker(id).start(600_000),
    terminate: async (id) => {
      // Not BrokerProcess.stop(): it sends SIGKILL after 10 s, which would cut the shutdown timed here.
      const run = cluster.broker(id).current
      run.signal('SIGTERM')
      await run.exited
    },
    sessionTimeoutMs: DEFAULT_SESSION_TIMEOUT_MS,
  }
}

/** Runs `body` on three `tidelog broker` processes on a fresh default etcd; always cleans up. */
export function withTidelogProcesses<T>(body: (cluster: DeployedCluster) => Promise<T>): Promise<T> {
  // The test helper's short session (3 s) set back to the default: this is the deployment.
  const properties = { 'broker.session.timeout.ms': DEFAULT_SESSION_TIMEOUT_MS }
  return withEtcdCluster({ brokers: 3, properties }, (cluster) => body(tidelogCluster(cluster)))
}

const root = join(fileURLToPath(import.meta.url), '..', '..', '..')
const kafkaScript = join(root, 'scripts', 'kafka-reference.sh')

function kafkaCluster(kafka: KafkaReference): DeployedCluster {
  const addresses = kafka.bootstrap.split(',')
  const pid = (id: number): number | null => kafkaNodePids(kafka, [id])[0] ?? null
  return {
    system: 'Kafka',
    nodeIds: NODE_IDS,
    address: (id) => addresses[id - 1],
    isRunning: (id) => pid(id) !== null && isAlive(pid(id)!),
    brokerPid: pid,
    storePids: () => [],
    kill: async (id) => {
      const running = pid(id)
      if (running === null) return
      process.kill(running, 'SIGKILL')
      await untilGone(running)
    },
    start: async (id) => {
      await promisify(execFile)(kafkaScript, ['start-node', kafka.dir, String(id)], { timeout: 600_000 })
    },
    terminate: async (id) => {
      const running = pid(id)
      if (running === null) return
      process.kill(running, 'SIGTERM')
      await untilGone(running)
    },
    sessionTimeoutMs: DEFAULT_SESSION_TIMEOUT_MS,
  }
}

/** Runs `body` on three Kafka 4.4 KRaft combined nodes with Kafka's JVM settings; always stops them. */
export async function withKafkaProcesses<T>(body: (cluster: DeployedCluster) => Promise<T>): Promise<T> {
  Object.assign(process.env, KAFKA_JVM)
  const kafka = await startKafkaReference({ nodes: 3 })
  try {
    return await body(kafkaCluster(kafka))
  } catch (error) {
    // Printed here: a failure of stop() below (removing 30,000 replica logs took over the
    // script's 60 s once) would otherwise be the only error reported.
    console.log(`Kafka: ${String(error).split('\n')[0]}`)
    throw error
  } finally {
    await kafka.stop()
  }
}

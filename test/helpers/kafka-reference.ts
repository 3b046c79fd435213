/**
 * Apache Kafka 4.4, the reference broker (issue 32), for tests: `startKafkaReference` runs
 * scripts/kafka-reference.sh (which fetches the jars once into .build/kafka-4.4.0, formats
 * KRaft storage and starts combined broker/controller nodes on free loopback ports with
 * temporary data), then waits until every node answers Metadata with all of them. `stop()`
 * kills the JVMs and removes the data; they are killed when the test process exits anyway.
 */
import { execFile } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { repoRoot } from './compat-clients.js'
import { rawCall } from './raw-call.js'
import { RawClient } from './raw-client.js'

export const KAFKA_REFERENCE_VERSION = '4.4.0'

/**
 * The settings a 3-broker tidelog test cluster takes to behave as the reference nodes do
 * (scripts/kafka-reference.sh): RF 3 by default, no initial rebalance delay, small
 * internal topics.
 */
export const TIDELOG_AS_REFERENCE = {
  'transaction.state.log.num.partitions': 5,
  'offsets.topic.num.partitions': 5,
  'group.initial.rebalance.delay.ms': 0,
  'default.replication.factor': 3,
  'num.partitions': 1,
} as const

export interface KafkaReference {
  /** `127.0.0.1:port,...`, one per node. */
  readonly bootstrap: string
  /** With `saslListener`: the SASL_PLAINTEXT (SCRAM-SHA-256/512) listeners, `127.0.0.1:port,...`. */
  readonly saslBootstrap?: string
  /** The temporary directory holding each node's config, data, log (node-N/server.log) and pid. */
  readonly dir: string
  stop(): Promise<void>
}

/** The folder of the cached jars: server/, clients/, streams/, connect/. */
export function kafkaReferenceCache(): string {
  return join(repoRoot(), '.build', `kafka-${KAFKA_REFERENCE_VERSION}`)
}

function script(): string {
  return join(repoRoot(), 'scripts', 'kafka-reference.sh')
}

function runScript(args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(script(), args, { timeout: timeoutMs, killSignal: 'SIGKILL' }, (error, stdout, stderr) => {
      if (error) reject(new Error(`kafka-reference.sh ${args.join(' ')} failed: ${stderr || error.message}`))
      else resolve(String(stdout))
    })
  })
}

/** Fetches the jars unless cached; returns the cache folder. */
export async function installKafkaReference(): Promise<string> {
  return (await runScript(['install'], 600_000)).trim()
}

/** Kills the nodes of `dir` at once (process exit: no time for a controlled shutdown). */
function killNodes(dir: string): void {
  if (!existsSync(dir)) return
  for (const entry of readdirSync(dir)) {
    const pidFile = join(dir, entry, 'pid')
    if (!entry.startsWith('node-') || !existsSync(pidFile)) continue
    try {
      process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 'SIGKILL')
    } catch {
      // Already gone.
    }
  }
}

interface MetadataAnswer {
  brokers: { nodeId: number }[]
}

/** Waits until every node answers Metadata v12 naming all `nodes` brokers. */
async function awaitAnswers(bootstrap: string, nodes: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (const address of bootstrap.split(',')) {
    const port = Number(address.split(':')[1])
    let last = ''
    for (;;) {
      let client: RawClient | null = null
      try {
        client = await RawClient.connect(port)
        const answer = await rawCall<MetadataAnswer>(client, 3, 12, { topics: [] })
        if (answer.brokers.length === nodes) break
        last = `${answer.brokers.length} brokers`
      } catch (error) {
        last = String(error)
      } finally {
        client?.socket.destroy()
      }
      if (Date.now() > deadline) throw new Error(`Kafka at ${address} did not answer in time: ${last}`)
      await sleep(200)
    }
  }
}

export interface KafkaReferenceOptions {
  /** Combined broker/controller nodes, default 1; new topics get RF min(nodes, 3). */
  readonly nodes?: number
  /** Extra server.properties of every node, by Kafka name. */
  readonly properties?: Readonly<Record<string, string | number | boolean>>
  /** Also a SASL_PLAINTEXT listener per node with SCRAM-SHA-256 and SCRAM-SHA-512 (no users). */
  readonly saslListener?: boolean
  /** Feature levels set when formatting, e.g. `{ 'transaction.version': 1 }`; default 4.4's latest. */
  readonly features?: Readonly<Record<string, number>>
}

/** Starts Kafka 4.4 nodes and waits until each answers Metadata naming all of them. */
export async function startKafkaReference(options: KafkaReferenceOptions = {}): Promise<KafkaReference> {
  const nodes = options.nodes ?? 1
  // The script stops the nodes itself if this process dies without stopping them (a test
  // runner's timeout kills it with a signal, and no 'exit' handler runs then).
  const args = ['start', '--nodes', String(nodes), '--owner-pid', String(process.pid)]
  for (const [key, value] of Object.entries(options.properties ?? {}))
    args.push('--property', `${key}=${value}`)
  for (const [name, level] of Object.entries(options.features ?? {}))
    args.push('--feature', `${name}=${level}`)
  if (options.saslListener) args.push('--sasl-listener')
  // The first start may fetch the jars (about 40 s); starting takes about 10 s on 2 cores.
  const out = (await runScript(args, 600_000)).trim().split('\n')
  const [bootstrap, dir] = out.slice(-2)
  if (!bootstrap || !dir) throw new Error(`kafka-reference.sh start printed ${JSON.stringify(out)}`)
  const onExit = (): void => killNodes(dir)
  process.on('exit', onExit)
  let stopped = false
  const stop = async (): Promise<void> => {
    if (stopped) return
    stopped = true
    // SIGKILL first: the data is thrown away, and a controlled shutdown of 3 nodes costs
    // 10-20 s of the test's time on 2 cores. The script then finds them gone and removes dir.
    killNodes(dir)
    try {
      await runScript(['stop', dir], 60_000)
    } finally {
      process.off('exit', onExit)
    }
  }
  try {
    await awaitAnswers(bootstrap, nodes, 60_000)
  } catch (error) {
    await stop()
    throw error
  }
  const saslBootstrap = options.saslListener
    ? readFileSync(join(dir, 'bootstrap-sasl'), 'utf8').trim()
    : undefined
  return { bootstrap, dir, stop, ...(saslBootstrap === undefined ? {} : { saslBootstrap }) }
}

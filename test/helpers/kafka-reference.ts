/**
 * Apache Kafka 4.4, the reference broker (issue 32), for tests: `startKafkaReference` runs
 * scripts/kafka-reference.sh (which fetches the jars once into .build/kafka-4.4.0, formats
 * KRaft storage and starts combined broker/controller nodes on free loopback ports with
 * temporary data), then waits until every node answers Metadata with all of them. `stop()`
 * kills the JVMs and removes the data; they are killed when the test process exits anyway.
 *
 * Under `npm test` (scripts/test.sh sets TIDELOG_KAFKA_REFERENCE_POOL), a start with
 * `shared: true` is served from a pool instead: the first file asking for those exact options
 * starts the cluster, later files are handed the same running one, and `stop()` only gives
 * it back; scripts/test.sh stops the pool's clusters when the files that use them are done.
 */
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
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

/**
 * The 3-node reference of the Streams and Connect files: streams groups' members heartbeat
 * every second (Kafka's default is 5 s, and its minimum too), so that tasks move in seconds.
 */
export const REFERENCE_STREAMS_HEARTBEAT = {
  'group.streams.heartbeat.interval.ms': 1000,
  'group.streams.min.heartbeat.interval.ms': 1000,
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

/** Runs the script; `tmpDir` is where `start` makes the nodes' state directory. */
function runScript(args: string[], timeoutMs: number, tmpDir?: string): Promise<string> {
  const env = tmpDir === undefined ? process.env : { ...process.env, TMPDIR: tmpDir }
  return new Promise((resolve, reject) => {
    execFile(script(), args, { timeout: timeoutMs, killSignal: 'SIGKILL', env }, (error, stdout, stderr) => {
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
  /**
   * The test may be handed a cluster other test files used before it, with the same options
   * (under `npm test` only; by hand a file still starts its own). Say so only of a test whose
   * topics, groups, users and subscriptions are named its own (a per-run prefix, or names no
   * other file uses), that lists nothing cluster-wide as if it were all its own, changes no
   * broker-wide or cluster-wide setting (broker configs, features, quotas of default
   * entities), and stops no node.
   */
  readonly shared?: boolean
}

/** The `start` arguments of scripts/kafka-reference.sh for `options`, owned by `ownerPid`. */
function startArgs(options: KafkaReferenceOptions, ownerPid: number): string[] {
  // The script stops the nodes itself once the owner is gone (a test runner's timeout kills
  // a test process with a signal, and no 'exit' handler runs then).
  const args = ['start', '--nodes', String(options.nodes ?? 1), '--owner-pid', String(ownerPid)]
  for (const [key, value] of Object.entries(options.properties ?? {}))
    args.push('--property', `${key}=${value}`)
  for (const [name, level] of Object.entries(options.features ?? {}))
    args.push('--feature', `${name}=${level}`)
  if (options.saslListener) args.push('--sasl-listener')
  return args
}

/** Runs `start`; returns the bootstrap servers and the state directory it printed. */
async function startNodes(
  options: KafkaReferenceOptions,
  ownerPid: number,
  tmpDir?: string,
): Promise<{ bootstrap: string; dir: string }> {
  // The first start may fetch the jars (about 40 s); starting takes about 10 s on 2 cores.
  const out = (await runScript(startArgs(options, ownerPid), 600_000, tmpDir)).trim().split('\n')
  const [bootstrap, dir] = out.slice(-2)
  if (!bootstrap || !dir) throw new Error(`kafka-reference.sh start printed ${JSON.stringify(out)}`)
  return { bootstrap, dir }
}

function saslBootstrapOf(options: KafkaReferenceOptions, dir: string): { saslBootstrap?: string } {
  if (!options.saslListener) return {}
  return { saslBootstrap: readFileSync(join(dir, 'bootstrap-sasl'), 'utf8').trim() }
}

/** Starts Kafka 4.4 nodes and waits until each answers Metadata naming all of them. */
export async function startKafkaReference(options: KafkaReferenceOptions = {}): Promise<KafkaReference> {
  const pool = process.env.TIDELOG_KAFKA_REFERENCE_POOL
  const poolOwner = Number(process.env.TIDELOG_KAFKA_REFERENCE_POOL_OWNER)
  if (options.shared && pool && Number.isInteger(poolOwner) && poolOwner > 0) {
    const pooled = await takeFromPool(pool, poolOwner, options)
    if (pooled) return pooled
  }
  return startOwn(options)
}

/** A cluster of this process's own, stopped by `stop()` or when the process exits. */
async function startOwn(options: KafkaReferenceOptions): Promise<KafkaReference> {
  const nodes = options.nodes ?? 1
  const { bootstrap, dir } = await startNodes(options, process.pid)
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
  return { bootstrap, dir, stop, ...saslBootstrapOf(options, dir) }
}

interface PoolEntry {
  readonly bootstrap: string
  readonly dir: string
}

/**
 * The pool's name for a set of options: the same options in any order give the same key.
 * Exported for the pool's own test (kafka-reference-pool.test.ts), as is takeFromPool.
 */
export function poolKey(options: KafkaReferenceOptions): string {
  const sorted = (record: Readonly<Record<string, unknown>> | undefined) =>
    Object.entries(record ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  const canonical = JSON.stringify({
    nodes: options.nodes ?? 1,
    properties: sorted(options.properties),
    features: sorted(options.features),
    saslListener: options.saslListener ?? false,
  })
  return createHash('sha256').update(canonical).digest('hex').slice(0, 16)
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/**
 * The pool's cluster for `options`, started (owned by the pool's owner, so that it outlives
 * this test process) unless running already; or null when another live process holds it,
 * or this one does already (a file asking for two clusters of the same options), and the
 * caller starts its own. A holder is written in POOL/KEY.lease: with test files run one at a
 * time nobody waits for it, and a lease left by a killed test process is taken over.
 */
export async function takeFromPool(
  pool: string,
  poolOwner: number,
  options: KafkaReferenceOptions,
): Promise<KafkaReference | null> {
  const key = poolKey(options)
  const leaseFile = join(pool, `${key}.lease`)
  const entryFile = join(pool, `${key}.json`)
  try {
    writeFileSync(leaseFile, String(process.pid), { flag: 'wx' })
  } catch {
    const holder = Number(readFileSync(leaseFile, 'utf8'))
    if (holder === process.pid || isAlive(holder)) return null
    writeFileSync(leaseFile, String(process.pid))
  }
  const release = (): void => {
    try {
      unlinkSync(leaseFile)
    } catch {
      // Given back already.
    }
  }
  process.on('exit', release)
  const nodes = options.nodes ?? 1
  try {
    let entry: PoolEntry | null = existsSync(entryFile)
      ? (JSON.parse(readFileSync(entryFile, 'utf8')) as PoolEntry)
      : null
    if (entry) {
      // A cluster an earlier file left unusable (a node died) is replaced, not handed on.
      const answering = await awaitAnswers(entry.bootstrap, nodes, 30_000).then(
        () => true,
        () => false,
      )
      if (!answering) {
        killNodes(entry.dir)
        await runScript(['stop', entry.dir], 60_000)
        unlinkSync(entryFile)
        entry = null
      }
    }
    if (!entry) {
      // The state directory is made inside the pool, where scripts/test.sh stops whatever
      // it finds: a start whose test process was killed before it could list it is stopped too.
      entry = await startNodes(options, poolOwner, pool)
      writeFileSync(entryFile, JSON.stringify(entry))
      await awaitAnswers(entry.bootstrap, nodes, 60_000)
    }
    const { bootstrap, dir } = entry
    const stop = async (): Promise<void> => {
      process.off('exit', release)
      release()
    }
    return { bootstrap, dir, stop, ...saslBootstrapOf(options, dir) }
  } catch (error) {
    process.off('exit', release)
    release()
    throw error
  }
}

/**
 * The `tidelog` command. Subcommands parse their own flags with node:util parseArgs (no
 * dependency needed for flag parsing) and return a process exit code.
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { systemClock } from '../common/clock.js'
import { TidelogError } from '../common/errors.js'
import { DirectoryLockedError } from '../common/file-system.js'
import { createLogger } from '../common/logger.js'
import type { MetadataStore, StoreLimits } from '../metadata/store/metadata-store.js'
import { startMemoryReclaimer } from '../runtime/memory-reclaimer.js'
import { nodeNetwork } from '../runtime/node-network.js'
import type { BrokerDependencies } from '../server/broker.js'
import {
  parseProperties,
  sessionTimeoutMsFromProperties,
  storeLimitsFromProperties,
} from '../server/broker-config.js'
import { type Cluster, startCluster, type WorkerCluster } from '../server/cluster.js'
import { addressInUse, defaultPortOrFree, joinNegativeValues } from './default-ports.js'
import { startHeapPolicy } from './heap-policy.js'

const USAGE = `Usage: tidelog <command> [options]

Commands:
  start     Start brokers in this process (default: one broker on 127.0.0.1:9092)
  broker    Start one broker from a Kafka-style server.properties file
  topics    create|list|describe|alter|delete topics
  produce   Send stdin lines as records (--key-separator, --header k=v)
  consume   Print records (--from-beginning, --offset, --timestamp, --group, --json, ...)
  cluster   describe: brokers, controller, partition health
  groups    list|describe|reset-offsets consumer groups (members, lag, offsets)
  transactions  list|describe transactional ids (state, producer, open partitions)
  acls      add|list|remove ACLs (kafka-acls.sh's options)
  quotas    describe|alter client quotas of users and client ids (byte rates, request %)
  features  describe|upgrade|downgrade|disable finalized feature levels (kafka-features.sh)
  bench     produce|consume|e2e load test with tidelog's client
  verify    Check a history file for lost, duplicated or reordered records (exit 1 if any)
  top       Live per-topic rates, under-replicated partitions and group lag
  schemas   list|get|register|check|config on a schema registry (default :8081)
  import-kafka-logdir  Adopt the topics of a stopped Kafka broker's log dir (docs/migration.md)
  help      Show this help

Client commands take --bootstrap-server HOST:PORT (default 127.0.0.1:9092),
--command-config FILE (Kafka client properties: security.protocol, sasl.*, ssl.*) and --json;
run 'tidelog <command> --help' for their options. Exit codes: 0 ok, 1 failed,
2 usage, 3 cluster unreachable, 4 not supported by the broker.

tidelog start options:
  --port N            First broker's port (default 9092, or free ports when 9092 is
                      taken; 0 picks free ports); broker i listens on N + i
  --host HOST         Listener host (default 127.0.0.1)
                      (--set listeners=PLAINTEXT://HOST:PORT sets both; a --port or
                      --host that contradicts it is refused)
  --data-dir DIR      Data directory (default ./.tidelog-data), locked while in use:
                      a second start on it exits with status 1
  --brokers N         Brokers in this process (default 1)
  --worker-threads    Each broker in a worker thread of its own (an event loop, and so
                      a core, per broker; needs --brokers 2 or more)
  --http-port N       HTTP listener for /metrics, /healthz, /readyz and the console
                      (default 9644, or a free port when 9644 is taken or with --port 0;
                      broker i uses N + i; 0 picks a free port; -1 turns it off)
  --schema-registry-port N
                      The schema registry (Confluent's API) at the root of its own
                      listener (default 8081, or a free port when 8081 is taken or with
                      --port 0; broker i uses N + i; -1 turns it off). It is also under
                      /schema-registry/ on the HTTP listener
  --set key=value     Any Kafka broker property, repeatable (e.g. --set num.partitions=3)
  --secure            SASL_SSL with SCRAM-SHA-512 for development: makes a CA, a broker
                      certificate and a user 'tidelog' in DATA-DIR/secure (openssl needed)
                      and prints the client properties (docs/security.md)
  SIGHUP (start and broker) reloads TLS key stores and trust stores from their files.

tidelog broker options:
  --config FILE       server.properties file
  --node-id N         This broker's node.id (same as --set node.id=N)
  --metadata URL      etcd://host:port[,host:port...] for a multi-process cluster
                      (default: an embedded store in the first log directory)
  --set key=value     Property overrides, repeatable

HTTP endpoints (set tidelog.http.listener=HOST:PORT; tidelog start sets it):
  /metrics            Prometheus text format: Kafka's broker metrics (under-replicated
                      partitions, ISR changes, bytes in/out, request times...), consumer
                      group lag, Node process metrics (docs/operations.md lists them)
  /healthz            200 while the process runs (liveness)
  /readyz             200 when registered with a live session, not fenced, every log
                      dir online and recovery done; 503 with the failed checks otherwise
  /                   The web console (read-only unless
                      tidelog.console.topic.admin.enable=true); its JSON API is /api/*
  /schema-registry/   Confluent Schema Registry's REST API (tidelog.schema.registry.enable)
  tidelog.request.log.slow.ms (default 1000, -1 off) logs slower requests at warn.
`

export async function runCli(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv
  try {
    switch (command) {
      case 'start':
      case 'broker':
        if (rest.some((arg) => arg === '--help' || arg === '-h')) {
          process.stdout.write(USAGE)
          return 0
        }
        startHeapPolicy()
        startMemoryReclaimer(systemClock)
        return command === 'start' ? await startCommand(rest) : await brokerCommand(rest)
      case 'topics':
      case 'produce':
      case 'consume':
      case 'cluster':
      case 'groups':
      case 'transactions':
      case 'acls':
      case 'quotas':
      case 'features':
      case 'bench':
      case 'verify':
      case 'top':
      case 'schemas':
      case 'import-kafka-logdir':
        return await clientCommand(command, rest)
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(USAGE)
        return command === undefined ? 1 : 0
      default:
        process.stderr.write(`tidelog: unknown command '${command}'\n\n${USAGE}`)
        return 2
    }
  } catch (error) {
    const taken = addressInUse(error)
    if (taken !== null) {
      process.stderr.write(
        `tidelog: ${taken.address}:${taken.port} is already in use (another broker?): choose another port\n`,
      )
      return 1
    }
    if (error instanceof DirectoryLockedError) {
      // Another broker has the data directory: Kafka's one line, and the status of a failed start.
      process.stderr.write(`tidelog: ${error.message}\n`)
      return 1
    }
    if (error instanceof TidelogError || (error instanceof TypeError && 'code' in error)) {
      process.stderr.write(`tidelog: ${error.message}\n`)
      return 2
    }
    throw error
  }
}

/** Client commands (and verify) load on demand, so `tidelog start` does not pay for them. */
async function clientCommand(command: string, args: readonly string[]): Promise<number> {
  switch (command) {
    case 'topics':
      return (await import('./commands/topics.js')).topicsCommand(args)
    case 'produce':
      return (await import('./commands/produce.js')).produceCommand(args)
    case 'consume':
      return (await import('./commands/consume.js')).consumeCommand(args)
    case 'cluster':
      return (await import('./commands/cluster.js')).clusterCommand(args)
    case 'groups':
      return (await import('./commands/groups.js')).groupsCommand(args)
    case 'transactions':
      return (await import('./commands/transactions.js')).transactionsCommand(args)
    case 'acls':
      return (await import('./commands/acls.js')).aclsCommand(args)
    case 'quotas':
      return (await import('./commands/quotas.js')).quotasCommand(args)
    case 'features':
      return (await import('./commands/features.js')).featuresCommand(args)
    case 'verify':
      return (await import('./commands/verify.js')).verifyCommand(args)
    case 'top':
      return (await import('./commands/top.js')).topCommand(args)
    case 'schemas':
      return (await import('./commands/schemas.js')).schemasCommand(args)
    case 'import-kafka-logdir':
      return (await import('./commands/import-kafka-logdir.js')).importKafkaLogDirCommand(args)
    default:
      return (await import('./commands/bench.js')).benchCommand(args)
  }
}

/** What `tidelog start` listens on unless told otherwise, when free (default-ports.ts). */
const DEFAULT_KAFKA_PORT = 9092
const DEFAULT_HTTP_PORT = 9644
/** Confluent Schema Registry's port, which its clients default to. */
const DEFAULT_SCHEMA_REGISTRY_PORT = 8081

function parseSetFlags(values: readonly string[] | undefined): Map<string, string> {
  const properties = new Map<string, string>()
  for (const item of values ?? []) {
    const eq = item.indexOf('=')
    if (eq <= 0) throw new TidelogError('ERR_USAGE', `--set expects key=value, got '${item}'`)
    properties.set(item.slice(0, eq).trim(), item.slice(eq + 1))
  }
  return properties
}

async function startCommand(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: joinNegativeValues(args, ['--http-port', '--schema-registry-port']),
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      'data-dir': { type: 'string', default: '.tidelog-data' },
      brokers: { type: 'string', default: '1' },
      'http-port': { type: 'string' },
      'schema-registry-port': { type: 'string' },
      set: { type: 'string', multiple: true },
      secure: { type: 'boolean', default: false },
      'worker-threads': { type: 'boolean', default: false },
    },
    strict: true,
  })
  const brokerCount = Number(values.brokers)
  if (!Number.isInteger(brokerCount) || brokerCount < 1)
    throw new TidelogError('ERR_USAGE', '--brokers must be >= 1')
  checkWorkerThreadsFlag(values['worker-threads'], brokerCount, values.secure)
  let port = values.port === undefined ? undefined : Number(values.port)
  if (port !== undefined && (!/^\d+$/.test(values.port!) || port > 65535))
    throw new TidelogError('ERR_USAGE', `--port expects 0..65535, got '${values.port}'`)
  // A --port or --host that contradicts --set listeners is refused by startCluster.
  const properties = parseSetFlags(values.set)
  const host = values.host ?? '127.0.0.1'
  // Kafka's port, when neither --port nor listeners chose it, is taken only if it is free.
  if (port === undefined && !properties.has('listeners') && !values.secure)
    port = await defaultPortOrFree(host, DEFAULT_KAFKA_PORT, brokerCount)
  // With --port 0 (tests, several instances) the HTTP port is picked freely as well.
  const httpPort =
    values['http-port'] !== undefined
      ? Number(values['http-port'])
      : port === 0
        ? 0
        : await defaultPortOrFree(host, DEFAULT_HTTP_PORT, brokerCount)
  if (!Number.isInteger(httpPort) || httpPort < -1 || httpPort > 65535)
    throw new TidelogError('ERR_USAGE', '--http-port out of range')
  if (httpPort >= 0 && !properties.has('tidelog.http.listener'))
    properties.set('tidelog.http.listener', `${host}:${httpPort}`)
  const registryPort =
    values['schema-registry-port'] !== undefined
      ? Number(values['schema-registry-port'])
      : port === 0
        ? 0
        : await defaultPortOrFree(host, DEFAULT_SCHEMA_REGISTRY_PORT, brokerCount)
  if (!Number.isInteger(registryPort) || registryPort < -1 || registryPort > 65535)
    throw new TidelogError('ERR_USAGE', '--schema-registry-port out of range')
  // --secure: the registry is HTTPS with the development certificate, and asks for the
  // user's password (basic auth against the SASL users).
  if (registryPort >= 0 && !properties.has('tidelog.schema.registry.listener'))
    properties.set(
      'tidelog.schema.registry.listener',
      `${values.secure ? 'https://' : ''}${host}:${registryPort}`,
    )
  const secure = values.secure ? await secureSetup(values['data-dir'], values.host, port, properties) : null
  const options = {
    brokers: brokerCount,
    ...(values.host !== undefined && !secure ? { host: values.host } : {}),
    ...(port !== undefined && !secure ? { port } : {}),
    dataDir: values['data-dir'],
    properties,
  }
  const cluster: Cluster | WorkerCluster = values['worker-threads']
    ? await startCluster({ ...options, workerThreads: true })
    : await startCluster(options)
  const brokers: readonly StartedBroker[] = cluster.brokers
  // Listening for signals before the banner: a SIGTERM right after it is a clean stop too.
  const untilStop = untilSignalOr(Promise.all(brokers.map((broker) => broker.whenStopped())))
  process.stdout.write(
    `tidelog started: ${cluster.brokers.length} broker(s), data in ${values['data-dir']}\n`,
  )
  process.stdout.write(`bootstrap servers: ${cluster.bootstrapServers}\n`)
  if (secure) {
    const { addDevUser, writeClientProperties } = await import('./secure-dev.js')
    await addDevUser(cluster as Cluster, secure)
    const { file, text } = await writeClientProperties(secure)
    process.stdout.write(`SASL_SSL with SCRAM-SHA-512; client properties (also in ${file}):\n${text}`)
  }
  printBrokerUrls(brokers)
  const stopReloading = reloadTlsOnHangup(brokers)
  const outcome = await untilStop
  stopReloading()
  if (outcome === 'stopped') return brokersStoppedThemselves()
  process.stdout.write('tidelog stopping\n')
  return stopWithinTimeout(cluster)
}

/** What `tidelog start` uses of a broker, in this thread (Broker) or in a worker thread (BrokerThread). */
interface StartedBroker {
  readonly nodeId: number
  readonly httpUrl: string | null
  readonly schemaRegistryUrl: string | null
  whenStopped(): Promise<void>
  reloadTls(): number | Promise<number>
}

function checkWorkerThreadsFlag(workerThreads: boolean, brokerCount: number, secure: boolean): void {
  if (workerThreads && brokerCount < 2)
    throw new TidelogError('ERR_USAGE', '--worker-threads needs --brokers 2 or more')
  // --secure adds its user through a Broker object, which a broker thread does not share.
  if (workerThreads && secure)
    throw new TidelogError('ERR_USAGE', '--worker-threads and --secure do not go together yet')
}

function printBrokerUrls(brokers: readonly StartedBroker[]): void {
  for (const broker of brokers)
    if (broker.httpUrl)
      process.stdout.write(`broker ${broker.nodeId} console and metrics: ${broker.httpUrl}\n`)
  for (const broker of brokers)
    if (broker.schemaRegistryUrl)
      process.stdout.write(`broker ${broker.nodeId} schema registry: ${broker.schemaRegistryUrl}\n`)
}

/** --secure: the development CA, certificate and user, as broker properties over any --set. */
async function secureSetup(
  dataDir: string,
  host: string | undefined,
  port: number | undefined,
  properties: Map<string, string>,
): Promise<import('./secure-dev.js').DevSecurity> {
  if (properties.has('listeners'))
    throw new TidelogError('ERR_USAGE', '--secure sets listeners: give --host and --port instead')
  const { devSecurity } = await import('./secure-dev.js')
  const security = await devSecurity(dataDir, host ?? '127.0.0.1')
  for (const [key, value] of security.brokerProperties(host ?? '127.0.0.1', port ?? 9092))
    if (!properties.has(key)) properties.set(key, value)
  return security
}

/** Every broker stopped on its own (a failed log dir, a violated invariant): exit 1, as Kafka halts. */
function brokersStoppedThemselves(): number {
  process.stderr.write('tidelog: the broker stopped itself (see its log); exiting\n')
  return 1
}

async function brokerCommand(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      config: { type: 'string' },
      'node-id': { type: 'string' },
      metadata: { type: 'string' },
      set: { type: 'string', multiple: true },
    },
    strict: true,
  })
  const properties = values.config
    ? parseProperties(readFileSync(values.config, 'utf8'))
    : new Map<string, string>()
  if (values['node-id'] !== undefined) {
    const nodeId = Number(values['node-id'])
    if (!Number.isInteger(nodeId) || nodeId < 0) throw new TidelogError('ERR_USAGE', '--node-id must be >= 0')
    properties.set('node.id', String(nodeId))
  }
  for (const [key, value] of parseSetFlags(values.set)) properties.set(key, value)
  const metadataStore = values.metadata
    ? await connectMetadataStore(
        values.metadata,
        storeLimitsFromProperties(properties),
        sessionTimeoutMsFromProperties(properties),
      )
    : undefined
  const cluster = await startCluster({
    brokers: 1,
    properties,
    ...(metadataStore ? { metadataStore } : {}),
    ...(await testFaultParts()),
  })
  const untilStop = untilSignalOr(cluster.brokers[0].whenStopped())
  process.stdout.write(
    `tidelog broker ${cluster.brokers[0].nodeId} listening on ${cluster.bootstrapServers}\n`,
  )
  if (cluster.brokers[0].httpUrl) process.stdout.write(`console and metrics: ${cluster.brokers[0].httpUrl}\n`)
  const stopReloading = reloadTlsOnHangup(cluster.brokers)
  const stoppedItself = (await untilStop) === 'stopped'
  stopReloading()
  const code = await stopWithinTimeout(cluster)
  await metadataStore?.close()
  return stoppedItself ? brokersStoppedThemselves() : code
}

/**
 * Test-only: the fault hook of test/netfault (power loss, clock jumps, slow and full disks),
 * loaded only when its environment variable names a control file; otherwise nothing.
 */
async function testFaultParts(): Promise<{ brokerParts?: Partial<BrokerDependencies> }> {
  if (!process.env.TIDELOG_TEST_FAULT_CONTROL) return {}
  const { processFaultParts } = await import('../testing/process-faults.js')
  return { brokerParts: processFaultParts(createLogger('test-faults')) }
}

/**
 * The clean shutdown after a signal, bounded by tidelog.shutdown.timeout.ms: past it, or on
 * a second signal, or if it fails, the process exits at once with status 1, saying why. A
 * supervisor's SIGKILL would come anyway; the logs recover at the next start as after a
 * crash (no clean-shutdown marker was written).
 */
async function stopWithinTimeout(cluster: Cluster | WorkerCluster): Promise<number> {
  const first = cluster.brokers[0]
  const timeoutMs =
    'config' in first
      ? (first.config.values.get('tidelog.shutdown.timeout.ms') as number)
      : first.shutdownTimeoutMs
  let timer: NodeJS.Timeout | undefined
  let onSignal: () => void = () => {}
  const forced = new Promise<string>((resolve) => {
    timer = setTimeout(
      () => resolve(`did not finish within tidelog.shutdown.timeout.ms=${timeoutMs}`),
      timeoutMs,
    )
    onSignal = () => resolve('was interrupted by a second signal')
    process.on('SIGINT', onSignal)
    process.on('SIGTERM', onSignal)
  })
  const stopped = cluster.stop().then(
    () => null,
    (error: unknown) => `failed: ${(error as Error)?.message ?? String(error)}`,
  )
  const problem = await Promise.race([stopped, forced])
  clearTimeout(timer)
  process.off('SIGINT', onSignal)
  process.off('SIGTERM', onSignal)
  if (problem === null) return 0
  process.stderr.write(`tidelog: the shutdown ${problem}; exiting now\n`)
  // Whatever the shutdown left running (sockets, timers, pending I/O) must not keep the process.
  process.exit(1)
}

/** etcd://host:port[,host:port...] → a connected etcd-backed metadata store. */
async function connectMetadataStore(
  url: string,
  limits: StoreLimits,
  sessionTimeoutMs: number,
): Promise<MetadataStore> {
  const match = /^etcd:\/\/(.+)$/.exec(url)
  if (!match)
    throw new TidelogError('ERR_USAGE', `--metadata expects etcd://host:port[,host:port], got '${url}'`)
  const endpoints = match[1].split(',').map((endpoint) => `http://${endpoint.trim()}`)
  // Loaded only when asked for: the etcd client (gRPC) is heavy for the embedded default.
  const { EtcdStore } = await import('../metadata/store/etcd-store.js')
  // Its own logger: a late keep-alive or a lost lease is logged where it happens.
  return EtcdStore.connect({
    endpoints,
    limits,
    network: nodeNetwork,
    logger: createLogger('metadata-store'),
    // A watch etcd left behind is found within about a session, as a lost session is.
    watchProbeIntervalMs: Math.max(1, Math.round(sessionTimeoutMs / 3)),
  })
}

/** SIGHUP reloads every TLS key store and trust store (renewed certificates); returns the unsubscribe. */
function reloadTlsOnHangup(brokers: readonly { reloadTls(): number | Promise<number> }[]): () => void {
  const onHangup = async (): Promise<void> => {
    try {
      // A broker thread reloads in its own thread: its count comes back as a promise.
      const counts = await Promise.all(brokers.map((broker) => broker.reloadTls()))
      const reloaded = counts.reduce((n, count) => n + count, 0)
      process.stderr.write(`tidelog: reloaded ${reloaded} TLS key/trust store set(s)\n`)
    } catch (error) {
      process.stderr.write(
        `tidelog: TLS reload failed, keeping the current certificates: ${(error as Error).message}\n`,
      )
    }
  }
  process.on('SIGHUP', onHangup)
  return () => process.off('SIGHUP', onHangup)
}

/** SIGINT/SIGTERM, or `stopped` settling first. */
function untilSignalOr(stopped: Promise<unknown>): Promise<'signal' | 'stopped'> {
  return new Promise((resolve) => {
    const settle = (outcome: 'signal' | 'stopped'): void => {
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
      resolve(outcome)
    }
    const onSignal = (): void => settle('signal')
    process.on('SIGINT', onSignal)
    process.on('SIGTERM', onSignal)
    stopped.then(() => settle('stopped'))
  })
}

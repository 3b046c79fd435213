/**
 * Test helpers for clusters of broker processes: `tidelog broker` processes on a private
 * etcd, each on a free loopback port with a temporary log directory, their output captured
 * (pino JSON lines) so tests can wait for and assert on what they log. Everything a helper
 * starts is stopped and removed by its `stop()`/`close()`, also when a test fails. Their
 * error-level lines go to the log guard (log-guard.ts): unexpected ones fail the test.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { connect, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { repoRoot } from './compat-clients.js'
import { type EtcdProcess, startEtcd } from './etcd.js'
import { recordErrorLine } from './log-guard.js'
import { kcatMetadata } from './metadata-view.js'
import { waitForValue } from './wait.js'

/** A port the OS handed out just now (the broker binds it right after). */
export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  if (address === null || typeof address === 'string') throw new Error('no port')
  return address.port
}

/**
 * Polls `probe` until it returns a value other than undefined (wait.ts's waitForValue): at
 * the deadline the error names `what` and carries the probe's last error.
 */
export function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
  intervalMs = 50,
): Promise<T> {
  return waitForValue(what, timeoutMs, probe, intervalMs)
}

/** True when something accepts TCP connections on host:port. */
export function accepts(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port })
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

/** A JSON log line of a broker process (pino), or the raw text when it is not JSON. */
export interface LogLine {
  readonly level?: number
  readonly time?: number
  readonly msg?: string
  readonly [key: string]: unknown
}

const EXIT_WAIT_MS = 10000

/** One spawned process with its output kept as lines. */
export class ChildOutput {
  readonly lines: string[] = []
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  private waiters: (() => void)[] = []
  private partial = { stdout: '', stderr: '' }

  /** `label` names the process in the log guard's report; unlabelled output is not guarded. */
  constructor(
    readonly child: ChildProcess,
    readonly label: string | null = null,
  ) {
    for (const stream of ['stdout', 'stderr'] as const) {
      child[stream]?.setEncoding('utf8').on('data', (chunk: string) => this.onData(stream, chunk))
    }
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.wake()
        resolve({ code, signal })
      }),
    )
  }

  get pid(): number {
    return this.child.pid ?? -1
  }

  get isRunning(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  private onData(stream: 'stdout' | 'stderr', chunk: string): void {
    const text = this.partial[stream] + chunk
    const parts = text.split('\n')
    this.partial[stream] = parts.pop() ?? ''
    for (const line of parts) {
      if (line.trim() === '') continue
      this.lines.push(line)
      if (this.label !== null) recordErrorLine(`${this.label} (pid ${this.pid})`, line)
    }
    this.wake()
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter()
  }

  /** Parsed JSON lines (pino logs); other lines are skipped. */
  logs(): LogLine[] {
    const parsed: LogLine[] = []
    for (const line of this.lines) {
      if (!line.startsWith('{')) continue
      try {
        parsed.push(JSON.parse(line) as LogLine)
      } catch {
        // A line cut by a kill: not a log record to look at.
      }
    }
    return parsed
  }

  /** Waits for a line matching `pattern` after the first `from` lines; returns it and its index. */
  async waitForLine(pattern: RegExp, timeoutMs: number, from = 0): Promise<{ line: string; index: number }> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      for (let i = from; i < this.lines.length; i++) {
        if (pattern.test(this.lines[i])) return { line: this.lines[i], index: i }
      }
      if (!this.isRunning) throw new Error(`process exited before printing ${pattern}:\n${this.tail()}`)
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`timed out waiting for ${pattern}:\n${this.tail()}`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
  }

  tail(lines = 30): string {
    return this.lines.slice(-lines).join('\n')
  }

  /** Sends `signal` if the process still runs. */
  signal(signal: NodeJS.Signals): void {
    if (this.isRunning) this.child.kill(signal)
  }

  /** SIGCONT (in case it is stopped), SIGTERM, then SIGKILL after `graceMs`; resolves on exit. */
  async terminate(graceMs = EXIT_WAIT_MS) {
    if (this.isRunning) {
      this.child.kill('SIGCONT')
      this.child.kill('SIGTERM')
      const timer = setTimeout(() => this.signal('SIGKILL'), graceMs)
      const result = await this.exited
      clearTimeout(timer)
      return result
    }
    return this.exited
  }
}

/** The path of bin/tidelog.js (it loads dist/: run `npm run build` first). */
export function tidelogBin(): string {
  return join(repoRoot(), 'bin', 'tidelog.js')
}

/**
 * The environment bin/tidelog.js's launcher lines (its first two, a shell command) give node
 * when `env` is the environment it runs in: read from those lines, so that a process started
 * as `node FLAGS bin/tidelog.js`, which skips them, gets the same malloc settings.
 * test/cli/launcher.test.ts checks that the lines set what this reads.
 */
export function launcherEnv(
  env: Readonly<Record<string, string | undefined>>,
  bin = tidelogBin(),
): Record<string, string> {
  if (env.TIDELOG_MALLOC_DEFAULTS === '0') return {}
  const launcher = readFileSync(bin, 'utf8').split('\n', 2)[1] ?? ''
  const settings: Record<string, string> = {}
  for (const [, name, value] of launcher.matchAll(/(\w+)="\$\{\1-([^}]*)\}"/g))
    settings[name] = env[name] ?? value
  // jemalloc's settings go with its preload only: the first of the launcher's paths present.
  const jemalloc = env.LD_PRELOAD
    ? undefined
    : /for j in ([^;]*);/
        .exec(launcher)?.[1]
        .split(' ')
        .find((path) => existsSync(path))
  if (jemalloc === undefined) delete settings.MALLOC_CONF
  else settings.LD_PRELOAD = jemalloc
  // V8's young generation: the launcher's flag goes before the operator's NODE_OPTIONS unless
  // those set it already.
  const youngGeneration = /NODE_OPTIONS="(--max-semi-space-size=\d+) \$NODE_OPTIONS"/.exec(launcher)?.[1]
  if (youngGeneration !== undefined && !(env.NODE_OPTIONS ?? '').includes('--max-semi-space-size'))
    settings.NODE_OPTIONS = env.NODE_OPTIONS ? `${youngGeneration} ${env.NODE_OPTIONS}` : youngGeneration
  return settings
}

/** The jemalloc bin/tidelog.js preloads on this machine (none: node runs on glibc's malloc). */
export function launcherJemalloc(): string | undefined {
  return launcherEnv({}).LD_PRELOAD
}

/**
 * How to start bin/tidelog.js as `npx tidelog` does: the file itself, whose first lines exec
 * the `node` on PATH (this process's, put first) with glibc's malloc settings. With
 * `nodeFlags` node runs the file instead, and gets the launcher's settings from here. Returns
 * the command line and the environment, `env` with those added. `bin`: another copy's.
 */
export function tidelogLaunch(
  nodeFlags: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  bin = tidelogBin(),
): { argv: string[]; env: Record<string, string | undefined> } {
  if (nodeFlags.length > 0)
    return { argv: [process.execPath, ...nodeFlags, bin], env: { ...env, ...launcherEnv(env, bin) } }
  return {
    argv: [bin],
    env: { ...env, PATH: `${dirname(process.execPath)}${delimiter}${env.PATH ?? ''}` },
  }
}

/**
 * Spawns bin/tidelog.js with `args` (tidelogLaunch), with info-level logs captured; its
 * error-level lines go to the log guard under `label` (a broker's). `prefix` runs it through
 * another command that execs it (e.g. `ip netns exec NS`), so the child's pid is still node's.
 * Node flags for the child (e.g. `--cpu-prof --cpu-prof-dir=DIR`) come from
 * TIDELOG_BROKER_NODE_FLAGS and `nodeArgs`; environment for the brokers alone (e.g.
 * `TIDELOG_MALLOC_DEFAULTS=0`, to compare) from TIDELOG_BROKER_ENV, space-separated NAME=VALUE.
 */
export function spawnTidelog(
  args: readonly string[],
  env: Record<string, string> = {},
  label = `tidelog ${args[0] ?? ''}`.trim(),
  prefix: readonly string[] = [],
  nodeArgs: readonly string[] = [],
): ChildOutput {
  // Benchmarks profile the brokers with node flags (--cpu-prof is refused in NODE_OPTIONS).
  const nodeFlags = [...(process.env.TIDELOG_BROKER_NODE_FLAGS ?? '').split(' ').filter(Boolean), ...nodeArgs]
  const brokerEnv = Object.fromEntries(
    (process.env.TIDELOG_BROKER_ENV ?? '')
      .split(' ')
      .filter(Boolean)
      .map((setting) => [setting.slice(0, setting.indexOf('=')), setting.slice(setting.indexOf('=') + 1)]),
  )
  const launch = tidelogLaunch(nodeFlags, { ...process.env, TIDELOG_LOG_LEVEL: 'info', ...brokerEnv, ...env })
  const [command, ...rest] = [...prefix, ...launch.argv, ...args]
  const child = spawn(command, rest, { stdio: ['ignore', 'pipe', 'pipe'], env: launch.env })
  return new ChildOutput(child, label)
}

export interface BrokerProcessSpec {
  readonly nodeId: number
  readonly port: number
  readonly logDir: string
  readonly etcdEndpoint: string
  readonly properties: Readonly<Record<string, string | number | boolean>>
  /** Address of the listener (default 127.0.0.1). */
  readonly host?: string
  /** Command prefix that execs the broker, e.g. `['ip', 'netns', 'exec', 'ns1']`. */
  readonly command?: readonly string[]
  /** Environment over the test's own (test-only hooks, e.g. TIDELOG_TEST_FAULT_CONTROL). */
  readonly env?: Readonly<Record<string, string>>
}

/** One `tidelog broker --metadata etcd://...` process; restartable on the same port and log dir. */
export class BrokerProcess {
  private output: ChildOutput | null = null
  /** Output of every run of this broker, oldest first. */
  readonly runs: ChildOutput[] = []

  constructor(readonly spec: BrokerProcessSpec) {}

  get nodeId(): number {
    return this.spec.nodeId
  }

  get address(): string {
    return `${this.spec.host ?? '127.0.0.1'}:${this.spec.port}`
  }

  get current(): ChildOutput {
    if (this.output === null) throw new Error(`broker ${this.nodeId} was never started`)
    return this.output
  }

  get isRunning(): boolean {
    return this.output?.isRunning === true
  }

  /** Spawns the process and waits until it has registered and accepts connections. */
  async start(timeoutMs = 20000): Promise<void> {
    if (this.isRunning) throw new Error(`broker ${this.nodeId} is already running`)
    const metadata = this.spec.etcdEndpoint.replace(/^http:\/\//, 'etcd://')
    const properties: Record<string, string | number | boolean> = {
      'node.id': this.nodeId,
      listeners: `PLAINTEXT://${this.address}`,
      'log.dirs': this.spec.logDir,
      ...this.spec.properties,
    }
    const args = ['broker', '--metadata', metadata]
    for (const [key, value] of Object.entries(properties)) args.push('--set', `${key}=${value}`)
    this.output = spawnTidelog(args, { ...this.spec.env }, `broker ${this.nodeId}`, this.spec.command)
    this.runs.push(this.output)
    await this.output.waitForLine(/listening on/, timeoutMs)
    await waitFor(
      `broker ${this.nodeId} accepting connections`,
      async () => ((await accepts(this.spec.port, this.spec.host)) ? true : undefined),
      timeoutMs,
    )
  }

  /** kill -9: no controlled shutdown, the registration stays until its lease expires. */
  async kill(): Promise<void> {
    if (!this.output?.isRunning) return
    this.output.signal('SIGKILL')
    await this.output.exited
  }

  /** Stops the process (SIGTERM: controlled shutdown) and returns its exit code. */
  async stop(): Promise<number | null> {
    if (!this.output) return null
    const { code } = await this.output.terminate()
    return code
  }

  /** Every log line of every run of this broker. */
  logs(): LogLine[] {
    return this.runs.flatMap((run) => run.logs())
  }
}

export interface EtcdClusterOptions {
  readonly brokers: number
  /** Broker properties every process gets (node.id, listeners and log.dirs are set per broker). */
  readonly properties?: Readonly<Record<string, string | number | boolean>>
  /** Properties of one broker over the shared ones (a rack each, say). */
  readonly brokerProperties?: (nodeId: number) => Readonly<Record<string, string | number | boolean>>
}

/** Kept short so failovers are quick; every test cluster uses it. */
export const SESSION_TIMEOUT_MS = 3000

/** A private etcd and N `tidelog broker` processes on it. */
export class EtcdCluster {
  private constructor(
    readonly etcd: EtcdProcess,
    readonly brokers: readonly BrokerProcess[],
    private readonly rootDir: string,
  ) {}

  static async start(options: EtcdClusterOptions): Promise<EtcdCluster> {
    const rootDir = await mkdtemp(join(tmpdir(), 'tidelog-cluster-'))
    let etcd: EtcdProcess | null = null
    const brokers: BrokerProcess[] = []
    try {
      etcd = await startEtcd()
      for (let nodeId = 1; nodeId <= options.brokers; nodeId++) {
        brokers.push(
          new BrokerProcess({
            nodeId,
            port: await freePort(),
            logDir: join(rootDir, `broker-${nodeId}`),
            etcdEndpoint: etcd.endpoint,
            properties: {
              'broker.session.timeout.ms': SESSION_TIMEOUT_MS,
              'default.replication.factor': Math.min(3, options.brokers),
              ...options.properties,
              ...options.brokerProperties?.(nodeId),
            },
          }),
        )
      }
      await Promise.all(brokers.map((broker) => broker.start()))
      const cluster = new EtcdCluster(etcd, brokers, rootDir)
      await cluster.waitForBrokers(
        brokers.map((b) => b.nodeId),
        15000,
      )
      return cluster
    } catch (error) {
      await Promise.all(brokers.map((broker) => broker.kill()))
      await etcd?.stop()
      await rm(rootDir, { recursive: true, force: true })
      throw error
    }
  }

  broker(nodeId: number): BrokerProcess {
    const broker = this.brokers.find((b) => b.nodeId === nodeId)
    if (!broker) throw new Error(`no broker ${nodeId}`)
    return broker
  }

  /** Bootstrap list of the brokers whose processes run now. */
  get liveBootstrap(): string {
    return this.brokers
      .filter((b) => b.isRunning)
      .map((b) => b.address)
      .join(',')
  }

  /** Waits until kcat's metadata lists exactly `nodeIds` as the cluster's brokers. */
  async waitForBrokers(nodeIds: readonly number[], timeoutMs: number): Promise<void> {
    const wanted = [...nodeIds].sort((a, b) => a - b).join(',')
    await waitFor(
      `brokers ${wanted} in the metadata`,
      async () => {
        const view = await kcatMetadata(this.liveBootstrap)
        return view.brokers.join(',') === wanted ? true : undefined
      },
      timeoutMs,
      100,
    )
  }

  /** Error and fatal log lines (pino level >= 50) of every run of every broker, except `allowed`. */
  errorLogs(allowed: readonly RegExp[] = []): (LogLine & { broker: number })[] {
    return this.brokers.flatMap((b) =>
      b
        .logs()
        .filter((l) => (l.level ?? 0) >= 50 && !allowed.some((re) => re.test(String(l.msg))))
        .map((l) => ({ ...l, broker: b.nodeId })),
    )
  }

  /** Kills every broker and etcd, and removes every directory. */
  async close(): Promise<void> {
    await Promise.all(this.brokers.map((broker) => broker.kill()))
    await this.etcd.stop()
    await rm(this.rootDir, { recursive: true, force: true })
  }
}

/** Runs `fn` on a fresh etcd cluster and always cleans it up. */
export async function withEtcdCluster<T>(
  options: EtcdClusterOptions,
  fn: (cluster: EtcdCluster) => Promise<T>,
): Promise<T> {
  const cluster = await EtcdCluster.start(options)
  try {
    return await fn(cluster)
  } finally {
    await cluster.close()
  }
}

/**
 * Test helper: a private etcd (Debian's `etcd-server`) on free loopback ports with a
 * temporary data directory, so etcd tests never share state with each other or a real cluster.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

export interface EtcdProcess {
  /** `http://127.0.0.1:<client port>` */
  readonly endpoint: string
  /** Stops etcd (SIGTERM) and removes its data directory. */
  stop(): Promise<void>
  /** SIGKILL without cleanup of the data directory: for "store went away" tests. */
  kill(): void
  /** SIGKILL, then etcd again on the same ports and data directory (its leases renewed). */
  restart(): Promise<void>
  /** Sends a signal (SIGSTOP/SIGCONT freeze and thaw etcd: "store unreachable" tests). */
  signal(signal: NodeJS.Signals): void
  /** The running etcd's process id (the benchmarks count its CPU and memory). */
  readonly pid: number
}

/** Where etcd runs: by default on loopback in this process's network namespace. */
export interface EtcdOptions {
  /** Address etcd listens on and advertises (default 127.0.0.1). */
  readonly host?: string
  /** Command prefix, e.g. `['ip', 'netns', 'exec', 'ns1']` to start etcd in a network namespace. */
  readonly command?: readonly string[]
}

const START_ATTEMPTS_MAX = 3
const READY_TIMEOUT_MS = 15000
const READY_POLL_MS = 50

/** Starts etcd; retries on fresh ports when another process grabbed one between probe and bind. */
export async function startEtcd(options: EtcdOptions = {}): Promise<EtcdProcess> {
  const binary = process.env['TIDELOG_ETCD_BIN'] ?? 'etcd'
  let lastError: unknown
  for (let attempt = 1; attempt <= START_ATTEMPTS_MAX; attempt++) {
    const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-etcd-'))
    try {
      return await startOnce(binary, dataDir, options)
    } catch (err) {
      lastError = err
      await rm(dataDir, { recursive: true, force: true })
    }
  }
  throw new Error(`etcd did not start after ${START_ATTEMPTS_MAX} attempts`, { cause: lastError })
}

async function startOnce(binary: string, dataDir: string, options: EtcdOptions): Promise<EtcdProcess> {
  // Ports free here are free in a fresh namespace too (it has no listeners at all).
  const [clientPort, peerPort] = await freePorts(2)
  const host = options.host ?? '127.0.0.1'
  const endpoint = `http://${host}:${clientPort}`
  const peerUrl = `http://${host}:${peerPort}`
  const [command, ...prefix] = [...(options.command ?? []), binary]
  const args = [
    ...prefix,
    '--name=tidelog-test',
    `--data-dir=${dataDir}`,
    `--listen-client-urls=${endpoint}`,
    `--advertise-client-urls=${endpoint}`,
    `--listen-peer-urls=${peerUrl}`,
    `--initial-advertise-peer-urls=${peerUrl}`,
    `--initial-cluster=tidelog-test=${peerUrl}`,
    '--logger=zap',
    '--log-level=error',
  ]
  let current = await spawnHealthy(command, args, endpoint)
  return {
    endpoint,
    stop: () => stopEtcd(current.child, current.exited, dataDir),
    kill: () => {
      current.child.kill('SIGKILL')
    },
    async restart() {
      current.child.kill('SIGKILL')
      await current.exited
      current = await spawnHealthy(command, args, endpoint)
    },
    signal: (signal) => {
      if (current.child.exitCode === null && current.child.signalCode === null) current.child.kill(signal)
    },
    get pid() {
      return current.child.pid ?? -1
    },
  }
}

interface Spawned {
  readonly child: ChildProcess
  readonly exited: Promise<number | null>
}

async function spawnHealthy(command: string, args: readonly string[], endpoint: string): Promise<Spawned> {
  const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] })
  const stderr: string[] = []
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    if (stderr.length < 100) stderr.push(chunk)
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  try {
    await waitUntilHealthy(endpoint, exited)
  } catch (err) {
    child.kill('SIGKILL')
    await exited
    throw new Error(`etcd failed to start: ${stderr.join('').slice(-2000)}`, { cause: err })
  }
  return { child, exited }
}

async function stopEtcd(child: ChildProcess, exited: Promise<number | null>, dataDir: string): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGCONT') // a frozen etcd would not act on SIGTERM
    child.kill('SIGTERM')
  }
  await exited
  await rm(dataDir, { recursive: true, force: true })
}

async function waitUntilHealthy(endpoint: string, exited: Promise<number | null>): Promise<void> {
  let hasExited = false
  // The exit promise never rejects; this only records that etcd is gone.
  void exited.then(() => {
    hasExited = true
  })
  const deadline = Date.now() + READY_TIMEOUT_MS
  while (Date.now() < deadline) {
    if (hasExited) throw new Error('etcd exited before becoming healthy')
    if (await isHealthy(endpoint)) return
    await sleep(READY_POLL_MS)
  }
  throw new Error(`etcd at ${endpoint} not healthy after ${READY_TIMEOUT_MS} ms`)
}

async function isHealthy(endpoint: string): Promise<boolean> {
  try {
    const response = await fetch(`${endpoint}/health`, { signal: AbortSignal.timeout(1000) })
    const body = (await response.json()) as { health?: string }
    return body.health === 'true'
  } catch {
    // Connection refused or a half-started server: not healthy yet, keep polling.
    return false
  }
}

/** Ports the OS handed out just now; the caller binds them right away. */
async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: count }, async () => {
      const server = createServer()
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject)
        server.listen(0, '127.0.0.1', resolve)
      })
      return server
    }),
  )
  const ports = servers.map((server) => {
    const address = server.address()
    if (address === null || typeof address === 'string') throw new Error('no port')
    return address.port
  })
  await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))))
  return ports
}

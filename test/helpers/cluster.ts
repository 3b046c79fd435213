/**
 * Test helpers: start an in-process broker on a free loopback port with a temporary data
 * directory, and always clean up. Tests start in-process brokers through `startBroker` and
 * `startCluster` here, not src/index.ts's: these give the brokers the log guard's logger, so
 * an unexpected error-level line fails the test (log-guard.ts).
 */
import { execFile } from 'node:child_process'
import {
  type Cluster,
  type StartClusterOptions,
  startCluster as startClusterUnguarded,
} from '../../src/server/cluster.js'
import { guardedLogger } from './log-guard.js'

export type { Cluster }

/** `startCluster` with the log guard's logger unless the test brings its own (then it checks its lines). */
export function startCluster(options: StartClusterOptions = {}): Promise<Cluster> {
  return startClusterUnguarded({ logger: guardedLogger('in-process broker'), ...options })
}

/** One in-process broker (src/index.ts's `startBroker`) with the log guard's logger. */
export function startBroker(options: Omit<StartClusterOptions, 'brokers'> = {}): Promise<Cluster> {
  return startCluster({ port: 0, ...options, brokers: 1 })
}

export async function withBroker<T>(
  fn: (cluster: Cluster) => Promise<T>,
  options: Omit<StartClusterOptions, 'brokers'> = {},
): Promise<T> {
  const cluster = await startBroker(options)
  try {
    return await fn(cluster)
  } finally {
    await cluster.stop()
  }
}

export interface RunResult {
  code: number
  stdout: string
  stderr: string
}

/** Runs a command with a timeout and returns its output; never rejects on exit code. */
export function run(
  command: string,
  args: readonly string[],
  options: { input?: string; timeoutMs?: number } = {},
) {
  return new Promise<RunResult>((resolve) => {
    const child = execFile(
      command,
      [...args],
      // SIGKILL: a client stuck in a busy loop (kcat once spun on a malformed batch) may not
      // heed SIGTERM, and would outlive the test.
      { timeout: options.timeoutMs ?? 30000, maxBuffer: 64 * 1024 * 1024, killSignal: 'SIGKILL' },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0
        resolve({ code, stdout: String(stdout), stderr: String(stderr) })
      },
    )
    if (options.input !== undefined) child.stdin?.end(options.input)
    else child.stdin?.end()
  })
}

/** @platformatic/kafka 2.x calls Promise.withResolvers (Node 22+); Node 20 needs this. */
export function polyfillPromiseWithResolvers(): void {
  const P = Promise as unknown as { withResolvers?: () => unknown }
  if (P.withResolvers) return
  P.withResolvers = () => {
    let resolve!: (value: unknown) => void
    let reject!: (reason: unknown) => void
    const promise = new Promise((res, rej) => {
      resolve = res
      reject = rej
    })
    return { promise, resolve, reject }
  }
}

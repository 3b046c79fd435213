/**
 * librdkafka's load generator for the benches: bench/native/rdkafka-perf.c compiled with cc
 * against the system librdkafka (`npm run bench:deps` installs its headers), and one run of
 * it, whose last stdout line is its JSON summary.
 */
import { execFile, execFileSync } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

/** Compiles rdkafka-perf into .build/ (every time: the source may have changed) and returns its path. */
export function perfBinary(): string {
  const out = join(root, '.build', 'rdkafka-perf')
  mkdirSync(dirname(out), { recursive: true })
  execFileSync('cc', ['-O2', '-o', out, join(root, 'bench', 'native', 'rdkafka-perf.c'), '-lrdkafka'])
  return out
}

/**
 * Runs the load generator without blocking this process's event loop (a broker may live here).
 * `timeoutMs` (none by default) kills a run that hangs.
 */
export async function perf(binary: string, args: string[], timeoutMs = 0): Promise<Record<string, number>> {
  const { stdout } = await promisify(execFile)(binary, args, {
    encoding: 'utf8',
    maxBuffer: 1 << 20,
    timeout: timeoutMs,
    killSignal: 'SIGKILL',
  })
  return JSON.parse(stdout.trim().split('\n').at(-1)!)
}

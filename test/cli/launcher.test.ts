/**
 * Issue 34: bin/tidelog.js, run as `npx tidelog` runs it (the file itself), starts node with
 * glibc's malloc settings, in the process it was started as: the pid a supervisor or a fault
 * test signals is node's. A probe preloaded through NODE_OPTIONS reports the pid and the
 * environment node started with, and exits before the CLI runs.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { after, test } from 'node:test'
import { launcherEnv, tidelogBin } from '../helpers/broker-process.js'

const MALLOC_SETTINGS = ['MALLOC_MMAP_THRESHOLD_', 'MALLOC_ARENA_MAX'] as const
const probeDir = mkdtempSync(join(tmpdir(), 'tidelog-launcher-'))
const probe = join(probeDir, 'probe.cjs')
writeFileSync(
  probe,
  `process.stdout.write(JSON.stringify({ pid: process.pid, env: Object.fromEntries(${JSON.stringify(
    MALLOC_SETTINGS,
  )}.map((name) => [name, process.env[name] ?? null])) }))\nprocess.exit(0)\n`,
)
after(() => rmSync(probeDir, { recursive: true, force: true }))

interface Seen {
  readonly pid: number
  readonly env: Record<string, string | null>
}

/** Runs bin/tidelog.js itself in an environment without malloc settings but `env`'s. */
function runLauncher(env: Record<string, string>): { seen: Seen; childPid: number | undefined } {
  const base: Record<string, string | undefined> = { ...process.env }
  for (const name of [...MALLOC_SETTINGS, 'TIDELOG_MALLOC_DEFAULTS']) delete base[name]
  const result = spawnSync(tidelogBin(), ['help'], {
    encoding: 'utf8',
    timeout: 20000,
    env: {
      ...base,
      PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`,
      NODE_OPTIONS: `--require ${probe}`,
      ...env,
    },
  })
  assert.equal(result.status, 0, `launcher failed: ${result.stderr}`)
  return { seen: JSON.parse(result.stdout) as Seen, childPid: result.pid }
}

test("the launcher starts node with glibc's mmap threshold fixed at 128 KiB, in the process it was started as", () => {
  const { seen, childPid } = runLauncher({})
  assert.deepEqual(seen.env, { MALLOC_MMAP_THRESHOLD_: '131072', MALLOC_ARENA_MAX: null })
  assert.equal(seen.pid, childPid, 'node runs in the spawned process, not in a child of it')
  // What test helpers give a broker started with node flags (which skip the launcher).
  assert.deepEqual(launcherEnv({}), { MALLOC_MMAP_THRESHOLD_: seen.env.MALLOC_MMAP_THRESHOLD_ })
})

test("the launcher keeps an operator's own malloc settings", () => {
  const { seen } = runLauncher({ MALLOC_MMAP_THRESHOLD_: '1048576', MALLOC_ARENA_MAX: '2' })
  assert.deepEqual(seen.env, { MALLOC_MMAP_THRESHOLD_: '1048576', MALLOC_ARENA_MAX: '2' })
  assert.deepEqual(launcherEnv({ MALLOC_MMAP_THRESHOLD_: '1048576' }), { MALLOC_MMAP_THRESHOLD_: '1048576' })
})

test('TIDELOG_MALLOC_DEFAULTS=0 leaves glibc its own defaults', () => {
  const { seen } = runLauncher({ TIDELOG_MALLOC_DEFAULTS: '0' })
  assert.deepEqual(seen.env, { MALLOC_MMAP_THRESHOLD_: null, MALLOC_ARENA_MAX: null })
  assert.deepEqual(launcherEnv({ TIDELOG_MALLOC_DEFAULTS: '0' }), {})
})

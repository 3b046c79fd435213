/**
 * Issue 34: bin/tidelog.js, run as `npx tidelog` runs it (the file itself), starts node with
 * glibc's malloc settings, V8's young generation capped at 2 x 2 MiB, and on jemalloc when it is
 * installed (the test command installs Debian's libjemalloc2), in the process it was started as: the pid a supervisor or a fault
 * test signals is node's. A probe preloaded through NODE_OPTIONS reports the pid, the
 * environment node started with and whether jemalloc is mapped, and exits before the CLI runs.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { after, test } from 'node:test'
import { launcherEnv, launcherJemalloc, tidelogBin } from '../helpers/broker-process.js'

const MALLOC_SETTINGS = ['MALLOC_MMAP_THRESHOLD_', 'MALLOC_ARENA_MAX', 'LD_PRELOAD', 'MALLOC_CONF'] as const
const JEMALLOC_CONF = 'background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0'
const YOUNG_GENERATION = '--max-semi-space-size=2'
const probeDir = mkdtempSync(join(tmpdir(), 'tidelog-launcher-'))
const probe = join(probeDir, 'probe.cjs')
writeFileSync(
  probe,
  `const maps = require('node:fs').readFileSync('/proc/self/maps', 'utf8')
const live = []
for (let i = 0; i < 3e6; i++) { live.push({ i }); if (live.length > 20000) live.splice(0, 10000) }
const newSpace = require('node:v8').getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')
process.stdout.write(JSON.stringify({ pid: process.pid, jemalloc: maps.includes('libjemalloc'), newSpaceMiB: newSpace.space_size / 1048576, nodeOptions: process.env.NODE_OPTIONS, env: Object.fromEntries(${JSON.stringify(
    MALLOC_SETTINGS,
  )}.map((name) => [name, process.env[name] ?? null])) }))\nprocess.exit(0)\n`,
)
after(() => rmSync(probeDir, { recursive: true, force: true }))

interface Seen {
  readonly pid: number
  /** Whether libjemalloc is mapped into node. */
  readonly jemalloc: boolean
  /** V8's young generation after 3 million short-lived objects: 2 x 16 MiB by default. */
  readonly newSpaceMiB: number
  readonly nodeOptions: string
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

/** The jemalloc the launcher finds here: the test command installs Debian's libjemalloc2. */
function installedJemalloc(): string {
  const path = launcherJemalloc()
  assert.ok(path, 'no libjemalloc.so.2 where bin/tidelog.js looks (apt-get install libjemalloc2)')
  return path
}

test("the launcher starts node on jemalloc, with glibc's mmap threshold fixed at 128 KiB, in the process it was started as", () => {
  const jemalloc = installedJemalloc()
  const { seen, childPid } = runLauncher({})
  assert.deepEqual(seen.env, {
    MALLOC_MMAP_THRESHOLD_: '131072',
    MALLOC_ARENA_MAX: null,
    LD_PRELOAD: jemalloc,
    MALLOC_CONF: JEMALLOC_CONF,
  })
  assert.equal(seen.jemalloc, true, 'jemalloc is mapped into node')
  assert.equal(seen.pid, childPid, 'node runs in the spawned process, not in a child of it')
  assert.equal(seen.nodeOptions, `${YOUNG_GENERATION} --require ${probe}`)
  assert.ok(seen.newSpaceMiB <= 4, `V8's young generation grew to ${seen.newSpaceMiB} MiB`)
  // What test helpers give a broker started with node flags (which skip the launcher).
  assert.deepEqual(launcherEnv({}), {
    MALLOC_MMAP_THRESHOLD_: seen.env.MALLOC_MMAP_THRESHOLD_,
    LD_PRELOAD: jemalloc,
    MALLOC_CONF: JEMALLOC_CONF,
    NODE_OPTIONS: YOUNG_GENERATION,
  })
})

test("the launcher keeps an operator's own malloc settings", () => {
  const jemalloc = installedJemalloc()
  const own = { MALLOC_MMAP_THRESHOLD_: '1048576', MALLOC_ARENA_MAX: '2', MALLOC_CONF: 'narenas:1' }
  const nodeOptions = `--max-semi-space-size=16 --require ${probe}`
  const { seen } = runLauncher({ ...own, NODE_OPTIONS: nodeOptions })
  assert.deepEqual(seen.env, { ...own, LD_PRELOAD: jemalloc })
  assert.equal(seen.jemalloc, true)
  assert.equal(seen.nodeOptions, nodeOptions)
  assert.ok(seen.newSpaceMiB > 8, `the operator's young generation: ${seen.newSpaceMiB} MiB`)
  assert.deepEqual(
    launcherEnv({ MALLOC_MMAP_THRESHOLD_: '1048576', MALLOC_CONF: 'narenas:1', NODE_OPTIONS: nodeOptions }),
    { MALLOC_MMAP_THRESHOLD_: '1048576', LD_PRELOAD: jemalloc, MALLOC_CONF: 'narenas:1' },
  )
  assert.deepEqual(
    launcherEnv({ NODE_OPTIONS: '--enable-source-maps' }).NODE_OPTIONS,
    `${YOUNG_GENERATION} --enable-source-maps`,
  )
})

test('an LD_PRELOAD of the operator replaces jemalloc: nothing is preloaded but it', () => {
  installedJemalloc()
  const { seen } = runLauncher({ LD_PRELOAD: 'libm.so.6' })
  assert.deepEqual(seen.env, {
    MALLOC_MMAP_THRESHOLD_: '131072',
    MALLOC_ARENA_MAX: null,
    LD_PRELOAD: 'libm.so.6',
    MALLOC_CONF: null,
  })
  assert.equal(seen.jemalloc, false)
  assert.deepEqual(launcherEnv({ LD_PRELOAD: 'libm.so.6' }), {
    MALLOC_MMAP_THRESHOLD_: '131072',
    NODE_OPTIONS: YOUNG_GENERATION,
  })
})

test('TIDELOG_MALLOC_DEFAULTS=0 leaves glibc its own defaults and preloads nothing', () => {
  installedJemalloc()
  const { seen } = runLauncher({ TIDELOG_MALLOC_DEFAULTS: '0' })
  assert.deepEqual(seen.env, {
    MALLOC_MMAP_THRESHOLD_: null,
    MALLOC_ARENA_MAX: null,
    LD_PRELOAD: null,
    MALLOC_CONF: null,
  })
  assert.equal(seen.jemalloc, false)
  assert.equal(seen.nodeOptions, `--require ${probe}`)
  assert.ok(seen.newSpaceMiB > 8, `V8's own young generation: ${seen.newSpaceMiB} MiB`)
  assert.deepEqual(launcherEnv({ TIDELOG_MALLOC_DEFAULTS: '0' }), {})
})

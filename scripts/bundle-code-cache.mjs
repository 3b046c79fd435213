/**
 * Makes dist/bundle/main.cache, the V8 code cache bin/load-bundle.js compiles the bundle
 * with (docs/notes/startup.md): a child process loads main.js through that same loader, runs
 * `tidelog start` on a free port and a temporary data directory, and takes the cache the
 * moment the broker is listening, so it holds exactly the functions a start runs before
 * it serves (a function compiled later costs nothing on the start path, and one never run
 * would only cost deserializing). The broker is then stopped with SIGTERM, as a user would.
 *
 * Called by scripts/bundle.mjs after it wrote the bundle. A failed run leaves no cache and
 * warns: the CLI still works, only its start-up is slower, and test/cli/bundle.test.ts
 * fails if the cache is not used.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { setFlagsFromString } from 'node:v8'

const requireCjs = createRequire(import.meta.url)
const LOADER = fileURLToPath(new URL('../bin/load-bundle.js', import.meta.url))
const TRAIN_TIMEOUT_MS = 60_000

/**
 * The V8 flags bin/tidelog.js puts in NODE_OPTIONS (the young generation's size). V8 stamps a
 * cache with a hash of its flags and refuses it under others, so the cache is made and checked
 * under the flags `npx tidelog` runs with; a node started without them (TIDELOG_MALLOC_DEFAULTS=0,
 * `node bin/tidelog.js`) compiles the bundle without the cache.
 */
function launcherNodeOptions() {
  const launcher = readFileSync(fileURLToPath(new URL('../bin/tidelog.js', import.meta.url)), 'utf8')
  const flags = /NODE_OPTIONS="(--[^"$]*) \$NODE_OPTIONS"/.exec(launcher.split('\n', 2)[1] ?? '')?.[1]
  if (flags === undefined)
    throw new Error('bin/tidelog.js sets no NODE_OPTIONS: update scripts/bundle-code-cache.mjs')
  return flags
}

/** Runs the child that makes the cache, then checks in another that V8 accepts it. */
export function makeCodeCache(bundleDir) {
  const cacheFile = join(bundleDir, 'main.cache')
  const nodeEnv = { ...process.env, NODE_OPTIONS: launcherNodeOptions() }
  const train = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--train', bundleDir], {
    env: { ...nodeEnv, TIDELOG_LOG_LEVEL: 'warn' },
    encoding: 'utf8',
    timeout: TRAIN_TIMEOUT_MS,
  })
  if (train.status !== 0) {
    rmSync(cacheFile, { force: true })
    process.stderr.write(
      `bundle: WARNING: no code cache (tidelog start starts slower): the run that makes it ended with ${train.status ?? train.signal}\n${train.stdout}${train.stderr}`,
    )
    return
  }
  const check = spawnSync(
    process.execPath,
    [
      '-e',
      `process.stdout.write(require(${JSON.stringify(LOADER)}).loadBundle(${JSON.stringify(bundleDir)}).cache)`,
    ],
    { encoding: 'utf8', env: nodeEnv },
  )
  if (check.stdout !== 'accepted') {
    rmSync(cacheFile, { force: true })
    process.stderr.write(
      `bundle: WARNING: V8 did not accept the code cache (${check.stdout}${check.stderr}); removed\n`,
    )
    return
  }
  process.stdout.write(
    train.stdout
      .split('\n')
      .filter((line) => line.startsWith('code cache:'))
      .join('\n') + '\n',
  )
}

/** The child: loads the bundle without a cache, starts a broker, caches once it listens. */
async function train(bundleDir) {
  const { loadBundle, writeCodeCache } = requireCjs(LOADER)
  const { exports, script, buildId } = loadBundle(bundleDir, { codeCache: false })
  const dataDir = mkdtempSync(join(tmpdir(), 'tidelog-code-cache-'))
  let cachedData = null
  const write = process.stdout.write.bind(process.stdout)
  // The banner's bootstrap line is printed once every listener of the broker is open.
  process.stdout.write = (chunk, ...rest) => {
    if (cachedData === null && String(chunk).startsWith('bootstrap servers: ')) {
      // V8 stamps a cache with a hash of its flags and refuses it under other flags. The
      // start command's heap policy (src/cli/heap-policy.ts) has set one by now, which no
      // process has when it loads the bundle; 0 is its default.
      setFlagsFromString('--heap-growing-percent=0')
      cachedData = script.createCachedData()
      process.kill(process.pid, 'SIGTERM')
    }
    return write(chunk, ...rest)
  }
  try {
    const code = await exports.runCli([
      'start',
      '--port',
      '0',
      '--http-port',
      '0',
      '--data-dir',
      join(dataDir, 'data'),
    ])
    if (code !== 0) throw new Error(`tidelog start exited with ${code}`)
    if (cachedData === null) throw new Error('tidelog start stopped without printing its bootstrap servers')
    writeCodeCache(bundleDir, buildId, cachedData)
    write(`code cache: ${(cachedData.length / 1024).toFixed(0)} KiB of V8 data for build ${buildId}\n`)
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

if (process.argv[2] === '--train') await train(process.argv[3])

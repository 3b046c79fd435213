/**
 * Issue 19: bin/tidelog.js runs the esbuild bundle of the CLI (dist/bundle, scripts/bundle.mjs)
 * when it is at least as new as tsc's output, and tsc's modules otherwise. The bundle's
 * main.js is compiled from the V8 code cache the build made (bin/load-bundle.js), and the
 * API codecs that load on first use are scripts of their own. From the bundle, `tidelog
 * start` must use that cache, still find the files it locates relative to its own modules
 * (the web console's static files), load those codecs only when first needed, and load no
 * module of dist/src. Which files a process loaded (and what became of a script's code
 * cache) is read from bench/module-counter.mjs's log.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { cp, mkdir, mkdtemp, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { freePort, launcherEnv, spawnTidelog } from '../helpers/broker-process.js'
import { repoRoot } from '../helpers/compat-clients.js'
import { startEtcd } from '../helpers/etcd.js'

const root = repoRoot()

/** Runs bin/tidelog.js with the module counter; `modules()` reads what it has loaded so far. */
function tidelog(args: readonly string[], moduleLog: string, env: Record<string, string> = {}) {
  const output = spawnTidelog(
    args,
    { TIDELOG_LOG_LEVEL: 'warn', TIDELOG_MODULE_LOG: moduleLog, ...env },
    `tidelog ${args[0]}`,
    [],
    ['--import', join(root, 'bench', 'module-counter.mjs')],
  )
  const loaded = async (): Promise<string[]> => {
    const text = await readFile(moduleLog, 'utf8').catch(() => '')
    return text.split('\n').filter((url) => url !== '')
  }
  const modules = async (): Promise<string[]> =>
    (await loaded()).filter((url) => url.startsWith(`file://${root}/dist/`))
  return { output, modules, loaded }
}

const fromBundle = (url: string) => url.startsWith(`file://${root}/dist/bundle/`)
const codecFile = (url: string) => url.startsWith(`file://${root}/dist/bundle/codecs/`)
const fromModules = (url: string) => url.startsWith(`file://${root}/dist/src/`)

async function withTempDir<T>(body: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'tidelog-bundle-'))
  try {
    return await body(dir)
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

test('tidelog start from the bundle and its code cache: console files, /metrics and the console API answer; lazy API codecs load on first use', {
  timeout: 60000,
}, async () => {
  await withTempDir(async (dir) => {
    const { output, modules } = tidelog(
      ['start', '--port', '0', '--http-port', '0', '--data-dir', join(dir, 'data')],
      join(dir, 'modules.log'),
    )
    try {
      const { line } = await output.waitForLine(/^broker 0 console and metrics: /, 20000)
      const base = line.replace(/^broker 0 console and metrics: /, '').trim()

      const started = await modules()
      assert.ok(
        started.includes(`file://${root}/dist/bundle/main.js code-cache=accepted`),
        started.join('\n'),
      )
      assert.deepEqual(started.filter(fromModules), [], 'no tsc module loaded beside the bundle')
      assert.deepEqual(started.filter(codecFile), [], 'no lazy API codec is loaded before it is needed')

      for (const [name, type] of [
        ['index.html', 'text/html'],
        ['console.js', 'text/javascript'],
        ['console.css', 'text/css'],
      ]) {
        const response = await fetch(new URL(name === 'index.html' ? '/' : `/${name}`, base))
        assert.equal(response.status, 200, name)
        assert.match(response.headers.get('content-type') ?? '', new RegExp(`^${type}`), name)
        assert.equal(
          await response.text(),
          await readFile(join(root, 'src', 'ops', 'console', name), 'utf8'),
          name,
        )
      }

      const metrics = await fetch(new URL('/metrics', base))
      assert.equal(metrics.status, 200)
      assert.match(await metrics.text(), /^process_cpu_user_seconds_total /m)

      const cluster = await fetch(new URL('/api/cluster', base))
      assert.equal(cluster.status, 200)
      const body = (await cluster.json()) as { brokers: unknown[] }
      assert.equal(body.brokers.length, 1)
      // The console API's admin client loads every API's codecs as it connects; /api/groups
      // then needs ListGroups answered by the broker, through codec files on both sides.
      const groups = await fetch(new URL('/api/groups', base))
      assert.equal(groups.status, 200)
      assert.deepEqual(await groups.json(), [])
      const after = await modules()
      assert.ok(
        after.includes(`file://${root}/dist/bundle/codecs/list-groups.js code-cache=none`),
        after.join('\n'),
      )
      assert.deepEqual(after.filter(fromModules), [])
    } finally {
      output.signal('SIGTERM')
      const { code } = await output.exited
      assert.equal(code, 0, output.tail())
    }
  })
})

test('tidelog broker on etcd from the bundle: etcd3, grpc-js and protobufjs come from their own bundle file, and etcd3 finds its rpc.proto', {
  timeout: 60000,
}, async () => {
  const etcd = await startEtcd()
  try {
    await withTempDir(async (dir) => {
      const port = await freePort()
      const args = ['broker', '--metadata', etcd.endpoint.replace(/^http:\/\//, 'etcd://')]
      args.push('--set', 'node.id=0', '--set', `listeners=PLAINTEXT://127.0.0.1:${port}`)
      args.push('--set', `log.dirs=${join(dir, 'data')}`)
      const { output, loaded } = tidelog(args, join(dir, 'modules.log'))
      try {
        // Listening means the store connected, read the image and registered through etcd3.
        await output.waitForLine(/listening on/, 20000)
        const urls = await loaded()
        assert.ok(urls.includes(`file://${root}/dist/bundle/etcd3.cjs`), urls.join('\n'))
        const fromNodeModules = urls.filter((url) => /\/node_modules\/(etcd3|@grpc|protobufjs)\//.test(url))
        assert.deepEqual(fromNodeModules, [])
      } finally {
        await output.terminate()
      }
    })
  } finally {
    await etcd.stop()
  }
})

test('TIDELOG_BUNDLE=0, or a bundle older than tsc output, runs the tsc modules instead', {
  timeout: 60000,
}, async () => {
  await withTempDir(async (dir) => {
    const run = async (label: string, env: Record<string, string> = {}) => {
      const { output, modules } = tidelog(['help'], join(dir, `${label}.log`), env)
      const { code } = await output.exited
      assert.equal(code, 0, output.tail())
      assert.ok(
        output.lines.some((l) => l.startsWith('Usage: tidelog')),
        output.tail(),
      )
      return modules()
    }

    const fresh = await run('fresh')
    assert.ok(fresh.some(fromBundle) && !fresh.some(fromModules), fresh.join('\n'))

    const forced = await run('forced', { TIDELOG_BUNDLE: '0' })
    assert.ok(forced.includes(`file://${root}/dist/src/cli/main.js`), forced.join('\n'))
    assert.ok(!forced.some(fromBundle), forced.join('\n'))

    // A tsc run after the bundle was built: tsc's entry is newer. Restored afterwards, so
    // the files after this one still run the bundle.
    const entry = join(root, 'dist', 'src', 'cli', 'main.js')
    const before = await stat(entry)
    const bundleBuilt = (await stat(join(root, 'dist', 'bundle', 'main.js'))).mtime
    try {
      await utimes(entry, before.atime, new Date(bundleBuilt.getTime() + 1000))
      const stale = await run('stale')
      assert.ok(stale.includes(`file://${root}/dist/src/cli/main.js`), stale.join('\n'))
      assert.ok(!stale.some(fromBundle), stale.join('\n'))
    } finally {
      await utimes(entry, before.atime, before.mtime)
    }
  })
})

test('the code cache is used only with the build it was made for and only when undamaged', {
  timeout: 60000,
}, async () => {
  await withTempDir(async (dir) => {
    const bundleDir = join(dir, 'bundle')
    await cp(join(root, 'dist', 'bundle'), bundleDir, { recursive: true })
    const cacheFile = join(bundleDir, 'main.cache')
    const made = await readFile(cacheFile)
    // Loads the copy in a child (loading runs the bundle's top level) and says what became of the cache.
    const load = (): string => {
      const loader = JSON.stringify(join(root, 'bin', 'load-bundle.js'))
      const { status, stdout, stderr } = spawnSync(
        process.execPath,
        [
          '-e',
          `const r = require(${loader}).loadBundle(${JSON.stringify(bundleDir)}); process.stdout.write(r.cache + ' ' + typeof r.exports.runCli)`,
        ],
        // Under the launcher's V8 flags, which the cache was made with (V8 refuses it under others).
        { encoding: 'utf8', env: { ...process.env, ...launcherEnv(process.env) } },
      )
      assert.equal(status, 0, stderr)
      return stdout
    }
    assert.equal(load(), 'accepted function')

    // Another build's cache: V8 would take data of the right source length as it is.
    const otherBuild = Buffer.from(made)
    otherBuild.write('f'.repeat(16), 0, 'latin1')
    await writeFile(cacheFile, otherBuild)
    assert.equal(load(), 'none function')

    // Damaged past V8's header: release V8 does not checksum it and would abort (V8_Fatal).
    const damaged = Buffer.from(made)
    for (let i = 200; i < damaged.length; i += 97) damaged[i] ^= 0xff
    await writeFile(cacheFile, damaged)
    assert.equal(load(), 'none function')

    // V8's own header refuses the data (as another Node version's would be): compiled from source.
    const header = made.indexOf(0x0a) + 1
    const refused = Buffer.from(made)
    for (let i = header; i < header + 8; i++) refused[i] ^= 0xff
    const { crc32 } = await import('node:zlib')
    refused.write(crc32(refused.subarray(header)).toString(16).padStart(8, '0'), header - 9, 'latin1')
    await writeFile(cacheFile, refused)
    assert.equal(load(), 'rejected function')

    // Unreadable (a directory in its place), then missing: started without it.
    await rm(cacheFile)
    await mkdir(cacheFile)
    assert.equal(load(), 'none function')
    await rm(cacheFile, { recursive: true })
    assert.equal(load(), 'none function')
  })
})

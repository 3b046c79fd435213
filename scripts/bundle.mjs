/**
 * Bundles the `tidelog` command's code (tsc's output, dist/src/cli/main.js and everything it
 * imports) into dist/bundle/ with esbuild, so that `tidelog start` compiles one script from
 * V8's code cache instead of resolving, linking and compiling ~190 modules: loading code was
 * most of its start-up (docs/notes/startup.md). Runs after tsc as part of `npm run build`;
 * bin/tidelog.js prefers the bundle, and bin/load-bundle.js loads it.
 *
 * - main.js is a script, `(function (exports, require, module, __filename, __dirname) {...})`
 *   in CommonJS form, not an ES module: Node 20 caches no module's compiled code, while a
 *   vm.Script takes V8's cachedData. scripts/bundle-code-cache.mjs makes that cache last, by
 *   running `tidelog start` from the new bundle until it listens.
 * - npm packages stay `require`s of node_modules (the native codecs load .node files;
 *   prom-client loads on first use), except pino and dot-properties, bundled into main.js
 *   (resolving pino's ~29 files cost ~20 ms of `tidelog start`), and etcd3 with grpc-js and
 *   protobufjs, bundled into etcd3.cjs beside it, which only a broker on an `etcd://` store
 *   requires (resolving its ~200 files was half of its 160-230 ms import, docs/notes/performance.md).
 *   pino's transports (worker threads started from pino's own files, which a bundled copy does
 *   not have; tidelog uses none) are left out, and node:assert is loaded only by a failing
 *   assertion in a bundled package: scripts/bundle-shims.
 * - A bundled package's `__dirname` (etcd3 reads its rpc.proto from it at import; grpc-js
 *   names its own proto directory on two server-only paths) is the package's directory
 *   in node_modules, found at run time: see packageDirOf.
 * - What the CLI imports dynamically still loads on first use: prom-client's registry, the
 *   console API, the client subcommands (esbuild's lazy module initializers in main.js), and
 *   the codecs of all APIs but the start path's (a script each in dist/bundle/codecs; see
 *   CODECS_DIR below and loadApiCodec in src/protocol/generated/index.ts).
 * - A module that uses `import.meta.url` gets the URL of its own tsc output file instead of
 *   the bundle's: the console's static files and createRequire() then resolve from where they
 *   always did, for the bundle and the unbundled dist/ alike.
 */
import { createHash } from 'node:crypto'
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { basename, dirname, join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const entry = join(root, 'dist', 'src', 'cli', 'main.js')
const outdir = join(root, 'dist', 'bundle')
const distSrc = join(root, 'dist', 'src') + sep

/** Packages bundled into main.js (with all they require); every other bare import stays a require. */
const BUNDLED_PACKAGES = new Set(['pino', 'dot-properties'])

/**
 * Packages bundled into a file of their own, loaded by the first `require` of the package:
 * etcd3 with grpc-js and protobufjs is about as large as the rest of the CLI and only a
 * broker on an etcd store loads it.
 */
const OWN_FILE_PACKAGES = new Map([['etcd3', 'etcd3.cjs']])

const nodeModules = `${sep}node_modules${sep}`

/** Modules the bundled packages import that are replaced by scripts/bundle-shims. */
const SHIMS = new Map([
  ['assert', 'assert.cjs'],
  ['node:assert', 'assert.cjs'],
  ['thread-stream', 'thread-stream.cjs'],
])
const shimsDir = join(root, 'scripts', 'bundle-shims')

const bundleChosenPackages = {
  name: 'bundle-chosen-packages',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      const shim = SHIMS.get(args.path)
      if (shim !== undefined && args.importer.includes(nodeModules)) return { path: join(shimsDir, shim) }
      if (args.path.startsWith('node:')) return undefined
      const ownFile = OWN_FILE_PACKAGES.get(args.path)
      if (ownFile !== undefined) return { path: `./${ownFile}`, external: true }
      const fromBundledPackage = args.importer.includes(`${sep}node_modules${sep}`)
      if (BUNDLED_PACKAGES.has(args.path) || fromBundledPackage) return undefined
      return { path: args.path, external: true }
    })
  },
}

/**
 * An esbuild plugin that replaces every `token` in the .js files `inPath` accepts by
 * `replacement(path, text)`; every other file loads as it is.
 */
function replaceToken(name, { inPath, token, replacement }) {
  return {
    name,
    setup(b) {
      b.onLoad({ filter: /\.js$/ }, async (args) => {
        if (!inPath(args.path)) return undefined
        const text = await readFile(args.path, 'utf8')
        if (!text.includes(token)) return undefined
        const contents = text.replaceAll(token, replacement(args.path, text))
        return { contents, loader: 'js', resolveDir: dirname(args.path) }
      })
    },
  }
}

/** Replaces `import.meta.url` in dist/src modules with the URL of that module's own file. */
const ownImportMetaUrl = replaceToken('own-import-meta-url', {
  inPath: (path) => path.startsWith(distSrc),
  token: 'import.meta.url',
  // main.js is in outdir, so the path is relative to outdir; __tidelogBundleUrl is main.js's
  // URL, set by the banner.
  replacement: (path) =>
    `new URL(${JSON.stringify(relative(outdir, path).split(sep).join('/'))}, __tidelogBundleUrl).href`,
})

/**
 * The packages, outermost first, that hold a file in node_modules, and the file's directory
 * inside the innermost: `node_modules/@grpc/proto-loader/node_modules/protobufjs/src/x.js`
 * gives [['@grpc/proto-loader', 'protobufjs'], 'src'].
 */
function packageDirOf(path) {
  const parts = relative(root, dirname(path)).split(nodeModules.slice(1, -1)).slice(1)
  const names = []
  let inner = ''
  for (const part of parts) {
    const segments = part.split(sep).filter(Boolean)
    const length = segments[0].startsWith('@') ? 2 : 1
    names.push(segments.slice(0, length).join('/'))
    inner = segments.slice(length).join('/')
  }
  return [names, inner]
}

/**
 * Replaces `__dirname` in bundled packages' files with that file's directory in node_modules,
 * resolved when the chunk runs (from the chunk's own place, as the package's import was
 * before), so files they read beside their code are found wherever npm put the package.
 */
const packageDirname = replaceToken('package-dirname', {
  inPath: (path) => path.includes(nodeModules),
  token: '__dirname',
  replacement: (path, text) => {
    if (text.includes('__filename')) throw new Error(`${relative(root, path)}: __filename is not handled`)
    const [names, inner] = packageDirOf(path)
    return `__tidelogPackageDir(${JSON.stringify(names)}, ${JSON.stringify(inner)})`
  },
})

/** The banner's helper for packageDirname: resolves each package from the one before it. */
const PACKAGE_DIR_HELPER = `const __tidelogCreateRequire = require('node:module').createRequire
const __tidelogDirname = require('node:path').dirname
function __tidelogPackageDir(names, inner) {
  let resolve = require.resolve
  let dir = ''
  for (const name of names) {
    dir = __tidelogDirname(resolve(name + '/package.json'))
    resolve = __tidelogCreateRequire(dir + '/package.json').resolve
  }
  return inner === '' ? dir : dir + '/' + inner
}`

/**
 * V8 keeps every module's source text in the heap, as one-byte Latin-1 when it can and as
 * UTF-16 otherwise: a single em dash in an 870 KB chunk doubles it. esbuild escapes non-ASCII
 * characters in code (charset 'ascii') but copies the comments it keeps verbatim, so those
 * are escaped here; a non-ASCII character anywhere else stops the build.
 */
const NON_ASCII = /[\u0080-\u{10ffff}]/gu

function asciiOnly(text, path) {
  if (text.search(NON_ASCII) === -1) return text
  return text
    .split('\n')
    .map((line, i) => {
      if (line.search(NON_ASCII) === -1) return line
      if (!/^\s*(\/\/|\/?\*)/.test(line)) {
        throw new Error(`${relative(root, path)}:${i + 1}: non-ASCII character outside a comment`)
      }
      return line.replace(NON_ASCII, (c) => `\\u{${c.codePointAt(0).toString(16)}}`)
    })
    .join('\n')
}

/**
 * main.js is one script, not a module: bin/load-bundle.js compiles it with vm.Script and V8's
 * code cache (Node 20 caches no module's code) and calls the function it evaluates to, as
 * Node calls a CommonJS module's wrapper. Its first line carries a hash of the whole output,
 * which the code cache file repeats, so a cache is never used with another build's script.
 */
const BUILD_ID_PLACEHOLDER = '0'.repeat(16)
const SCRIPT_HEAD = `(function (exports, require, module, __filename, __dirname) { 'use strict'; /* build ${BUILD_ID_PLACEHOLDER} */`

/**
 * The codecs of the APIs that load on first use (loadApiCodec in src/protocol/generated/
 * index.ts) are 1.3 MB of the 3.1 MB the CLI is, and a script costs its whole size at every
 * start even where it runs nothing: reading and decoding it, and V8 keeping a slot for every
 * function in it in the code cache it deserializes (docs/notes/startup.md). So each such API's
 * module is a script of its own in dist/bundle/codecs, which main.js asks for with
 * `require('./codecs/NAME.js')`: bin/load-bundle.js compiles it then, and answers its imports
 * of the few modules it shares with main.js (errors, the protocol's primitives, the codecs'
 * common helpers) with main.js's own instances (`tidelog-bundle:PATH`, from the entry's
 * `__tidelogSharedModules`), so a class is one class for both. An API whose module the start
 * path also imports statically stays in main.js.
 */
const CODECS_DIR = 'codecs'
const SHARED_PREFIX = 'tidelog-bundle:'
const CODEC_HEAD = `(function (exports, require, module) { 'use strict';`
const apisDir = join(distSrc, 'protocol', 'generated', 'apis') + sep

/** Makes the dynamic imports of API modules not in `keep` external codec files; records them in `split`. */
function splitCodecs(keep, split) {
  return {
    name: 'split-codecs',
    setup(b) {
      b.onResolve({ filter: /^\.\/apis\/[^/]+\.js$/ }, (args) => {
        const path = join(args.resolveDir, args.path)
        if (args.kind !== 'dynamic-import' || !path.startsWith(apisDir) || keep.has(path)) return undefined
        split.add(path)
        return { path: `./${CODECS_DIR}/${basename(path)}`, external: true }
      })
    },
  }
}

/** In a codec file: every import outside the API modules is main.js's instance; records them. */
function sharedFromMain(shared) {
  return {
    name: 'shared-from-main',
    setup(b) {
      b.onResolve({ filter: /^\./ }, (args) => {
        const path = join(args.resolveDir, args.path)
        if (path.startsWith(apisDir)) return undefined
        if (!path.startsWith(distSrc)) throw new Error(`${args.importer}: unexpected import ${args.path}`)
        shared.add(path)
        return { path: SHARED_PREFIX + relative(distSrc, path).split(sep).join('/'), external: true }
      })
    },
  }
}

/** main.js's entry: the CLI's exports, and the modules the codec files share with it. */
function mainEntry(shared) {
  return {
    name: 'main-entry',
    setup(b) {
      b.onResolve({ filter: /^tidelog-main-entry$/ }, () => ({ path: 'main', namespace: 'tidelog-entry' }))
      b.onLoad({ filter: /.*/, namespace: 'tidelog-entry' }, () => {
        const modules = [...shared].sort()
        const lines = [
          `export * from ${JSON.stringify(entry)}`,
          ...modules.map((path, i) => `import * as shared${i} from ${JSON.stringify(path)}`),
        ]
        const names = modules.map(
          (path, i) => `${JSON.stringify(relative(distSrc, path).split(sep).join('/'))}: shared${i}`,
        )
        lines.push(`export const __tidelogSharedModules = { ${names.join(', ')} }`)
        return { contents: lines.join('\n'), loader: 'js', resolveDir: root }
      })
    },
  }
}

await rm(outdir, { recursive: true, force: true })
const common = {
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  legalComments: 'none',
  absWorkingDir: root,
  metafile: true,
  write: false,
  logLevel: 'warning',
}
const mainOptions = (keep, split, shared) => ({
  ...common,
  entryPoints: { main: 'tidelog-main-entry' },
  outdir,
  // A vm.Script has no module loader to answer import(): every dynamic import becomes a
  // require, and what it reaches is still initialized on first use (esbuild's lazy __esm
  // wrappers), so prom-client, the console API and the client subcommands still load when
  // first needed.
  supported: { 'dynamic-import': false },
  banner: {
    js: `${SCRIPT_HEAD}\nconst __tidelogBundleUrl = require('node:url').pathToFileURL(__filename).href\n${PACKAGE_DIR_HELPER}`,
  },
  footer: { js: '})' },
  sourcemap: 'linked',
  plugins: [
    mainEntry(shared),
    splitCodecs(keep, split),
    bundleChosenPackages,
    ownImportMetaUrl,
    packageDirname,
  ],
})

// A first pass finds the API modules the start path imports statically (they stay in main.js).
const dynamicApis = new Set()
const probe = await build({ ...mainOptions(new Set(), dynamicApis, new Set()), sourcemap: false })
if (probe.errors.length > 0) process.exit(1)
const keep = new Set(
  Object.keys(probe.metafile.inputs)
    .map((path) => join(root, path))
    .filter((path) => path.startsWith(apisDir)),
)
const split = new Set([...dynamicApis].filter((path) => !keep.has(path)))
const shared = new Set()
const codecs = await build({
  ...common,
  entryPoints: [...split],
  outdir: join(outdir, CODECS_DIR),
  banner: { js: CODEC_HEAD },
  footer: { js: '})' },
  plugins: [sharedFromMain(shared)],
})
const main = await build(mainOptions(keep, new Set(), shared))
const ownFiles = await Promise.all(
  [...OWN_FILE_PACKAGES].map(([name, file]) =>
    build({
      ...common,
      entryPoints: [createRequire(join(root, 'package.json')).resolve(name)],
      outfile: join(outdir, file),
      banner: { js: PACKAGE_DIR_HELPER },
      plugins: [packageDirname],
    }),
  ),
)
if ([codecs, main, ...ownFiles].some((result) => result.errors.length > 0)) process.exit(1)

const mainOut = join(outdir, 'main.js')
const mainText = main.outputFiles.find((file) => file.path === mainOut)?.text
if (mainText === undefined || !mainText.startsWith(SCRIPT_HEAD))
  throw new Error('main.js does not start with its banner')
const scripts = [...codecs.outputFiles, ...main.outputFiles].filter((file) => file.path.endsWith('.js'))
for (const file of scripts) {
  if (/[^\w$.]import\(/.test(file.text))
    throw new Error(`${file.path} has an import(), which a vm.Script cannot run`)
}
const buildId = createHash('sha256').update(mainText).digest('hex').slice(0, BUILD_ID_PLACEHOLDER.length)

// bin/tidelog.js loads the bundle when its main.js exists (and is not older than tsc's), so
// main.js is written last: a build cut short leaves no main.js, not one whose files are
// missing.
await mkdir(join(outdir, CODECS_DIR), { recursive: true })
const outputs = [
  ...codecs.outputFiles,
  ...ownFiles.flatMap((result) => result.outputFiles),
  ...main.outputFiles,
]
const lastTheEntry = (a, b) => Number(a.path === mainOut) - Number(b.path === mainOut)
for (const file of outputs.sort(lastTheEntry)) {
  const text = file.path === mainOut ? mainText.replace(BUILD_ID_PLACEHOLDER, buildId) : file.text
  await writeFile(file.path, /\.c?js$/.test(file.path) ? asciiOnly(text, file.path) : file.contents)
}

const sizes = [codecs, main, ...ownFiles].flatMap((result) =>
  Object.entries(result.metafile.outputs).filter(([path]) => /\.c?js$/.test(path)),
)
const bytes = sizes.reduce((sum, [, o]) => sum + o.bytes, 0)
const mainBytes = main.metafile.outputs[relative(root, mainOut)]?.bytes ?? 0
process.stdout.write(
  `bundle: ${sizes.length} files, ${(bytes / 1024 / 1024).toFixed(1)} MiB in ${relative(root, outdir)} (main.js ${(mainBytes / 1024 / 1024).toFixed(1)} MiB, ${split.size} API codec files)\n`,
)
await import('./bundle-code-cache.mjs').then(({ makeCodeCache }) => makeCodeCache(outdir))

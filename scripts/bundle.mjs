/**
 * Bundles the `tidelog` command's code (tsc's output, dist/src/cli/main.js and everything it
 * imports) into dist/bundle/ with esbuild, so that `tidelog start` loads a handful of files
 * instead of ~190 modules: per-module resolution and linking were most of the start-up time
 * (docs/startup.md). Runs after tsc as part of `npm run build`; bin/tidelog.js prefers the
 * bundle.
 *
 * - npm packages stay imports of node_modules (the native codecs load .node files; prom-client
 *   loads on first use), except pino, dot-properties and etcd3 with their dependencies:
 *   resolving pino's ~29 CommonJS files cost ~20 ms of `tidelog start`, and etcd3's ~200
 *   (grpc-js, proto-loader, protobufjs) about half of its 160-230 ms import, which every
 *   `tidelog broker` on an etcd store pays before it can fetch (docs/startup.md,
 *   docs/performance.md). They are wrapped as CommonJS in the ESM chunks, with a `require`
 *   for the builtins they load; etcd3 stays in the etcd store's own chunk, loaded only for an
 *   `etcd://` store. tidelog uses no pino transport (those start worker threads from pino's
 *   own files, which a bundled copy does not have).
 * - A bundled package's `__dirname` (etcd3 reads its rpc.proto from it at import; grpc-js
 *   names its own proto directory on two server-only paths) is the package's directory
 *   in node_modules, found at run time: see packageDirOf.
 * - Dynamic imports become chunks (`splitting`), so what loads on first use (prom-client's
 *   registry, the console API, the client subcommands, each API's codecs but the hot ones,
 *   see loadApiCodec in src/protocol/generated/index.ts) still loads on first use.
 * - A module that uses `import.meta.url` gets the URL of its own tsc output file instead of
 *   the chunk's: the console's static files and createRequire() then resolve from where they
 *   always did, for the bundle and the unbundled dist/ alike.
 */
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { dirname, join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const entry = join(root, 'dist', 'src', 'cli', 'main.js')
const outdir = join(root, 'dist', 'bundle')
const distSrc = join(root, 'dist', 'src') + sep

/** Packages bundled (with all they require); every other bare import stays external. */
const BUNDLED_PACKAGES = new Set(['pino', 'dot-properties', 'etcd3'])

const bundleChosenPackages = {
  name: 'bundle-chosen-packages',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith('node:')) return undefined
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
  // Every output file (entry and chunks) is written to outdir itself, so one path
  // relative to outdir is right for whichever chunk the module ends up in.
  replacement: (path) =>
    `new URL(${JSON.stringify(relative(outdir, path).split(sep).join('/'))}, import.meta.url).href`,
})

const nodeModules = `${sep}node_modules${sep}`

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
const PACKAGE_DIR_HELPER = `function __tidelogPackageDir(names, inner) {
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

await rm(outdir, { recursive: true, force: true })
const result = await build({
  entryPoints: { main: entry },
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // The bundled CommonJS packages require builtins; ESM has no `require` of its own.
  banner: {
    js: `import { createRequire as __tidelogCreateRequire } from 'node:module'\nimport { dirname as __tidelogDirname } from 'node:path'\nconst require = __tidelogCreateRequire(import.meta.url)\n${PACKAGE_DIR_HELPER}`,
  },
  sourcemap: 'linked',
  legalComments: 'none',
  absWorkingDir: root,
  metafile: true,
  write: false,
  logLevel: 'warning',
  plugins: [bundleChosenPackages, ownImportMetaUrl, packageDirname],
})
if (result.errors.length > 0) process.exit(1)

// bin/tidelog.js loads the bundle when its main.js exists (and is not older than tsc's), so
// main.js is written last: a build cut short leaves no main.js, not one whose chunks are
// missing.
await mkdir(outdir, { recursive: true })
const entryOut = join(outdir, 'main.js')
const lastTheEntry = (a, b) => Number(a.path === entryOut) - Number(b.path === entryOut)
for (const file of [...result.outputFiles].sort(lastTheEntry)) {
  await writeFile(file.path, file.path.endsWith('.js') ? asciiOnly(file.text, file.path) : file.contents)
}

const outputs = Object.entries(result.metafile.outputs).filter(([path]) => path.endsWith('.js'))
const bytes = outputs.reduce((sum, [, o]) => sum + o.bytes, 0)
process.stdout.write(
  `bundle: ${outputs.length} files, ${(bytes / 1024 / 1024).toFixed(1)} MiB in ${relative(root, outdir)}\n`,
)

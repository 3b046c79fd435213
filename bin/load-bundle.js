'use strict'
// Loads the CLI's bundle, dist/bundle/main.js (scripts/bundle.mjs), with V8's code cache.
//
// Node 20 has no compile cache for modules (module.enableCompileCache is Node 22's), and
// compiling the CLI's code was most of what `tidelog start` spent before its first
// connection beyond a bare node (docs/notes/startup.md). So the bundle is one CommonJS-style
// script, `(function (exports, require, module, __filename, __dirname) { ... })`, compiled
// with vm.Script and the cachedData the build made by running `tidelog start` until it
// listened: V8 then deserializes every function the start path runs instead of parsing and
// compiling them.
//
// V8 checks its own version, its flags and the source's length before it uses the cache,
// but neither the source itself nor, in a release build, the cache's own bytes: data from
// another build of the same length, or damaged on disk, would be deserialized as it is
// and abort the process (V8_Fatal) or worse. So the cache file starts with the build id
// that main.js carries on its first line and a CRC-32 of the V8 data after it, and a file
// whose id or CRC does not match is not used. A rejected or missing cache costs time (the
// script is compiled from its source, as any module is), never correctness.
//
// scripts/bundle-code-cache.mjs makes the cache through this same function, so the script
// it caches is compiled exactly as it is here.
const { readFileSync, renameSync, writeFileSync } = require('node:fs')
const { createRequire } = require('node:module')
const { join } = require('node:path')
const { Script } = require('node:vm')

const BUILD_ID = /^\(function \(exports, require, module, __filename, __dirname\) \{ 'use strict'; \/\* build ([0-9a-f]{16}) \*\//

const CODE_CACHE = 'main.cache'

/** The cache file's first line, `BUILD_ID CRC32\n` (hex), before the V8 data. */
function codeCacheHeader(buildId, data) {
  return `${buildId} ${require('node:zlib').crc32(data).toString(16).padStart(8, '0')}\n`
}

/**
 * Writes the cache for `buildId` beside the bundle, aside and then renamed, so a reader sees
 * a whole file or none (scripts/bundle-code-cache.mjs).
 */
function writeCodeCache(bundleDir, buildId, data) {
  const file = join(bundleDir, CODE_CACHE)
  writeFileSync(`${file}.tmp`, Buffer.concat([Buffer.from(codeCacheHeader(buildId, data), 'latin1'), data]))
  renameSync(`${file}.tmp`, file)
}

/**
 * The cache's V8 data, or undefined when the file is missing, was made for another build or
 * is damaged.
 */
function readCodeCache(file, buildId) {
  let bytes
  try {
    bytes = readFileSync(file)
  } catch {
    // Missing or unreadable: the cache only saves time, so the CLI starts without it.
    return undefined
  }
  // zlib.crc32 is Node 20.15's; an older Node starts without the cache.
  if (typeof require('node:zlib').crc32 !== 'function') return undefined
  const headerBytes = bytes.indexOf(0x0a) + 1
  if (headerBytes === 0 || !bytes.toString('latin1', 0, headerBytes).startsWith(`${buildId} `)) return undefined
  const data = bytes.subarray(headerBytes)
  return bytes.toString('latin1', 0, headerBytes) === codeCacheHeader(buildId, data) ? data : undefined
}

/**
 * Compiles and runs the bundle in `bundleDir`; returns its exports (runCli), the vm.Script
 * (for making a cache) and what became of the cache: 'accepted', 'rejected' (by V8: another
 * Node, or other V8 flags) or 'none' (no file, or not this build's).
 */
function loadBundle(bundleDir, { codeCache = true } = {}) {
  const file = join(bundleDir, 'main.js')
  // The bundle is ASCII (scripts/bundle.mjs checks), so Latin-1 decodes it fastest.
  const source = readFileSync(file, 'latin1')
  const buildId = BUILD_ID.exec(source.slice(0, 200))
  if (buildId === null) throw new Error(`${file} is not a tidelog bundle: rebuild with 'npm run build'`)
  const cachedData = codeCache ? readCodeCache(join(bundleDir, CODE_CACHE), buildId[1]) : undefined
  const script = new Script(source, { filename: file, cachedData })
  const cache = cachedData === undefined ? 'none' : script.cachedDataRejected ? 'rejected' : 'accepted'
  const module = { exports: {} }
  script.runInThisContext()(module.exports, bundleRequire(bundleDir, module), module, file, bundleDir)
  return { exports: module.exports, script, cache, buildId: buildId[1] }
}

const CODECS = './codecs/'
const SHARED = 'tidelog-bundle:'

/**
 * main.js's `require`: Node's, from main.js's place, except for the API codec files, which
 * are scripts of their own (scripts/bundle.mjs) compiled on their first require. Their
 * imports of modules main.js also has get main.js's instances, so a class they throw is the
 * one main.js checks for.
 */
function bundleRequire(bundleDir, main) {
  const nodeRequire = createRequire(join(bundleDir, 'main.js'))
  const codecs = new Map()
  const codecRequire = (id) => {
    if (!id.startsWith(SHARED)) return nodeRequire(id)
    const shared = main.exports.__tidelogSharedModules?.[id.slice(SHARED.length)]
    if (shared === undefined) throw new Error(`the bundle's main.js does not share ${id.slice(SHARED.length)}`)
    return shared
  }
  const loadCodec = (id) => {
    const file = join(bundleDir, id)
    const module = { exports: {} }
    new Script(readFileSync(file, 'latin1'), { filename: file }).runInThisContext()(module.exports, codecRequire, module)
    return module.exports
  }
  const require = (id) => {
    if (!id.startsWith(CODECS)) return nodeRequire(id)
    let exports = codecs.get(id)
    if (exports === undefined) {
      exports = loadCodec(id)
      codecs.set(id, exports)
    }
    return exports
  }
  require.resolve = nodeRequire.resolve
  require.cache = nodeRequire.cache
  require.main = nodeRequire.main
  return require
}

exports.loadBundle = loadBundle
exports.writeCodeCache = writeCodeCache

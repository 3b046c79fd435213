#!/usr/bin/env node
'use strict'
// Entry point of the `tidelog` command; the CLI itself is compiled TypeScript in dist/.
//
// `npm run build` writes both tsc's modules (dist/src) and a bundle of them (dist/bundle,
// scripts/bundle.mjs) that starts in about half the time: one script compiled from V8's code
// cache instead of ~190 modules to resolve, link and compile (load-bundle.js,
// docs/notes/startup.md). This file is CommonJS (bin/package.json) for the same reason: running
// an ES module entry would start Node's ESM loader, which the bundle does not need.
//
// The bundle is used unless it is missing or older than tsc's output (a bare `tsc` since the
// last build rewrote every file): running stale code would be worse than starting slower, so
// then the modules are loaded instead, as they are when TIDELOG_BUNDLE=0 asks for them
// (profiling, debugging one module, or a `tsc --watch`, which re-emits only the files that
// changed). Only one file is compared: checking all ~240 inputs would cost 2-4 ms of the
// start-up the bundle saves. Equal times count as fresh: npm gives every file of an
// installed package the same timestamp.
const { existsSync, statSync } = require('node:fs')
const { join } = require('node:path')

const root = join(__dirname, '..')
const modules = join(root, 'dist', 'src', 'cli', 'main.js')
const bundleDir = join(root, 'dist', 'bundle')
if (!existsSync(modules)) {
  process.stderr.write(`tidelog: ${modules} is missing; run 'npm run build' first\n`)
  process.exit(1)
}
const bundleBuiltMs = statSync(join(bundleDir, 'main.js'), { throwIfNoEntry: false })?.mtimeMs ?? -1
const useBundle = process.env.TIDELOG_BUNDLE !== '0' && bundleBuiltMs >= statSync(modules).mtimeMs
const cli = useBundle ? Promise.resolve(require('./load-bundle.js').loadBundle(bundleDir).exports) : import(modules)
cli
  .then(({ runCli }) => runCli(process.argv.slice(2)))
  .then((code) => {
    process.exitCode = code
  })

#!/usr/bin/env node
// Entry point of the `tidelog` command; the CLI itself is compiled TypeScript in dist/.
//
// `npm run build` writes both tsc's modules (dist/src) and a bundle of them (dist/bundle,
// scripts/bundle.mjs), which loads in about half the CPU time: a dozen files instead of ~190
// modules to resolve and link (docs/startup.md). The bundle is used unless it is missing or
// older than tsc's output (a bare `tsc` since the last build rewrote every file): running
// stale code would be worse than starting slower, so then the modules are loaded instead, as
// they are when TIDELOG_BUNDLE=0 asks for them (profiling, debugging one module, or a
// `tsc --watch`, which re-emits only the files that changed). Only one file is compared:
// checking all ~240 inputs would cost 2-4 ms of the start-up the bundle saves. Equal times
// count as fresh: npm gives every file of an installed package the same timestamp.
import { existsSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const modules = join(root, 'dist', 'src', 'cli', 'main.js')
const bundle = join(root, 'dist', 'bundle', 'main.js')
if (!existsSync(modules)) {
  process.stderr.write(`tidelog: ${modules} is missing; run 'npm run build' first\n`)
  process.exit(1)
}
const bundleBuiltMs = statSync(bundle, { throwIfNoEntry: false })?.mtimeMs ?? -1
const useBundle = process.env.TIDELOG_BUNDLE !== '0' && bundleBuiltMs >= statSync(modules).mtimeMs
const { runCli } = await import(useBundle ? bundle : modules)
process.exitCode = await runCli(process.argv.slice(2))

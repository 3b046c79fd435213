#!/usr/bin/env -S node --initial-heap-size=64
// Entry point of the `tidelog` command; the CLI itself is compiled TypeScript in dist/.
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const main = join(root, 'dist', 'src', 'cli', 'main.js')
if (!existsSync(main)) {
  process.stderr.write(`tidelog: ${main} is missing; run 'npm run build' first\n`)
  process.exit(1)
}
const { runCli } = await import(main)
process.exitCode = await runCli(process.argv.slice(2))

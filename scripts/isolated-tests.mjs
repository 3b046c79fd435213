#!/usr/bin/env node
// Prints the compiled test files (dist/test/**/*.test.js given as arguments) that can run
// side by side with another: those that start no broker, client process or server of their
// own. scripts/test.sh runs them two at a time, the others one at a time. The verdict is
// read from the test tree's imports: a test file and the test helpers it imports must not
// import Node's process, thread, socket or HTTP modules, nor the source modules that compose
// Node's network and brokers (runtime/node-parts, node-network, node-tls-network,
// server/broker-thread, testing/, cli/); a real disk is fine. The source tree is not
// followed: the broker imports Node's parts for its composition, which the simulator's
// brokers (on their injected network) never use. A computed import() cannot be followed
// and counts as not isolated.
import { readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'

const OUTSIDE = new Set([
  'child_process',
  'cluster',
  'dgram',
  'http',
  'http2',
  'https',
  'net',
  'tls',
  'worker_threads',
])
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])([^'"]+)\1/g
const COMPUTED_IMPORT = /\bimport\s*\(\s*[^'"\s)]/

/** Source modules that compose Node's real parts (relative to dist/src). */
const STARTS_REAL_PARTS =
  /\/dist\/src\/(runtime\/(node-parts|node-network|node-tls-network)|server\/broker-thread|testing\/|cli\/)/
const TEST_TREE = /\/dist\/test\//

const verdicts = new Map()

/** True when `file` and everything it imports inside the repo reach none of OUTSIDE. */
function isolated(file) {
  const known = verdicts.get(file)
  if (known !== undefined) return known
  verdicts.set(file, true) // a cycle back to this file adds nothing
  const source = readFileSync(file, 'utf8')
  let verdict = !COMPUTED_IMPORT.test(source)
  for (const match of source.matchAll(IMPORT)) {
    if (!verdict) break
    const specifier = match[2]
    if (specifier.startsWith('.')) {
      const target = resolve(dirname(file), specifier)
      if (STARTS_REAL_PARTS.test(target)) verdict = false
      else if (TEST_TREE.test(target)) verdict = isolated(target)
    } else verdict = !OUTSIDE.has(specifier.replace(/^node:/, '').split('/')[0])
  }
  verdicts.set(file, verdict)
  return verdict
}

for (const file of process.argv.slice(2)) if (isolated(resolve(file))) console.log(file)

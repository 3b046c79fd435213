import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** bin/tidelog.js, found from this file's place in dist/test/helpers or test/helpers. */
function binPath(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'bin', 'tidelog.js'))) {
    const parent = dirname(dir)
    if (parent === dir) throw new Error('bin/tidelog.js not found above test/helpers')
    dir = parent
  }
  return join(dir, 'bin', 'tidelog.js')
}

/**
 * The node flags bin/tidelog.js's `#!/usr/bin/env -S node ...` line gives the command, which
 * a spawn of `node bin/tidelog.js` would not get: tests and benchmarks that spawn it this
 * way pass them too, so they run what `npx tidelog` runs (docs/performance.md says why the
 * heap flag is there). Kept free of node:test imports so benchmarks can use it.
 */
export function tidelogNodeFlags(): string[] {
  return nodeFlagsOf(binPath())
}

/** The node flags of a script's `#!/usr/bin/env node` or `#!/usr/bin/env -S node ...` line. */
export function nodeFlagsOf(script: string): string[] {
  const firstLine = readFileSync(script, 'utf8').split('\n', 1)[0]
  const match = /^#!\/usr\/bin\/env (-S )?node(?<flags>( [^ ]+)*)$/.exec(firstLine)
  if (!match?.groups) throw new Error(`${script} starts with an unexpected line: ${firstLine}`)
  return match.groups.flags.split(' ').filter(Boolean)
}

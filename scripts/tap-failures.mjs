#!/usr/bin/env node
// Prints the failures of a node:test TAP log again, each with the names of the suites
// around it and its error block, so that a log read from its end (CI keeps its tail)
// still names what failed and why. Usage: node scripts/tap-failures.mjs <tap-log>
import { readFileSync } from 'node:fs'

const ERROR_LINES_MAX = 60
const FAILURES_MAX = 20

const logPath = process.argv[2]
if (!logPath) {
  console.error('usage: node scripts/tap-failures.mjs <tap-log>')
  process.exit(2)
}
const lines = readFileSync(logPath, 'utf8').split('\n')
const indentOf = (line) => line.length - line.trimStart().length

// Names of the subtests open at each nesting depth (4 spaces a level).
const openNames = []
const failures = []
for (let i = 0; i < lines.length; i++) {
  const line = lines[i]
  const depth = Math.floor(indentOf(line) / 4)
  const trimmed = line.trimStart()
  const subtest = /^# Subtest: (.*)$/.exec(trimmed)
  if (subtest) {
    openNames.length = depth
    openNames[depth] = subtest[1]
    continue
  }
  const notOk = /^not ok \d+ - (.*)$/.exec(trimmed)
  if (!notOk) continue
  const errorBlock = []
  let j = i + 1
  if (lines[j]?.trimStart() === '---') {
    for (j++; j < lines.length && lines[j].trimStart() !== '...'; j++) errorBlock.push(lines[j])
  }
  const path = [...openNames.slice(0, depth), notOk[1]].filter(Boolean)
  // A suite failing only because a subtest did is already said by that subtest.
  const onlySubtests = errorBlock.some((l) => /error: '\d+ subtests? failed'/.test(l))
  if (!onlySubtests) failures.push({ path, errorBlock })
}

console.log(`\n=== ${failures.length} failing test(s), again after the summary ===`)
for (const { path, errorBlock } of failures.slice(0, FAILURES_MAX)) {
  console.log(`\nnot ok: ${path.join(' > ')}`)
  const shown = errorBlock.filter((l) => !/^\s*duration_ms:/.test(l))
  for (const l of shown.slice(0, ERROR_LINES_MAX)) console.log(l)
  if (shown.length > ERROR_LINES_MAX) console.log(`  ... ${shown.length - ERROR_LINES_MAX} more lines`)
}
if (failures.length > FAILURES_MAX) console.log(`\n... and ${failures.length - FAILURES_MAX} more`)

#!/usr/bin/env node
// The compatibility table (issue 32): runs the conformance tests with TIDELOG_COMPAT_RESULTS
// set, so each writes one JSON line per check (test/helpers/compat-results.ts), and writes
// docs/compatibility.md from those lines: client and version by feature, pass or fail on
// tidelog and on Apache Kafka 4.4 (the reference), with the date and the versions it ran with.
//
//   npm run compat:table                     build, run the tests (about 20 min), write the table
//   node scripts/compat-table.mjs --results FILE   write the table from a results file only
//   node scripts/compat-table.mjs --keep FILE      run, and keep the results in FILE
//
// The table is written even when a test fails: a failing check is what the table is for. The
// exit code is the test run's.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')

/** The conformance tests that report checks, in the table's column order. */
const TESTS = [
  'java-clients',
  'go-clients',
  'python-pypi-clients',
  'java-streams',
  'java-connect',
  'java-mirror',
]

/** Clients whose checks are scenarios of a framework, listed apart from the client features. */
const FRAMEWORKS = ['Kafka Streams (Java)', 'Kafka Connect (Java)', 'MirrorMaker 2 (Java)']

function parseArgs(argv) {
  const args = { results: undefined, keep: undefined }
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--results') args.results = argv[++i]
    else if (argv[i] === '--keep') args.keep = argv[++i]
    else throw new Error(`unknown argument ${argv[i]}`)
  }
  return args
}

/** Runs the tests one file at a time (each starts its own brokers and JVMs); returns the exit code. */
function runTests(resultsFile) {
  rmSync(resultsFile, { force: true })
  const files = TESTS.map((t) => join(root, 'dist', 'test', 'compat', `${t}.test.js`))
  for (const f of files) if (!existsSync(f)) throw new Error(`${f} is missing: npm run build first`)
  const run = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...files], {
    cwd: root,
    stdio: 'inherit',
    env: {
      ...process.env,
      TIDELOG_COMPAT_RESULTS: resultsFile,
      // The MirrorMaker 2 reference run is left out of the default suite for time.
      TIDELOG_MM2_REFERENCE: '1',
      TIDELOG_LOG_LEVEL: process.env.TIDELOG_LOG_LEVEL ?? 'warn',
    },
  })
  return run.status ?? 1
}

function readResults(file) {
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
  return lines.map((l) => JSON.parse(l))
}

function quiet(command, args) {
  try {
    return execFileSync(command, args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  } catch (error) {
    return String(error.stderr ?? '')
  }
}

function environment() {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
  const commit = quiet('git', ['rev-parse', '--short', 'HEAD']).trim() || 'unknown'
  // java -version prints to stderr.
  const javaRun = spawnSync('java', ['-version'], { encoding: 'utf8' })
  const java =
    String(javaRun.stderr ?? '')
      .split('\n')[0]
      .trim() || 'unknown'
  const kafka = readFileSync(join(root, 'test', 'helpers', 'kafka-reference.ts'), 'utf8').match(
    /KAFKA_REFERENCE_VERSION = '([^']+)'/,
  )?.[1]
  return {
    tidelog: `${pkg.version} (commit ${commit})`,
    node: process.version,
    java,
    kafka: kafka ?? 'unknown',
  }
}

function cellText(text) {
  return String(text).replace(/\|/g, '\\|').replace(/\s+/g, ' ')
}

/** `pass`, `FAIL`, or empty; with the reference's outcome where it differs. */
function cell(tidelog, kafka) {
  if (!tidelog && !kafka) return ''
  const ours = tidelog ? (tidelog.pass ? 'pass' : '**FAIL**') : 'not run'
  if (kafka && tidelog && kafka.pass === tidelog.pass) return ours
  const theirs = kafka ? (kafka.pass ? 'pass' : 'FAIL') : 'not run'
  return `${ours} (Kafka: ${theirs})`
}

function matrix(results, clients) {
  const checks = []
  for (const r of results) if (clients.includes(r.client) && !checks.includes(r.check)) checks.push(r.check)
  const header = `| feature | ${clients.map((c) => `${cellText(c)} ${cellText(version(results, c))}`).join(' | ')} |`
  const rule = `| --- | ${clients.map(() => '---').join(' | ')} |`
  const rows = checks.map((check) => {
    const cells = clients.map((client) =>
      cell(find(results, client, check, 'tidelog'), find(results, client, check, 'kafka')),
    )
    return `| ${cellText(check)} | ${cells.join(' | ')} |`
  })
  return [header, rule, ...rows].join('\n')
}

function find(results, client, check, target) {
  // The last line wins: a results file may hold a rerun.
  return results.findLast((r) => r.client === client && r.check === check && r.target === target)
}

function version(results, client) {
  return results.find((r) => r.client === client)?.version ?? ''
}

function summary(results, clients) {
  const rows = clients.map((client) => {
    const count = (target) => {
      const mine = new Map()
      for (const r of results) if (r.client === client && r.target === target) mine.set(r.check, r.pass)
      const passed = [...mine.values()].filter(Boolean).length
      return mine.size === 0 ? 'not run' : `${passed}/${mine.size}`
    }
    return `| ${cellText(client)} | ${cellText(version(results, client))} | ${count('tidelog')} | ${count('kafka')} |`
  })
  return [
    '| client | version | tidelog: passed | Kafka reference: passed |',
    '| --- | --- | --- | --- |',
    ...rows,
  ].join('\n')
}

function failures(results) {
  const failed = results.filter((r) => !r.pass)
  const seen = new Set()
  const lines = []
  for (const r of failed) {
    const key = `${r.client}/${r.check}/${r.target}`
    if (seen.has(key)) continue
    seen.add(key)
    lines.push(`- ${r.client} ${r.version}, ${r.check} on ${r.target}: ${cellText(r.detail ?? '')}`)
  }
  return lines.length === 0 ? 'None.' : lines.join('\n')
}

function render(results, env, date) {
  const clients = []
  for (const r of results) if (!clients.includes(r.client)) clients.push(r.client)
  const plain = clients.filter((c) => !FRAMEWORKS.includes(c))
  const frameworks = FRAMEWORKS.filter((c) => clients.includes(c))
  return `# Client compatibility

Generated by \`npm run compat:table\` (scripts/compat-table.mjs) from the conformance tests
(test/compat/{${TESTS.join(',')}}.test.ts): do not edit by hand. Each check runs against
tidelog (3 in-process brokers; MirrorMaker 2 copies from 3 brokers to 1) and against Apache
Kafka ${env.kafka} (the reference broker, KRaft); a check failing on Kafka would be a bad check.
A cell says how the check did on tidelog, and adds Kafka's outcome where the two differ.

- Run: ${date} (UTC)
- tidelog ${env.tidelog}, Node.js ${env.node}
- Apache Kafka ${env.kafka} reference; ${cellText(env.java)}

## Summary

${summary(results, clients)}

## Client features

${matrix(results, plain)}

## Frameworks

${matrix(results, frameworks)}

## Failing checks

${failures(results)}
`
}

const args = parseArgs(process.argv.slice(2))
let code = 0
let resultsFile = args.results
if (!resultsFile) {
  resultsFile = args.keep ?? join(tmpdir(), `tidelog-compat-${process.pid}.jsonl`)
  code = runTests(resultsFile)
}
const date = new Date().toISOString().slice(0, 16).replace('T', ' ')
const results = readResults(resultsFile)
if (results.length === 0) throw new Error(`no results in ${resultsFile}`)
const out = join(root, 'docs', 'compatibility.md')
mkdirSync(dirname(out), { recursive: true })
writeFileSync(out, render(results, environment(), date))
console.log(`wrote ${out} from ${results.length} check outcomes (${resultsFile})`)
if (!args.results && !args.keep) rmSync(resultsFile, { force: true })
process.exitCode = code

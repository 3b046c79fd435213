/**
 * `npm run test:netfault -- --seconds 600 [--brokers 3|5] [--seed S] [--partitions N] [--rate R]
 * [--workload default|jepsen] [--faults kind,kind]`:
 * the network-namespace fault suite (see suite.ts; needs root). Exits 1 when an acknowledged
 * record is lost, misplaced or reordered, an idempotent producer wrote a duplicate, an
 * unclean election happened or the replicas differ; exits 2 when this machine cannot make
 * network namespaces.
 */
import { parseArgs } from 'node:util'
import { namespaceSupport } from './network.js'
import { FAULTS, type Fault, formatNetfaultReport, netfaultProblems, runNetfaultSuite } from './suite.js'

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    brokers: { type: 'string', default: '3' },
    seed: { type: 'string' },
    partitions: { type: 'string' },
    rate: { type: 'string', default: '150' },
    workload: { type: 'string', default: 'default' },
    /** Comma-separated kinds to draw from instead of all (e.g. power-loss,clock-jump). */
    faults: { type: 'string' },
  },
  strict: true,
})
const numeric = (name: string, value: string | undefined): number | undefined => {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`--${name} must be a non-negative integer, not "${value}"`)
  return n
}
const unsupported = await namespaceSupport()
if (unsupported !== null) {
  console.error(`NETFAULT SUITE CANNOT RUN HERE: ${unsupported}`)
  process.exit(2)
}
if (values.workload !== 'default' && values.workload !== 'jepsen')
  throw new Error(`--workload must be default or jepsen, not "${values.workload}"`)
const workload: 'default' | 'jepsen' = values.workload
const partitions = numeric('partitions', values.partitions)
const seed = numeric('seed', values.seed)
const faults = values.faults?.split(',').map((kind) => {
  if (!FAULTS.includes(kind as Fault)) throw new Error(`--faults: no fault "${kind}" (${FAULTS.join(', ')})`)
  return kind as Fault
})
const report = await runNetfaultSuite({
  seconds: numeric('seconds', values.seconds)!,
  brokers: numeric('brokers', values.brokers),
  rate: numeric('rate', values.rate),
  workload,
  ...(partitions !== undefined ? { partitions } : {}),
  ...(seed !== undefined ? { seed } : {}),
  ...(faults !== undefined ? { faults } : {}),
})
console.log(formatNetfaultReport(report))
const problems = netfaultProblems(report)
if (problems.length > 0) {
  console.log(`FAILED:\n  ${problems.join('\n  ')}`)
  process.exitCode = 1
}

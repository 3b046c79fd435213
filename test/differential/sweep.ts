/**
 * The long differential sweep: `npm run test:differential -- --seeds N [--first S] [--steps M]
 * [--fixed] [--sessions]` runs N generated sequences (seeds S..S+N-1, M steps each) against one
 * tidelog broker and one Kafka 4.4 node, with --fixed the fixed set first and with --sessions
 * the recorded client sessions (sessions/*.jsonl) before them (`--seeds 0 --sessions`: only those). It prints every
 * difference, known ones marked with their reason, and exits 1 on any unknown one.
 */
import { parseArgs } from 'node:util'
import { startBrokers } from './brokers.js'
import { generatedSequence } from './generator.js'
import { type Difference, formatDifference, runSequence, type Sequence } from './harness.js'
import { knownDifference } from './known-differences.js'
import { FIXED_SEQUENCES } from './sequences.js'
import { recordedSession, recordedSessionNames } from './session.js'

const { values } = parseArgs({
  options: {
    seeds: { type: 'string', default: '20' },
    first: { type: 'string', default: '1' },
    steps: { type: 'string', default: '60' },
    fixed: { type: 'boolean', default: false },
    sessions: { type: 'boolean', default: false },
  },
})
const seeds = Number(values.seeds)
const first = Number(values.first)
const steps = Number(values.steps)
if (![seeds, first, steps].every(Number.isInteger))
  throw new Error('--seeds, --first and --steps take integers')

const brokers = await startBrokers()
const unknown: Difference[] = []
let known = 0
let compared = 0
const started = Date.now()
try {
  const sequences: Sequence[] = values.fixed ? [...FIXED_SEQUENCES] : []
  if (values.sessions) for (const name of recordedSessionNames()) sequences.push(recordedSession(name))
  for (let seed = first; seed < first + seeds; seed++) sequences.push(generatedSequence(seed, steps))
  for (const sequence of sequences) {
    const result = await runSequence(sequence, brokers.tidelog, brokers.kafka)
    compared += result.steps
    for (const d of result.differences) {
      const k = knownDifference(d)
      if (k) {
        known++
        console.log(`known    ${formatDifference(d)}  [${k.why}]`)
      } else {
        unknown.push(d)
        console.log(`UNKNOWN  ${formatDifference(d)}`)
      }
    }
  }
  console.log(
    `${sequences.length} sequences, ${compared} steps compared in ${((Date.now() - started) / 1000).toFixed(0)} s: ` +
      `${unknown.length} unknown differences, ${known} known`,
  )
} finally {
  await brokers.stop()
}
process.exitCode = unknown.length > 0 ? 1 : 0

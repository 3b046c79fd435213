/**
 * `npm run test:fault -- --seconds 60 --acks all [--unclean] [--seed N] [--partitions 3]
 * [--history FILE] [--faults kill-leader,...] [--security SASL_SSL]`: the multi-process fault-injection suite (see
 * suite.ts). Exits 1 when acks=all with clean elections loses an acknowledged record,
 * misplaces or reorders one, the replicas differ, an idempotent producer's record is there
 * twice, or the history checker (`tidelog verify`) finds any anomaly in the run's history or
 * cannot judge every ack; acks=1 and unclean runs only report what they lose. The history is
 * kept in FILE (default: a temporary file, kept only when the checker finds something).
 */
import { parseArgs } from 'node:util'
import { FAULTS, type Fault, type FaultSecurity, formatReport, runFaultSuite } from './suite.js'

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    acks: { type: 'string', default: 'all' },
    unclean: { type: 'boolean', default: false },
    seed: { type: 'string' },
    partitions: { type: 'string', default: '3' },
    rate: { type: 'string', default: '150' },
    history: { type: 'string' },
    /** Faults injected first, in this order, before the seeded random ones. */
    faults: { type: 'string', default: '' },
    /** PLAINTEXT or SASL_SSL: how clients connect and brokers replicate. */
    security: { type: 'string', default: 'PLAINTEXT' },
  },
  strict: true,
})
const acks = values.acks === '1' ? '1' : values.acks === 'all' || values.acks === '-1' ? 'all' : null
if (acks === null) throw new Error('--acks must be all or 1')
if (values.security !== 'PLAINTEXT' && values.security !== 'SASL_SSL')
  throw new Error(`--security: '${values.security}' is not PLAINTEXT or SASL_SSL`)
const security: FaultSecurity = values.security
const faults = values.faults === '' ? [] : values.faults.split(',')
for (const fault of faults)
  if (!FAULTS.includes(fault as Fault))
    throw new Error(`--faults: '${fault}' is not one of ${FAULTS.join(', ')}`)
const report = await runFaultSuite({
  seconds: Number(values.seconds),
  acks,
  unclean: values.unclean === true,
  partitions: Number(values.partitions),
  rate: Number(values.rate),
  faults: faults as Fault[],
  security,
  ...(values.seed !== undefined ? { seed: Number(values.seed) } : {}),
  ...(values.history !== undefined ? { historyFile: values.history } : {}),
})
console.log(formatReport(report))
const strict = acks === 'all' && !values.unclean
const broken =
  report.lost > 0 ||
  report.offsetMismatches > 0 ||
  report.orderViolations > 0 ||
  !report.replicasIdentical ||
  report.idempotentDuplicated > 0
const checker = report.history.report
const checkerFailed = !checker.ok || checker.counts.acksNotCheckedForLoss > 0
if (strict && broken) {
  console.log('FAILED: acks=all with clean elections must lose nothing')
  process.exitCode = 1
}
if (strict && checkerFailed) {
  console.log(
    checker.ok
      ? `FAILED: the history checker could not judge ${checker.counts.acksNotCheckedForLoss} acknowledged writes`
      : `FAILED: the history checker found ${checker.counts.anomalies} anomalies (${report.history.file})`,
  )
  process.exitCode = 1
}

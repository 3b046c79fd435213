/**
 * The short run of the network-namespace fault suite inside `npm test`: 60 s of faults on
 * real packets (iptables partitions and loss, tbf, latency, kill -9, SIGSTOP) between three
 * brokers in their own namespaces, acks=all, RF 3, min.insync.replicas=2, clean elections
 * only. It needs root and network namespaces: where they cannot be made it says so loudly
 * and skips, and with CI=true that is a failure. Longer runs: `npm run test:netfault -- --seconds 600`.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { namespaceSupport } from './network.js'
import { formatNetfaultReport, netfaultProblems, runNetfaultSuite } from './suite.js'

const FAULT_SECONDS = 60

test(`network faults between namespaces, ${FAULT_SECONDS} s, acks=all: no acknowledged record lost`, {
  timeout: 300000,
}, async (t) => {
  const unsupported = await namespaceSupport()
  if (unsupported !== null) {
    const message = `NETFAULT SUITE CANNOT RUN HERE: ${unsupported}`
    console.error(`\n${'!'.repeat(message.length)}\n${message}\n${'!'.repeat(message.length)}\n`)
    if (process.env['CI'] === 'true') assert.fail(`${message} (CI=true: a failure, not a skip)`)
    t.skip(message)
    return
  }
  const seed = process.env['NETFAULT_SEED'] !== undefined ? Number(process.env['NETFAULT_SEED']) : undefined
  const report = await runNetfaultSuite({
    seconds: FAULT_SECONDS,
    ...(seed !== undefined ? { seed } : {}),
    log: (line) => t.diagnostic(line),
  })
  console.log(formatNetfaultReport(report))
  assert.ok(report.acknowledged > 1000, `only ${report.acknowledged} records acknowledged`)
  const injected = Object.values(report.faults).reduce((a, b) => a + b, 0)
  assert.ok(injected >= 4, `only ${injected} faults injected`)
  assert.deepEqual(netfaultProblems(report), [], `seed ${report.options.seed}`)
})

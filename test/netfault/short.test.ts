/**
 * The short runs of the network-namespace fault suite inside `npm test`: faults on real
 * packets (iptables partitions and loss, tbf, latency, kill -9, SIGSTOP) between three
 * brokers in their own namespaces, acks=all, RF 3, min.insync.replicas=2, clean elections
 * only. Two workloads, one after the other (the namespaces have fixed names): the default
 * one (plain and idempotent producers, nothing acknowledged lost or reordered) and
 * Jepsen's (transactions over several partitions, consume-transform-produce, consumer
 * groups; `tidelog verify` finds no anomaly). It needs root and network namespaces: where
 * they cannot be made it says so loudly and skips, and with CI=true that is a failure.
 * Longer runs: `npm run test:netfault -- [--workload jepsen] --seconds 600`.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { namespaceSupport } from './network.js'
import { formatNetfaultReport, netfaultProblems, runNetfaultSuite } from './suite.js'

/**
 * Each workload's faults: issue 35 asks for 60 s of Jepsen's in CI; the default workload's
 * 20 s keep the two at the 80 s they cost before.
 */
const FAULT_SECONDS = { default: 20, jepsen: 60 } as const

async function skipWithoutNamespaces(t: { skip(message: string): void }): Promise<boolean> {
  const unsupported = await namespaceSupport()
  if (unsupported === null) return false
  const message = `NETFAULT SUITE CANNOT RUN HERE: ${unsupported}`
  console.error(`\n${'!'.repeat(message.length)}\n${message}\n${'!'.repeat(message.length)}\n`)
  if (process.env['CI'] === 'true') assert.fail(`${message} (CI=true: a failure, not a skip)`)
  t.skip(message)
  return true
}

const seed = process.env['NETFAULT_SEED'] !== undefined ? Number(process.env['NETFAULT_SEED']) : undefined

for (const workload of ['default', 'jepsen'] as const) {
  test(`network faults between namespaces, ${FAULT_SECONDS[workload]} s, acks=all, ${workload} workload: no acknowledged record lost${workload === 'jepsen' ? ', no anomaly in the history' : ''}`, {
    timeout: 300000,
  }, async (t) => {
    if (await skipWithoutNamespaces(t)) return
    const report = await runNetfaultSuite({
      seconds: FAULT_SECONDS[workload],
      workload,
      ...(seed !== undefined ? { seed } : {}),
      log: (line) => t.diagnostic(line),
    })
    console.log(formatNetfaultReport(report))
    const injected = Object.values(report.faults).reduce((a, b) => a + b, 0)
    assert.ok(injected >= 3, `only ${injected} faults injected`)
    if (workload === 'jepsen') {
      const jepsen = report.jepsen
      assert.ok(jepsen !== null, 'the jepsen workload reported nothing')
      // 50 before half the writers moved to version 2, which commits fewer (a Produce v12 right
      // after EndTxn waits out the markers with the client's retry backoff): 52 and 58 since.
      assert.ok(jepsen.committed > 30, `only ${jepsen.committed} transactions committed`)
      for (const version of [1, 2] as const)
        assert.ok(jepsen.byTransactionVersion[version].committed > 0, `none committed at version ${version}`)
      assert.ok(jepsen.reads > 1000, `only ${jepsen.reads} records read by the consumers`)
      const crashes = jepsen.crashes.classicOwning + jepsen.crashes.consumerOwning
      assert.ok(crashes > 0, 'no group member crashed while holding partitions')
      // tidelog verify judged both groups' committed offsets (group skips and stalls).
      assert.ok(jepsen.report.counts.groupOffsets >= 2, 'no group-offset lines in the history')
    } else {
      assert.ok(report.acknowledged > 1000, `only ${report.acknowledged} records acknowledged`)
    }
    assert.deepEqual(netfaultProblems(report), [], `seed ${report.options.seed}`)
  })
}

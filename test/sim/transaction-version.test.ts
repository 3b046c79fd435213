/**
 * Issue 33 item 3: a planted bug that transaction version 1 lets through and version 2
 * does not. The bug (`txn-client-skips-epoch-bump`, planted in tidelog's client,
 * `TransactionManager.handleFailedBatch`) is a transactional client without KIP-360's epoch
 * bump (the Java producer before 2.5): after a batch that failed for good (not acknowledged
 * within the delivery timeout) it aborts and gives the next batch of the partition the
 * failed batch's sequence. At version 1 the next transaction's batch with that sequence
 * meets the failed batch, which did land (in the aborted transaction), and is answered
 * DUPLICATE_SEQUENCE_NUMBER, which the client takes as written: a committed transaction
 * loses a record (Jepsen's lost write). At version 2 (KIP-890 part 2) the coordinator bumps
 * the epoch at every EndTxn, so the next transaction starts from sequence 0 under a new
 * epoch whatever the client forgets, and its batches are written. The version is the
 * cluster's finalized transaction.version, which the run sets and the client reads.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { runSimulation, type SimOptions } from '../../src/sim/world.js'
import { simFlags } from './scenarios.js'

const replay = (options: SimOptions): string =>
  `replay: npm run sim -- --seed ${options.seed}${simFlags(options)}`

const LOST_WRITE = /was committed .* but record \S+ is not committed in p\d+ \(absent\)/

// Seed 1 drifted off its lost write with issue 38's changes of 2026-12-07 (metadata deltas,
// follower-session news, the HW at a refused ISR change); seed 2 was chosen by a sweep of
// 1..40 for both checks below, and still shows both with tidelog's client as the producer
// (issue 37: seeds 1, 2 and 4 of 1..8 lose a write at version 1, 1..6 pass at version 2).
describe('simulation: transaction version 1 and 2 against a client without the KIP-360 bump', () => {
  it('seed 2, version 1: a committed transaction loses a record (lost write)', async () => {
    const options: SimOptions = {
      seed: 2,
      transactions: true,
      transactionVersion: 1,
      mutation: 'txn-client-skips-epoch-bump',
    }
    const result = await runSimulation(options)
    assert.ok(
      !result.ok && LOST_WRITE.test(result.violation ?? ''),
      `${result.ok ? 'passed' : `failed otherwise: ${result.violation}`}\n${replay(options)}`,
    )
  })

  it('seed 2, version 2: no anomaly; each transaction begins at the epoch its predecessor bumped to', async () => {
    const options: SimOptions = {
      seed: 2,
      transactions: true,
      transactionVersion: 2,
      mutation: 'txn-client-skips-epoch-bump',
    }
    const result = await runSimulation(options)
    assert.ok(result.ok, `${result.violation}\n${replay(options)}`)
    // Producer 0's first transactions (one instance): each begins one epoch above the last.
    const epochs = result.trace
      .map((line) => / txn producer 0: txn x0\.\d+ begins: producer \d+ epoch (\d+)/.exec(line)?.[1])
      .filter((epoch) => epoch !== undefined)
      .slice(0, 4)
      .map(Number)
    assert.equal(epochs.length, 4, 'producer 0 began fewer than 4 transactions')
    assert.deepEqual(
      epochs.slice(1).map((epoch, i) => epoch - epochs[i]),
      [1, 1, 1],
      `epochs ${epochs.join(', ')}\n${replay(options)}`,
    )
  })
})

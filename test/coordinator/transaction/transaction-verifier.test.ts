/**
 * The leader's side of KIP-890 (transaction-verifier.ts): adding a transaction version 2
 * producer's partition while the coordinator still completes the previous transaction
 * (CONCURRENT_TRANSACTIONS) is retried here every add.partitions.to.txn.retry.backoff.ms,
 * up to add.partitions.to.txn.retry.backoff.max.ms, as Kafka's leader does, its guard started
 * over each time; then the producer gets NOT_ENOUGH_REPLICAS. A verification (no add) is
 * asked once. (test/verify/read-committed-run.test.ts failed with INVALID_TXN_STATE while the
 * retry kept the first guard, which the previous transaction's marker had voided.)
 */

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { toProducerId } from '../../../src/common/types.js'
import type { TransactionCoordinator } from '../../../src/coordinator/transaction/transaction-coordinator.js'
import {
  CoordinatorTransactionVerifier,
  type VerifierHost,
} from '../../../src/coordinator/transaction/transaction-verifier.js'
import { ErrorCode } from '../../../src/protocol/error-codes.js'
import { ManualClock } from '../../storage/helpers.js'

const CONFIG = {
  requestTimeoutMs: 30_000,
  addPartitionsRetryBackoffMs: 20,
  addPartitionsRetryBackoffMaxMs: 100,
}
const REQUEST = {
  transactionalId: 't',
  producerId: toProducerId(7n),
  producerEpoch: 1,
  topic: 'x',
  partition: 0,
}

/** A verifier over a local coordinator answering `answers` in turn; records when it was asked. */
function verifierWith(answers: number[]) {
  const clock = new ManualClock()
  const askedAtMs: number[] = []
  const next = () => {
    askedAtMs.push(clock.nowMs())
    return answers.length > 1 ? answers.shift()! : answers[0]
  }
  const coordinator = {
    stateManager: { getTransactionState: () => ErrorCode.NONE },
    addPartitions: async () => next(),
    verifyPartitions: () => [{ errorCode: next() }],
  } as unknown as TransactionCoordinator
  const host = { nodeId: 1, clock } as unknown as VerifierHost
  return { verifier: new CoordinatorTransactionVerifier(host, coordinator, CONFIG), clock, askedAtMs }
}

/** Runs `verify` to its answer, moving the manual clock on whenever it waits. */
async function settle(clock: ManualClock, answer: Promise<number>): Promise<number> {
  let done = false
  const result = answer.finally(() => {
    done = true
  })
  while (!done) {
    await new Promise((resolve) => setImmediate(resolve))
    if (!done) clock.advance(CONFIG.addPartitionsRetryBackoffMs)
  }
  return result
}

test('an add that meets CONCURRENT_TRANSACTIONS is retried every 20 ms until it succeeds', async () => {
  const { verifier, clock, askedAtMs } = verifierWith([
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.NONE,
  ])
  let guardsRestarted = 0
  const code = await settle(
    clock,
    verifier.verify({ ...REQUEST, addPartition: true, beforeRetry: () => guardsRestarted++ }),
  )
  assert.equal(code, ErrorCode.NONE)
  assert.equal(guardsRestarted, 2, "the leader's guard starts over before each retry")
  assert.deepEqual(
    askedAtMs.map((t) => t - askedAtMs[0]),
    [0, 20, 40],
  )
})

test('after 100 ms of CONCURRENT_TRANSACTIONS the producer is told NOT_ENOUGH_REPLICAS', async () => {
  const { verifier, clock, askedAtMs } = verifierWith([ErrorCode.CONCURRENT_TRANSACTIONS])
  const code = await settle(clock, verifier.verify({ ...REQUEST, addPartition: true }))
  assert.equal(code, ErrorCode.NOT_ENOUGH_REPLICAS)
  assert.deepEqual(
    askedAtMs.map((t) => t - askedAtMs[0]),
    [0, 20, 40, 60, 80, 100],
  )
})

test('other answers are not retried; a verification without add is asked once', async () => {
  const fenced = verifierWith([ErrorCode.PRODUCER_FENCED])
  assert.equal(
    await settle(fenced.clock, fenced.verifier.verify({ ...REQUEST, addPartition: true })),
    ErrorCode.INVALID_PRODUCER_EPOCH,
  )
  assert.equal(fenced.askedAtMs.length, 1)
  const verifyOnly = verifierWith([ErrorCode.CONCURRENT_TRANSACTIONS])
  assert.equal(
    await settle(verifyOnly.clock, verifyOnly.verifier.verify(REQUEST)),
    ErrorCode.NOT_ENOUGH_REPLICAS,
  )
  assert.equal(verifyOnly.askedAtMs.length, 1)
})

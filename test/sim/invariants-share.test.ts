/**
 * The simulator's share check "a settled record is never acquired again"
 * (src/sim/invariants-share.ts) on hand-made ShareAcknowledge and ShareFetch answers, apart
 * from any seed's schedule. A deposed leader that does not know it yet (seed 4 with
 * `--share --store-stalls`) delivers from the state it holds, as Kafka's would: exempt and
 * counted. The exemption is narrow: the current leader's double delivery, and one by a broker
 * that led the partition while the fetch was in its hands, are still violations.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ShareInvariants } from '../../src/sim/invariants-share.js'
import { TOPIC, Violation, type WorldView } from '../../src/sim/world-view.js'

const SHARE_FETCH = 78
const SHARE_ACKNOWLEDGE = 79
const ACCEPT = 1
const TOPIC_ID = 'topic-id'
const NEW_LEADER = 1
const OLD_LEADER = 3

interface Epochs {
  store: number
  /** Each broker's own view of partition 0: whether it leads, and in which epoch. */
  local: Map<number, { isLeader: boolean; leaderEpoch: number }>
}

/** Broker 1 leads partition 0 in epoch 2 in the store; broker 3 still believes it leads in epoch 1. */
function world(epochs: Epochs, log: string[]): WorldView {
  const brokers = new Map(
    [NEW_LEADER, OLD_LEADER].map((id) => [
      id,
      {
        replicaManager: {
          getPartition: (topic: string) => (topic === TOPIC ? epochs.local.get(id) : undefined),
        },
      },
    ]),
  )
  return {
    scheduler: { now: 1000 },
    truth: {
      image: () => ({
        topics: new Map([[TOPIC, { partitions: [{ leader: NEW_LEADER, leaderEpoch: epochs.store }] }]]),
      }),
    },
    brokers,
    log: (message: string) => log.push(message),
  } as unknown as WorldView
}

function deposedWorld(log: string[] = []): { epochs: Epochs; checks: ShareInvariants } {
  const epochs: Epochs = {
    store: 2,
    local: new Map([
      [NEW_LEADER, { isLeader: true, leaderEpoch: 2 }],
      [OLD_LEADER, { isLeader: true, leaderEpoch: 1 }],
    ]),
  }
  return { epochs, checks: new ShareInvariants(world(epochs, log), 3) }
}

const run = (check: () => void): void => check()

/** `broker` answers, without error, a ShareAcknowledge that ACCEPTs partition 0 `offset`. */
function accept(checks: ShareInvariants, broker: number, offset: bigint): void {
  const request = {
    topics: [
      {
        topicId: TOPIC_ID,
        partitions: [
          {
            partitionIndex: 0,
            acknowledgementBatches: [{ firstOffset: offset, lastOffset: offset, acknowledgeTypes: [ACCEPT] }],
          },
        ],
      },
    ],
  }
  const answer = checks.tap(broker, SHARE_ACKNOWLEDGE, request, run)
  answer?.({
    response: {
      errorCode: 0,
      responses: [{ topicId: TOPIC_ID, partitions: [{ partitionIndex: 0, errorCode: 0 }] }],
    },
  })
}

/** A ShareFetch to `broker` is dispatched; the returned function answers it with `offset` acquired. */
function fetch(checks: ShareInvariants, broker: number): (offset: bigint) => void {
  const request = {
    topics: [{ topicId: TOPIC_ID, partitions: [{ partitionIndex: 0, acknowledgementBatches: [] }] }],
  }
  const answer = checks.tap(broker, SHARE_FETCH, request, run)
  return (offset) =>
    answer?.({
      response: {
        errorCode: 0,
        responses: [
          {
            topicId: TOPIC_ID,
            partitions: [
              {
                partitionIndex: 0,
                errorCode: 0,
                acknowledgeErrorCode: 0,
                acquiredRecords: [{ firstOffset: offset, lastOffset: offset, deliveryCount: 2 }],
              },
            ],
          },
        ],
      },
    })
}

const deliveredAgain = (error: unknown): boolean =>
  error instanceof Violation &&
  /p0 offset 79, ACCEPTed \(broker 1 answered at 1000 ms\), delivered again/.test(error.message)

describe('simulator share check: a settled record delivered again', () => {
  it('exempts and counts a delivery by a leader deposed all through the fetch', () => {
    const log: string[] = []
    const { checks } = deposedWorld(log)
    accept(checks, NEW_LEADER, 79n)
    fetch(checks, OLD_LEADER)(79n)
    assert.equal(checks.stats.deposedRedeliveries, 1)
    assert.match(
      log.join('\n'),
      /deposed broker 3 delivered p0 offset 79 again \(ACCEPTed, broker 1 answered at 1000 ms\)/,
    )
  })

  it("fails the current leader's delivery of an accepted record", () => {
    const { checks } = deposedWorld()
    accept(checks, NEW_LEADER, 79n)
    assert.throws(() => fetch(checks, NEW_LEADER)(79n), deliveredAgain)
    assert.equal(checks.stats.deposedRedeliveries, 0)
  })

  it('fails a delivery by a broker that still led the partition when the fetch was dispatched', () => {
    const { epochs, checks } = deposedWorld()
    epochs.store = 1
    accept(checks, NEW_LEADER, 79n)
    const answer = fetch(checks, OLD_LEADER)
    // The store moves leadership while the fetch is in broker 3's hands: it may have acquired before.
    epochs.store = 2
    assert.throws(() => answer(79n), deliveredAgain)
  })

  it('fails a delivery by a broker that learned of the new epoch before answering', () => {
    const { epochs, checks } = deposedWorld()
    accept(checks, NEW_LEADER, 79n)
    const answer = fetch(checks, OLD_LEADER)
    epochs.local.set(OLD_LEADER, { isLeader: false, leaderEpoch: 2 })
    assert.throws(() => answer(79n), deliveredAgain)
  })
})

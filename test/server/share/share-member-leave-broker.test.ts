/**
 * Issue 33 item 2: what happens to the records a share group member holds when it leaves, on
 * one broker over raw requests, as Kafka 4.4 does it (the same steps were run by hand against
 * Kafka 4.4 with the same outcome, docs/share-groups.md). Leaving the group (heartbeat epoch
 * -1) releases nothing: the group coordinator does not tell the partition leaders, the
 * member's share session stays open and it may still acknowledge what it holds; another member
 * gets the rest once the locks run out. Closing the share session (ShareAcknowledge epoch -1,
 * as Kafka's share consumer does on close) releases what the member holds at once.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { ErrorCode } from '../../../src/protocol/error-codes.js'
import {
  ApiKey,
  type ShareAcknowledgeResponse,
  type ShareFetchResponse,
  type ShareGroupHeartbeatResponse,
} from '../../../src/protocol/generated/index.js'
import { rawCall } from '../../helpers/raw-call.js'
import type { RawClient } from '../../helpers/raw-client.js'
import {
  acquiredRanges,
  ShareBroker,
  shareAcknowledgeBody,
  shareFetchBody,
  shareHeartbeatBody,
} from '../../helpers/share-broker.js'
import { waitUntil } from '../../helpers/wait.js'

const TOPIC = 'share-member-leave'
const GROUP = 'share-member-leave-group'
const LOCK_MS = 5000
const ACCEPT = 1

describe('a share group member leaving', () => {
  let broker: ShareBroker | undefined
  let topicId = ''
  /** The next share session epoch of each member. */
  const epochs = new Map<string, number>()
  before(async () => {
    broker = await ShareBroker.start({
      properties: { 'group.share.record.lock.duration.ms': LOCK_MS },
      topics: [{ topic: TOPIC, records: 5 }],
      coordinatorGroup: GROUP,
    })
    topicId = broker.topicId(TOPIC)
  })
  after(async () => {
    await broker?.stop()
  })

  const connect = () => (broker as ShareBroker).connect()

  const heartbeat = (raw: RawClient, memberId: string, memberEpoch: number) =>
    rawCall<ShareGroupHeartbeatResponse>(
      raw,
      ApiKey.ShareGroupHeartbeat,
      1,
      shareHeartbeatBody(GROUP, memberId, memberEpoch, [TOPIC]),
    )

  /** One share fetch of partition 0 in the member's session: the acquired ranges as first-last×count. */
  const shareFetch = async (raw: RawClient, memberId: string): Promise<string[]> => {
    const epoch = epochs.get(memberId) ?? 0
    const r = await rawCall<ShareFetchResponse>(
      raw,
      ApiKey.ShareFetch,
      1,
      shareFetchBody({ groupId: GROUP, memberId, shareSessionEpoch: epoch, topicId }),
    )
    assert.equal(r.errorCode, ErrorCode.NONE)
    epochs.set(memberId, epoch + 1)
    return acquiredRanges(r)
  }

  /** ShareAcknowledge in the member's session (or closing it with `close`): the partition's error. */
  const acknowledge = async (raw: RawClient, memberId: string, offset: number, close = false) => {
    const epoch = close ? -1 : (epochs.get(memberId) ?? 0)
    const r = await rawCall<ShareAcknowledgeResponse>(
      raw,
      ApiKey.ShareAcknowledge,
      1,
      shareAcknowledgeBody(GROUP, memberId, epoch, topicId, [
        { firstOffset: BigInt(offset), lastOffset: BigInt(offset), acknowledgeTypes: [ACCEPT] },
      ]),
    )
    assert.equal(r.errorCode, ErrorCode.NONE)
    if (!close) epochs.set(memberId, epoch + 1)
    return r.responses[0].partitions[0].errorCode
  }

  it('keeps its records locked when it leaves the group, and releases them when its share session closes', async () => {
    const [a, b, c] = [await connect(), await connect(), await connect()]
    const leaver = 'bGVhdmluZy1tZW1iZXItMDAw'
    const stayer = 'c3RheWluZy1tZW1iZXItMDAw'
    const closer = 'Y2xvc2luZy1tZW1iZXItMDAw'
    await waitUntil('the leaving member joins', 15_000, async () => {
      return (await heartbeat(a, leaver, 0)).errorCode === ErrorCode.NONE
    })
    let held: string[] = []
    await waitUntil('the leaving member acquires 0-4', 15_000, async () => {
      held = await shareFetch(a, leaver)
      return held.length > 0
    })
    const acquiredAtMs = Date.now()
    assert.deepEqual(held, ['0-4x1'])
    const left = await heartbeat(a, leaver, -1)
    assert.equal(left.errorCode, ErrorCode.NONE)
    assert.equal(left.memberEpoch, -1)
    assert.equal((await heartbeat(b, stayer, 0)).errorCode, ErrorCode.NONE)
    const right = await shareFetch(b, stayer)
    // Only meaningful while the lock still runs (a very slow run says so rather than pass).
    assert.ok(Date.now() - acquiredAtMs < LOCK_MS, 'the first fetch after the leave came within the lock')
    assert.deepEqual(right, [], 'leaving the group released nothing')
    assert.equal(await acknowledge(a, leaver, 0), ErrorCode.NONE, 'a member that left still acknowledges')

    let later: string[] = []
    await waitUntil('the lock runs out', LOCK_MS + 5000, async () => {
      later = await shareFetch(b, stayer)
      return later.length > 0
    })
    assert.ok(Date.now() - acquiredAtMs >= LOCK_MS - 100, 'released by the lock, not the leave')
    assert.deepEqual(later, ['1-4x2'])

    // The session's close (Kafka's FinalContext) releases at once, well within the lock.
    const closedAtMs = Date.now()
    assert.equal(await acknowledge(b, stayer, 1, true), ErrorCode.NONE)
    let released: string[] = []
    await waitUntil('another member gets what the closed session held', LOCK_MS / 2, async () => {
      released = await shareFetch(c, closer)
      return released.length > 0
    })
    assert.ok(Date.now() - closedAtMs < LOCK_MS, 'released by the close')
    assert.deepEqual(released, ['2-4x3'])
  })
})

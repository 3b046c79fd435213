/**
 * Issue 33 item 2: a share group's own configs on one broker, over raw requests.
 * share.heartbeat.interval.ms is the interval its members are given and
 * share.session.timeout.ms how long a silent member stays (the broker's 1.5 s here expires a
 * member of a group without it). share.isolation.level read_committed delivers only up to
 * the last stable offset and never an aborted transaction's records; read_uncommitted (the
 * default) delivers everything up to the high watermark. share.renew.acknowledge.enable false
 * answers a RENEW INVALID_RECORD_STATE (as Kafka 4.4's SharePartition), leaving the lock as it was.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Producer } from '../../../src/client/producer.js'
import { ErrorCode } from '../../../src/protocol/error-codes.js'
import {
  ApiKey,
  type IncrementalAlterConfigsResponse,
  type ShareAcknowledgeResponse,
  type ShareFetchResponse,
  type ShareGroupHeartbeatResponse,
} from '../../../src/protocol/generated/index.js'
import { rawCall } from '../../helpers/raw-call.js'
import type { RawClient } from '../../helpers/raw-client.js'
import {
  ShareBroker,
  shareAcknowledgeBody,
  shareFetchBody,
  shareHeartbeatBody,
} from '../../helpers/share-broker.js'
import { waitUntil } from '../../helpers/wait.js'

const GROUP_RESOURCE = 32
const SET = 0
const TOPIC = 'share-configs-txn'
const BROKER_SESSION_MS = 1500
const BROKER_HEARTBEAT_MS = 500

describe("a share group's configs on a broker", () => {
  let broker: ShareBroker | undefined
  let raw: RawClient | undefined
  let topicId = ''
  before(async () => {
    broker = await ShareBroker.start({
      properties: {
        'transaction.state.log.num.partitions': 1,
        'group.share.session.timeout.ms': BROKER_SESSION_MS,
        'group.share.heartbeat.interval.ms': BROKER_HEARTBEAT_MS,
      },
      topics: [{ topic: TOPIC }],
      coordinatorGroup: 'any-group',
    })
    topicId = broker.topicId(TOPIC)
    raw = await broker.connect()
  })
  after(async () => {
    await broker?.stop()
  })

  const setGroupConfig = async (groupId: string, name: string, value: string) => {
    const r = await rawCall<IncrementalAlterConfigsResponse>(
      raw as RawClient,
      ApiKey.IncrementalAlterConfigs,
      1,
      {
        resources: [
          {
            resourceType: GROUP_RESOURCE,
            resourceName: groupId,
            configs: [{ name, configOperation: SET, value }],
          },
        ],
        validateOnly: false,
      },
    )
    assert.equal(r.responses[0].errorCode, ErrorCode.NONE, r.responses[0].errorMessage ?? '')
  }

  const heartbeat = (groupId: string, memberId: string, memberEpoch: number) =>
    rawCall<ShareGroupHeartbeatResponse>(
      raw as RawClient,
      ApiKey.ShareGroupHeartbeat,
      1,
      shareHeartbeatBody(groupId, memberId, memberEpoch, [TOPIC]),
    )

  const join = async (groupId: string, memberId: string) => {
    let joined: ShareGroupHeartbeatResponse | undefined
    await waitUntil(`${memberId} joins`, 30_000, async () => {
      joined = await heartbeat(groupId, memberId, 0)
      return joined.errorCode === ErrorCode.NONE
    })
    return joined as ShareGroupHeartbeatResponse
  }

  it('gives its members its share.heartbeat.interval.ms and keeps them its share.session.timeout.ms', async () => {
    await setGroupConfig('patient-group', 'share.session.timeout.ms', '45000')
    await setGroupConfig('patient-group', 'share.heartbeat.interval.ms', '6000')
    const plain = await join('plain-group', 'cGxhaW4tbWVtYmVyLTAwMDAw')
    const patient = await join('patient-group', 'cGF0aWVudC1tZW1iZXItMDAw')
    assert.equal(plain.heartbeatIntervalMs, BROKER_HEARTBEAT_MS, "the broker's interval")
    assert.equal(patient.heartbeatIntervalMs, 6000, "the group's interval")
    await sleep(BROKER_SESSION_MS + 1000)
    const late = await heartbeat('plain-group', 'cGxhaW4tbWVtYmVyLTAwMDAw', plain.memberEpoch)
    assert.equal(late.errorCode, ErrorCode.UNKNOWN_MEMBER_ID, "expired after the broker's session timeout")
    const kept = await heartbeat('patient-group', 'cGF0aWVudC1tZW1iZXItMDAw', patient.memberEpoch)
    assert.equal(kept.errorCode, ErrorCode.NONE, "kept by the group's session timeout")
    assert.equal(kept.heartbeatIntervalMs, 6000)
  })

  it('reads up to the last stable offset, never aborted records, with share.isolation.level read_committed', async () => {
    const bootstrap = (broker as ShareBroker).cluster.bootstrapServers
    const txn = new Producer({
      bootstrapServers: bootstrap,
      transactionalId: 'share-configs-tx',
      lingerMs: 0,
    })
    const plainProducer = new Producer({ bootstrapServers: bootstrap, lingerMs: 0 })
    const send = async (producer: Producer, value: string) =>
      (await producer.send({ topic: TOPIC, partition: 0, value: Buffer.from(value) })).offset
    try {
      await txn.initTransactions()
      txn.beginTransaction()
      const committed = [await send(txn, 'c0'), await send(txn, 'c1')]
      await txn.commitTransaction()
      txn.beginTransaction()
      const aborted = [await send(txn, 'a0'), await send(txn, 'a1')]
      await txn.abortTransaction()
      const plainOffset = await send(plainProducer, 'p0')
      txn.beginTransaction()
      const open = await send(txn, 'o0')
      const afterOpen = await send(plainProducer, 'p1')

      await setGroupConfig('committed-group', 'share.isolation.level', 'read_committed')
      const readCommitted = await fetchAll('committed-group', 'Y29tbWl0dGVkLW1lbWJlci0w', 3)
      assert.deepEqual(
        readCommitted,
        [...committed, plainOffset],
        'no aborted record, nothing past the open txn',
      )
      const readUncommitted = await fetchAll('uncommitted-group', 'dW5jb21taXR0ZWQtbWVtYmVy', 7)
      assert.deepEqual(readUncommitted, [...committed, ...aborted, plainOffset, open, afterOpen])

      await txn.commitTransaction()
      const more = await fetchAll('committed-group', 'Y29tbWl0dGVkLW1lbWJlci0w', 2)
      assert.deepEqual(more, [open, afterOpen], 'the committed transaction and what followed it')
    } finally {
      await txn.close()
      await plainProducer.close()
    }
  })

  it('refuses RENEW as INVALID_RECORD_STATE with share.renew.acknowledge.enable false', async () => {
    await setGroupConfig('no-renew-group', 'share.renew.acknowledge.enable', 'false')
    const renew = async (groupId: string, memberId: string, offset: number, types: number[]) => {
      const r = await rawCall<ShareAcknowledgeResponse>(raw as RawClient, ApiKey.ShareAcknowledge, 2, {
        ...shareAcknowledgeBody(groupId, memberId, epochs.get(memberId) ?? 0, topicId, [
          {
            firstOffset: BigInt(offset),
            lastOffset: BigInt(offset + types.length - 1),
            acknowledgeTypes: types,
          },
        ]),
        isRenewAck: true,
      })
      assert.equal(r.errorCode, ErrorCode.NONE)
      epochs.set(memberId, (epochs.get(memberId) ?? 0) + 1)
      return r.responses[0].partitions[0].errorCode
    }
    const refusing = 'bm8tcmVuZXctbWVtYmVyLTAw'
    const allowing = 'cmVuZXctbWVtYmVyLTAwMDAw'
    const [first] = await fetchAll('no-renew-group', refusing, 1, false)
    const [same] = await fetchAll('renew-group', allowing, 1, false)
    assert.equal(first, same)
    const RENEW = 4
    const ACCEPT = 1
    assert.equal(await renew('no-renew-group', refusing, first, [RENEW]), ErrorCode.INVALID_RECORD_STATE)
    // All or nothing: the ACCEPT beside the refused RENEW is not applied either.
    assert.equal(
      await renew('no-renew-group', refusing, first, [ACCEPT, RENEW]),
      ErrorCode.INVALID_RECORD_STATE,
    )
    assert.equal(await renew('renew-group', allowing, first, [RENEW]), ErrorCode.NONE, 'the default is true')
    // The record is still the refusing member's to acknowledge.
    assert.equal(await renew('no-renew-group', refusing, first, [ACCEPT]), ErrorCode.NONE)
  })

  /** The next share session epoch of each member. */
  const epochs = new Map<string, number>()

  /** One share fetch of partition 0 by `memberId`: the offsets it acquired. */
  async function fetchOnce(groupId: string, memberId: string): Promise<number[]> {
    const epoch = epochs.get(memberId) ?? 0
    const r = await rawCall<ShareFetchResponse>(
      raw as RawClient,
      ApiKey.ShareFetch,
      1,
      shareFetchBody({ groupId, memberId, shareSessionEpoch: epoch, topicId, maxWaitMs: 200 }),
    )
    assert.equal(r.errorCode, ErrorCode.NONE)
    epochs.set(memberId, epoch + 1)
    const offsets: number[] = []
    for (const p of r.responses.flatMap((t) => t.partitions))
      for (const a of p.acquiredRecords)
        for (let o = Number(a.firstOffset); o <= Number(a.lastOffset); o++) offsets.push(o)
    return offsets
  }

  /** The offsets `memberId` acquires until it has `count`; one more fetch must find nothing else. */
  async function fetchAll(groupId: string, memberId: string, count: number, exact = true): Promise<number[]> {
    const offsets: number[] = []
    await waitUntil(`${groupId} acquires ${count} records`, 15_000, async () => {
      offsets.push(...(await fetchOnce(groupId, memberId)))
      return offsets.length >= count
    })
    if (exact) assert.deepEqual(await fetchOnce(groupId, memberId), [], `${groupId} acquires nothing more`)
    return offsets.sort((a, b) => a - b)
  }
})

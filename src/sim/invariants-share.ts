/**
 * `share`: the share group's invariants (KIP-932), from what the brokers answered (the tap
 * on the real ShareFetch and ShareAcknowledge handlers, in world.ts) and what tidelog's own
 * ShareConsumer handed to the application (share-workload.ts):
 *
 * - a record whose ACCEPT (or REJECT) a broker answered without error is never acquired
 *   again: that answer comes once the state is committed to `__share_group_state`, so no
 *   failover of the partition's leader or of the share coordinator may forget it;
 * - no delivery carries a delivery count above `group.share.delivery.count.limit`;
 * - a delivered record is the record the producer was acknowledged for at that offset;
 * - at the end (after healing, share-workload.ts waits for it) every acknowledged produced
 *   record was ACCEPTed, REJECTed, or delivered with the limit's delivery count (after which
 *   a release archives it): none lost.
 *
 * "Acquired again" is judged by when the ShareFetch was dispatched, not answered: a fetch
 * acquires between the two, and one whose answer waits (another partition's state being
 * read) may carry a record whose lock expired before another member accepted it. A fetch
 * dispatched after the ACCEPT was answered acquired after it, for certain.
 *
 * One delivery is exempt from "never acquired again": one by a deposed leader that does not
 * know it yet (its store link stalled), as Kafka's would make. A share-partition leader
 * acquires from the state it holds in memory without asking the share coordinator; only its
 * writes carry its leader epoch, and the coordinator fences them once the new leader has read
 * the state with a higher one (the old leader then drops the share-partition), so a member of
 * the old leader cannot settle what it got, and KIP-932's at-least-once delivery allows the
 * duplicate. Exempt means: the delivering broker's own leader epoch for the partition, when
 * the fetch was answered, is below the store's when it was dispatched; epochs only grow, so
 * it was deposed all through the fetch. A current leader's double delivery is never exempt;
 * exempt deliveries are counted (the summary line), not checked.
 */
import { toBrokerId } from '../common/types.js'
import { ErrorCode } from '../protocol/error-codes.js'
import type {
  ShareAcknowledgeRequest,
  ShareAcknowledgeResponse,
  ShareFetchRequest,
  ShareFetchResponse,
} from '../protocol/generated/index.js'
import { TOPIC, Violation, type WorldView } from './world-view.js'

const SHARE_FETCH = 78
const SHARE_ACKNOWLEDGE = 79
const ACCEPT = 1
const RELEASE = 2
const REJECT = 3

/** An acknowledgement answered without error: when, and by whom. */
interface Settled {
  readonly seq: number
  readonly atMs: number
  readonly broker: number
  readonly type: 'ACCEPT' | 'REJECT'
}

/** What the share checks need of the run: the store's truth and each broker's own view. */
export type ShareInvariantsHost = Pick<WorldView, 'scheduler' | 'truth' | 'brokers' | 'log'>

/** What happened to the share group's records in a run (the trace's summary line). */
export interface ShareStats {
  deliveries: number
  redeliveries: number
  accepted: number
  released: number
  rejected: number
  reachedLimit: number
  maxDeliveryCount: number
  /** Records a deposed leader delivered after they were settled elsewhere (exempt, counted). */
  deposedRedeliveries: number
}

type AckBatch = { firstOffset: bigint; lastOffset: bigint; acknowledgeTypes: number[] }

export class ShareInvariants {
  /** Orders the tap's dispatches and answers (several happen at one simulated ms). */
  private seq = 0
  /** Acknowledged produced records: `p:offset` -> value. */
  readonly acked = new Map<string, string>()
  private readonly settled = new Map<string, Settled>()
  /** Records delivered (by any broker) with the delivery count limit. */
  private readonly atLimit = new Set<string>()
  /** Records some member sent ACCEPT or REJECT for, whatever the answer. */
  private readonly finalAnswerSent = new Set<string>()
  /** Acquisitions seen per record (redeliveries are the second and later). */
  private readonly acquisitions = new Map<string, number>()
  readonly stats: ShareStats = {
    deliveries: 0,
    redeliveries: 0,
    accepted: 0,
    released: 0,
    rejected: 0,
    reachedLimit: 0,
    maxDeliveryCount: 0,
    deposedRedeliveries: 0,
  }

  constructor(
    private readonly host: ShareInvariantsHost,
    readonly deliveryCountLimit: number,
  ) {}

  /** The producer was acknowledged for `value` at `partition`/`offset` (acks=all). */
  onProduced(partition: number, offset: number, value: string): void {
    const key = keyOf(partition, offset)
    const before = this.acked.get(key)
    if (before !== undefined && before !== value)
      throw new Violation(`p${partition} offset ${offset} acknowledged for ${before} and for ${value}`)
    this.acked.set(key, value)
  }

  /** A ShareFetch or ShareAcknowledge is dispatched: its place in the order of answers. */
  onDispatch(): number {
    return ++this.seq
  }

  /**
   * A broker answered a ShareFetch dispatched at `dispatchSeq`, when the store's leader epochs
   * of the topic's partitions were `storeEpochsAtDispatch`.
   */
  onShareFetchAnswer(
    broker: number,
    dispatchSeq: number,
    storeEpochsAtDispatch: readonly number[],
    request: ShareFetchRequest,
    response: ShareFetchResponse,
  ): void {
    const answerSeq = ++this.seq
    if (response.errorCode !== ErrorCode.NONE) return
    for (const topic of response.responses)
      for (const p of topic.partitions) {
        if (p.acknowledgeErrorCode === ErrorCode.NONE) {
          const sent = request.topics
            .find((t) => t.topicId === topic.topicId)
            ?.partitions.find((q) => q.partitionIndex === p.partitionIndex)
          this.onAcksAnswered(broker, answerSeq, p.partitionIndex, sent?.acknowledgementBatches ?? [])
        }
        if (p.errorCode !== ErrorCode.NONE) continue
        const deposed =
          this.brokerEpoch(broker, p.partitionIndex) < (storeEpochsAtDispatch[p.partitionIndex] ?? -1)
        for (const range of p.acquiredRecords)
          for (let offset = Number(range.firstOffset); offset <= Number(range.lastOffset); offset++)
            this.onAcquired(broker, dispatchSeq, deposed, p.partitionIndex, offset, range.deliveryCount)
      }
  }

  /** A broker answered a ShareAcknowledge. */
  onShareAcknowledgeAnswer(
    broker: number,
    request: ShareAcknowledgeRequest,
    response: ShareAcknowledgeResponse,
  ): void {
    const answerSeq = ++this.seq
    if (response.errorCode !== ErrorCode.NONE) return
    for (const topic of response.responses)
      for (const p of topic.partitions) {
        if (p.errorCode !== ErrorCode.NONE) continue
        const sent = request.topics
          .find((t) => t.topicId === topic.topicId)
          ?.partitions.find((q) => q.partitionIndex === p.partitionIndex)
        this.onAcksAnswered(broker, answerSeq, p.partitionIndex, sent?.acknowledgementBatches ?? [])
      }
  }

  /**
   * The world's tap on a broker's ShareFetch (78) and ShareAcknowledge (79): the dispatch
   * order now, the answer's checks when it leaves the handler (`check` turns a violation
   * into the end of the run).
   */
  tap(
    broker: number,
    apiKey: number,
    request: unknown,
    check: (run: () => void) => void,
  ): ((outcome: { response: unknown } | { error: unknown }) => void) | undefined {
    if (apiKey !== SHARE_FETCH && apiKey !== SHARE_ACKNOWLEDGE) return undefined
    const dispatchSeq = this.onDispatch()
    const storeEpochsAtDispatch = apiKey === SHARE_FETCH ? this.storeEpochs() : []
    const topics = (request as ShareFetchRequest | ShareAcknowledgeRequest).topics
    for (const topic of topics)
      for (const p of topic.partitions)
        for (const batch of p.acknowledgementBatches)
          forEachAck(batch, (offset, type) => {
            if (type === ACCEPT || type === REJECT) this.finalAnswerSent.add(keyOf(p.partitionIndex, offset))
          })
    return (outcome) => {
      if (!('response' in outcome) || outcome.response === null) return
      const response = outcome.response
      check(() =>
        apiKey === SHARE_FETCH
          ? this.onShareFetchAnswer(
              broker,
              dispatchSeq,
              storeEpochsAtDispatch,
              request as ShareFetchRequest,
              response as ShareFetchResponse,
            )
          : this.onShareAcknowledgeAnswer(
              broker,
              request as ShareAcknowledgeRequest,
              response as ShareAcknowledgeResponse,
            ),
      )
    }
  }

  /** tidelog's ShareConsumer returned this record from a poll. */
  onConsumerRecord(partition: number, offset: number, value: string, deliveryCount: number): void {
    if (deliveryCount > this.deliveryCountLimit || deliveryCount < 1)
      throw new Violation(
        `a share consumer got p${partition} offset ${offset} with delivery count ${deliveryCount} (limit ${this.deliveryCountLimit})`,
      )
    const acked = this.acked.get(keyOf(partition, offset))
    if (acked !== undefined && acked !== value)
      throw new Violation(
        `a share consumer got ${value} at p${partition} offset ${offset}, where ${acked} was acknowledged`,
      )
  }

  /**
   * The acknowledged produced records not finished: not ACCEPTed or REJECTed with an answer
   * without error, not delivered with the limit's count, and not below the share-partition
   * start offset of the partition's leader now (`startOffset`, -1 if none) after a member
   * sent ACCEPT or REJECT for it. The last case is an acknowledgement whose write committed
   * while its member got no answer without error (the answer lost on a cut link): the record
   * is done, though no member was told so. A record below
   * the start offset that no member finished is not done: it was skipped.
   */
  unsettled(startOffset: (partition: number) => number): string[] {
    return [...this.acked.keys()].filter((key) => {
      if (this.settled.has(key) || this.atLimit.has(key)) return false
      const [partition, offset] = key.split(':').map(Number)
      return !(offset < startOffset(partition) && this.finalAnswerSent.has(key))
    })
  }

  /** The end of the run: none lost. */
  checkNoneLost(startOffset: (partition: number) => number): void {
    const left = this.unsettled(startOffset)
    if (left.length > 0) {
      const never = left.filter((key) => !this.acquisitions.has(key))
      throw new Violation(
        `share group: ${left.length} acknowledged record(s) neither accepted, rejected nor delivered ${this.deliveryCountLimit} times (${never.length} never delivered), e.g. ${left
          .slice(0, 5)
          .map((k) => `p${k.replace(':', ' offset ')}`)
          .join(', ')}`,
      )
    }
  }

  /** The store's leader epoch of each partition of the topic now (-1: none). */
  private storeEpochs(): number[] {
    return (this.host.truth?.image().topics.get(TOPIC)?.partitions ?? []).map((p) => p?.leaderEpoch ?? -1)
  }

  /**
   * The leader epoch `broker`'s process holds for the partition now (+Infinity if it holds
   * none: such a broker is never taken for deposed).
   */
  private brokerEpoch(broker: number, partition: number): number {
    const local = this.host.brokers.get(toBrokerId(broker))?.replicaManager?.getPartition(TOPIC, partition)
    return local?.isLeader === true ? local.leaderEpoch : Number.POSITIVE_INFINITY
  }

  private onAcquired(
    broker: number,
    dispatchSeq: number,
    deposed: boolean,
    partition: number,
    offset: number,
    deliveryCount: number,
  ): void {
    const key = keyOf(partition, offset)
    const seen = (this.acquisitions.get(key) ?? 0) + 1
    this.acquisitions.set(key, seen)
    this.stats.deliveries++
    if (seen > 1) this.stats.redeliveries++
    this.stats.maxDeliveryCount = Math.max(this.stats.maxDeliveryCount, deliveryCount)
    if (deliveryCount > this.deliveryCountLimit)
      throw new Violation(
        `broker ${broker} delivered p${partition} offset ${offset} with delivery count ${deliveryCount}, above the limit ${this.deliveryCountLimit}`,
      )
    if (deliveryCount === this.deliveryCountLimit && !this.atLimit.has(key)) {
      this.atLimit.add(key)
      this.stats.reachedLimit++
    }
    const settled = this.settled.get(key)
    if (settled !== undefined && settled.seq < dispatchSeq && deposed) {
      this.stats.deposedRedeliveries++
      this.host.log(
        `share: deposed broker ${broker} delivered p${partition} offset ${offset} again (${settled.type}ed, broker ${settled.broker} answered at ${settled.atMs} ms) with delivery count ${deliveryCount} (not checked)`,
      )
      return
    }
    if (settled !== undefined && settled.seq < dispatchSeq)
      throw new Violation(
        `p${partition} offset ${offset}, ${settled.type}ed (broker ${settled.broker} answered at ${settled.atMs} ms), delivered again by broker ${broker} with delivery count ${deliveryCount}`,
      )
  }

  private onAcksAnswered(
    broker: number,
    answerSeq: number,
    partition: number,
    batches: readonly AckBatch[],
  ): void {
    for (const batch of batches)
      forEachAck(batch, (offset, type) => {
        if (type === RELEASE) this.stats.released++
        if (type !== ACCEPT && type !== REJECT) return
        const key = keyOf(partition, offset)
        // The first answer stands: another can only be for offsets done already (passed over below SPSO).
        if (this.settled.has(key)) return
        if (type === ACCEPT) this.stats.accepted++
        else this.stats.rejected++
        this.settled.set(key, {
          seq: answerSeq,
          atMs: this.host.scheduler.now,
          broker,
          type: type === ACCEPT ? 'ACCEPT' : 'REJECT',
        })
      })
  }
}

/** Each offset of an acknowledgement batch with its type (one for all, or one per offset). */
function forEachAck(batch: AckBatch, each: (offset: number, type: number) => void): void {
  const first = Number(batch.firstOffset)
  for (let offset = first; offset <= Number(batch.lastOffset); offset++)
    each(
      offset,
      batch.acknowledgeTypes.length === 1
        ? batch.acknowledgeTypes[0]
        : batch.acknowledgeTypes[offset - first],
    )
}

function keyOf(partition: number, offset: number): string {
  return `${partition}:${offset}`
}

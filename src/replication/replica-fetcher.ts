/**
 * Followers pull from leaders: one fetcher per source broker carries every partition this
 * broker follows from it, over one connection (Kafka's ReplicaFetcherThread).
 *
 * A partition starts in the truncating state whenever its leader or leader epoch changes:
 * the fetcher asks the leader, with OffsetForLeaderEpoch, where the follower's latest epoch
 * ends on the leader and truncates anything past that (KIP-101/279), so a returning old
 * leader or a follower that took writes the new leader never had does not keep diverging
 * records. Then it fetches from its log end, appends what it gets with the leader's
 * offsets and epochs, and takes the leader's high watermark.
 *
 * Fetches go in an incremental fetch session (KIP-227, see fetch-session-handler.ts): once
 * the leader holds the partition list, an idle round trip carries no partition either way,
 * instead of every partition the fetcher follows from that leader.
 */
import { InvariantError } from '../common/assert.js'
import { ExponentialBackoff } from '../common/backoff.js'
import type { Clock, TimerHandle } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import type { Transport } from '../common/network.js'
import { type BrokerId, minOffset, type Offset, toLeaderEpoch, toOffset } from '../common/types.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { defaultFetchRequest } from '../protocol/generated/fetch-request.js'
import {
  ApiKey,
  type FetchRequest,
  type FetchResponse,
  type ListOffsetsResponse,
  type OffsetForLeaderEpochResponse,
} from '../protocol/generated/index.js'
import { ZERO_UUID } from '../protocol/primitives.js'
import { splitBatches } from '../protocol/record-batch.js'
import { BrokerClient, BrokerConnectionError } from './broker-client.js'
import { FetchSessionHandler, type SessionEntry, type SessionFetch } from './fetch-session-handler.js'
import { FollowerRoundNews } from './follower-round-news.js'
import type { Partition } from './partition.js'

/**
 * 15+: the fetch carries this broker's epoch (KIP-903), and topics go by id (13+); sessions
 * (KIP-227) need 7+.
 */
const FETCH_VERSION = 15
/** Fetch v18's "no follower high watermark" (the schema default; only sent from v18 on). */
const FETCH_HIGH_WATERMARK_UNKNOWN = 0x7fffffffffffffffn
const OFFSET_FOR_LEADER_EPOCH_VERSION = 3
const LIST_OFFSETS_VERSION = 4
const UNDEFINED_EPOCH_OFFSET = -1n
/** Kafka's replica.socket.timeout.ms default. */
const REQUEST_TIMEOUT_MS_DEFAULT = 30000

export interface FetcherSettings {
  readonly nodeId: BrokerId
  /** This broker's epoch, sent with every fetch so a leader can fence an old incarnation (-1: none). */
  readonly brokerEpoch?: () => number
  readonly clock: Clock
  readonly logger: Logger
  readonly transport: Transport
  /** Where a broker listens, from the metadata; undefined when it is not registered. */
  readonly brokerAddress: (brokerId: BrokerId) => { host: string; port: number } | undefined
  readonly fetchMaxBytes: number
  readonly fetchResponseMaxBytes: number
  readonly fetchWaitMaxMs: number
  readonly fetchMinBytes: number
  readonly fetchBackoffMs: number
  /** How long past the fetch wait a request may go unanswered before the connection is dropped. */
  readonly requestTimeoutMs?: number
}

export interface Followed {
  readonly partition: Partition
  readonly leaderEpoch: number
  truncated: boolean
  /** Skip fetching until then (after a partition error). */
  backoffUntilMs: number
  /** Until a fetch of it succeeds in this leader epoch: it is why a long poll is cut short. */
  started?: boolean
  /** Partition errors in a row, for the backoff while the leader does not serve it yet. */
  errors?: number
  /** The backoff is the short one of a leader catching up: its end cuts a long poll short. */
  shortBackoff?: boolean
  /** When follow() added it (monotonic ms), for FetcherStats' time until its first fetch. */
  addedMs?: number
  /** Whether a fetch has carried it yet. */
  sent?: boolean
}

/**
 * Errors meaning the leader has not applied the metadata this follower has (a new
 * partition's log not created yet, the new epoch not taken): gone within a metadata
 * propagation delay, so retried after a short, growing backoff instead of a full
 * replica.fetch.backoff.ms, which would leave a just-created partition unreplicated.
 */
const LEADER_CATCHING_UP = new Set<number>([
  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
  ErrorCode.NOT_LEADER_OR_FOLLOWER,
  ErrorCode.UNKNOWN_LEADER_EPOCH,
  // A topic re-created under the same name: the leader does not know the new topic id yet,
  // or still hosts the old one's replica.
  ErrorCode.UNKNOWN_TOPIC_ID,
  ErrorCode.INCONSISTENT_TOPIC_ID,
])
const SESSION_ERRORS = new Set<number>([
  ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
  ErrorCode.INVALID_FETCH_SESSION_EPOCH,
])
const CATCHING_UP_BACKOFF = new ExponentialBackoff({ initialMs: 5, maxMs: 1000 })
/** Past this many (about 1.3 s of retries), a leader that still refuses gets the full backoff. */
const CATCHING_UP_MAX_ERRORS = 8
/**
 * How long a poll runs at least, per partition it carries, before a partition that became
 * ready cuts it short (see LeaderFetcher.wake): 3,333 partitions, 667 ms (so never: the
 * poll ends first); 1,000, 200 ms; 10, 5 ms (WAKE_INTERVAL_MIN_MS). It is also the wait of
 * the polls sent while partitions keep becoming ready (see LeaderFetcher.pollWaitMs).
 */
const WAKE_INTERVAL_PER_PARTITION_MS = 0.2
/** The least of that interval: a fetcher of a few partitions does not spin on empty answers. */
const WAKE_INTERVAL_MIN_MS = 5

/**
 * A followed partition's key: its topic id and index, not its name. A topic deleted and
 * created again under the same name is another topic: keyed by name, the old topic's
 * partition and the new one's were one entry in the fetch session (fetch-session-handler.ts),
 * so the fetch that replaced one with the other sent the new topic id as a changed position
 * of the old entry and never forgot the old one. A leader whose session kept the old topic's
 * entry then answered for it, and the follower ignored those answers: it never fetched the
 * new partition, whose high watermark waited until the ISR dropped the follower
 * (replica.lag.time.max.ms, 30 s). That needs both changes between two fetches (see
 * replica-fetcher.test.ts); the stall seen under load (issue 40, item 4) came from the
 * leader's side of the session, keyed by name too (keyOf in server/handlers/fetch.ts).
 */
export function keyOf(partition: Partition): string {
  return idKey(partition.id.topicId, partition.partition)
}

function idKey(topicId: string, partition: number): string {
  return `${topicId}\u0000${partition}`
}

/** Name and index: the metadata has at most one topic under a name, so one followed partition. */
export function nameKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`
}

/** Counters the metrics layer reads. */
export interface FetcherStats {
  /**
   * Offsets below this replica's high watermark removed by truncation: committed records
   * lost. Only an unclean election makes a leader diverge below a committed offset, so this
   * is where the offsets an unclean election lost are counted (see docs/operations.md).
   */
  committedOffsetsTruncated: number
  /** Fetch requests sent to leaders. */
  fetchRequests: number
  /** Partition entries those requests carried (an incremental fetch carries only changed ones). */
  fetchPartitionsSent: number
  /** Of those requests, the full ones (opening a fetch session). */
  fullFetches: number
  /** Long polls cut short for a partition that became ready (see LeaderFetcher.wake). */
  pollsCut: number
  /** Fetches the leader refused for their session (evicted, out of step) or answered without one. */
  sessionsRefused: number
  /** Partitions followed that a fetch has carried since, and their total and longest wait for it. */
  firstFetches: number
  firstFetchWaitMsTotal: number
  firstFetchWaitMsMax: number
}

/** Exported for the simulator's mutation checks (src/sim/mutations.ts), which replace its methods. */
export class LeaderFetcher {
  private readonly partitions = new Map<string, Followed>()
  private client: BrokerClient | null = null
  private clientAddress = ''
  private running = false
  private stopped = false
  /** The client of the fetch in flight (a long poll of up to fetchWaitMaxMs), if any. */
  private polling: BrokerClient | null = null
  /** Set when a long poll was cut short on purpose: the loop goes on without a backoff. */
  private interrupted = false
  /** Ends the loop's current sleep early. */
  private wakeSleep: (() => void) | null = null
  /** When the poll in flight was sent (monotonic ms). */
  private pollSentMs = 0
  /** A wake-up waiting for the poll in flight to have run its minimum time (see wake). */
  private wakeTimer: TimerHandle | null = null
  /** The maxWaitMs of the poll in flight. */
  private pollMaxWaitMs = 0
  /** When a partition last became ready to fetch (added, or its short backoff ended; monotonic ms). */
  private lastReadyMs = Number.NEGATIVE_INFINITY
  private readonly session = new FetchSessionHandler<Followed>()
  /** The partitions ready to fetch as of the last round, each entry kept while its data holds. */
  private readonly ready = new Map<string, SessionEntry<Followed>>()
  /** Which partitions the next round looks at: an idle round looks at none. */
  private readonly news: FollowerRoundNews<Followed>
  /** Keys whose ready entry changed since the last fetch built (see FetchSessionHandler.build). */
  private readonly changed = new Set<string>()
  /** Whether warnUnasked has warned already (once per fetcher: it means a bug, not load). */
  private warnedUnasked = false

  constructor(
    private readonly leaderId: BrokerId,
    private readonly settings: FetcherSettings,
    private readonly stats: FetcherStats,
    private readonly onIdle: () => void,
  ) {
    this.news = new FollowerRoundNews(settings.clock.monotonicMs())
  }

  isFollowing(key: string, leaderEpoch: number): boolean {
    return this.partitions.get(key)?.leaderEpoch === leaderEpoch
  }

  add(key: string, followed: Followed): void {
    this.partitions.set(key, followed)
    this.news.added(key, followed)
    this.lastReadyMs = this.settings.clock.monotonicMs()
    if (!this.running) this.start()
    else this.wake()
  }

  /** The poll interval of a burst, and the least time a long poll runs before it is cut. */
  private cutIntervalMs(): number {
    return Math.max(WAKE_INTERVAL_MIN_MS, Math.ceil(this.partitions.size * WAKE_INTERVAL_PER_PARTITION_MS))
  }

  /**
   * The next fetch's maxWaitMs: replica.fetch.wait.max.ms, except while partitions keep
   * becoming ready (within the last replica.fetch.wait.max.ms), as when a topic of
   * thousands of partitions is created and its logs are added one by one for seconds. Then
   * the polls are short (cutIntervalMs) and end by themselves: a partition that becomes
   * ready waits at most that long, as with a cut, and joins the next incremental fetch,
   * while a cut closes the connection, which ends the fetch session: the fetch after it is
   * full. Cutting the long polls of such a burst cost a full fetch per cut, 1,000 partitions
   * each way (2,000-5,000 of them for a topic of 3,000 at RF 3, on main and with sessions).
   */
  private pollWaitMs(now: number): number {
    const max = this.settings.fetchWaitMaxMs
    if (now - this.lastReadyMs >= max) return max
    return Math.min(max, this.cutIntervalMs())
  }

  /**
   * A partition became ready to fetch that the fetch in flight does not carry (just added,
   * or its short backoff ended before it ever fetched): without this it would wait for the
   * long poll to end (replica.fetch.wait.max.ms) while the leader takes writes for it, and
   * a burst into a new topic would end with no follower caught up. One connection carries
   * the fetches and answers in order, so the long poll is cut by closing the connection;
   * nothing of it was applied, and the next fetch, at once, carries every partition (the
   * session is gone with the connection).
   */
  private wake(): void {
    this.wakeSleep?.()
    this.lastReadyMs = this.settings.clock.monotonicMs()
    if (this.polling === null || this.interrupted || this.wakeTimer !== null) return
    // The fetch that replaces the poll carries every partition, O(partitions) for both
    // brokers: cut polls at most once per interval growing with the partitions carried, or
    // the N partitions a new topic adds one by one (as their logs are created) cost N full
    // fetches each (3,955 fetches of up to 1,000 partitions for a topic of 3,000 at RF 3).
    // A poll that ends by itself by then (a short one of a burst, see pollWaitMs) is left to
    // end: the next fetch, incremental, carries the partition.
    const intervalMs = this.cutIntervalMs()
    if (this.pollMaxWaitMs <= intervalMs) return
    const sinceSentMs = this.settings.clock.monotonicMs() - this.pollSentMs
    const waitMs = Math.min(this.settings.fetchWaitMaxMs, intervalMs - sinceSentMs)
    if (waitMs <= 0) {
      this.interrupt()
      return
    }
    const polling = this.polling
    this.wakeTimer = this.settings.clock.setTimeout(() => {
      this.wakeTimer = null
      if (this.polling === polling) this.interrupt()
    }, waitMs)
  }

  private interrupt(): void {
    if (this.polling === null || this.interrupted) return
    this.interrupted = true
    this.stats.pollsCut++
    this.polling.close()
    if (this.client === this.polling) this.client = null
    this.polling = null
  }

  /** Something outside the fetcher changed `key`'s log: the next round looks at it. */
  touch(key: string): void {
    this.news.touched(key)
  }

  remove(key: string): void {
    this.partitions.delete(key)
    this.news.touched(key)
  }

  stop(): void {
    this.stopped = true
    this.wakeTimer?.cancel()
    this.wakeTimer = null
    this.client?.close()
    this.client = null
  }

  private start(): void {
    this.running = true
    this.run()
      .catch((error: unknown) =>
        this.settings.logger.error({ err: error, leader: this.leaderId }, 'fetcher failed'),
      )
      .finally(() => {
        this.running = false
        if (!this.stopped && this.partitions.size > 0) this.start()
        else if (this.partitions.size === 0) {
          this.stop()
          this.onIdle()
        }
      })
  }

  private async run(): Promise<void> {
    while (!this.stopped && this.partitions.size > 0) {
      try {
        const client = this.connect()
        if (!client) {
          await this.sleep(this.settings.fetchBackoffMs)
          continue
        }
        await this.truncatePending(client)
        this.news.truncationsDone()
        const fetched = await this.fetchOnce(client)
        if (!fetched) {
          const backoffRemainingMs = this.news.shortBackoffRemainingMs(this.settings.clock.monotonicMs())
          await this.sleep(
            Math.min(this.settings.fetchBackoffMs, 100, backoffRemainingMs ?? Number.POSITIVE_INFINITY),
          )
        }
      } catch (error) {
        // A bug (a truncation's invariant broken) is not a fetch failure to retry quietly:
        // start() logs it as an error.
        if (error instanceof InvariantError) throw error
        if (this.interrupted) {
          this.interrupted = false
          continue
        }
        this.settings.logger.debug({ err: error, leader: this.leaderId }, 'replica fetch failed; backing off')
        this.client?.close()
        this.client = null
        await this.sleep(this.settings.fetchBackoffMs)
      }
    }
  }

  private connect(): BrokerClient | null {
    const address = this.settings.brokerAddress(this.leaderId)
    if (!address) return null
    const label = `${address.host}:${address.port}`
    if (this.client && this.clientAddress === label) return this.client
    this.client?.close()
    // What the previous connection's last fetch did on the leader is unknown.
    this.session.handleError()
    this.client = new BrokerClient(
      address.host,
      address.port,
      `tidelog-replica-${this.settings.nodeId}`,
      this.settings.transport,
    )
    this.clientAddress = label
    return this.client
  }

  /**
   * A request that fails (closing the connection) when no answer comes within the fetch
   * wait plus requestTimeoutMs (Kafka's replica.socket.timeout.ms): a connection that died
   * without a FIN or RST (peer host gone, half-open after a partition) must not stall every
   * partition this fetcher carries forever.
   */
  private request<T>(client: BrokerClient, apiKey: number, version: number, body: unknown): Promise<T> {
    const timeoutMs =
      this.settings.fetchWaitMaxMs + (this.settings.requestTimeoutMs ?? REQUEST_TIMEOUT_MS_DEFAULT)
    return new Promise<T>((resolve, reject) => {
      const timer = this.settings.clock.setTimeout(() => {
        client.close()
        reject(new BrokerConnectionError(`no answer from broker ${this.leaderId} in ${timeoutMs} ms`))
      }, timeoutMs)
      client.request<T>(apiKey, version, body).then(
        (response) => {
          timer.cancel()
          resolve(response)
        },
        (error: unknown) => {
          timer.cancel()
          reject(error)
        },
      )
    })
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = this.settings.clock.setTimeout(() => {
        this.wakeSleep = null
        resolve()
      }, ms)
      this.wakeSleep = () => {
        this.wakeSleep = null
        timer.cancel()
        resolve()
      }
    })
  }

  /** A partition error: back off, briefly and growing while the leader catches up with the metadata. */
  private backOff(followed: Followed, errorCode: number): void {
    followed.errors = (followed.errors ?? 0) + 1
    const catchingUp =
      LEADER_CATCHING_UP.has(errorCode) &&
      followed.started !== true &&
      followed.errors <= CATCHING_UP_MAX_ERRORS
    const delayMs = catchingUp
      ? Math.min(CATCHING_UP_BACKOFF.delayMs(followed.errors), this.settings.fetchBackoffMs)
      : this.settings.fetchBackoffMs
    followed.backoffUntilMs = this.settings.clock.monotonicMs() + delayMs
    followed.shortBackoff = catchingUp
    this.news.backedOff(keyOf(followed.partition), followed)
  }

  // ---- truncation (KIP-101/279) --------------------------------------------------------------

  private async truncatePending(client: BrokerClient): Promise<void> {
    const waiting = this.news.waitingForTruncation((key, f) => this.partitions.get(key) === f)
    if (waiting.length === 0) return
    // Appends taken while leading land first: the epoch asked for and the log end compared
    // with the answer must include them (Partition.leaderAppendsLanded).
    await Promise.all(waiting.map((f) => f.partition.leaderAppendsLanded()))
    const pending = waiting.filter((f) => this.partitions.get(keyOf(f.partition)) === f && !f.truncated)
    if (pending.length === 0) return
    const withEpoch = pending.filter((f) => f.partition.log.latestEpoch !== undefined)
    for (const f of pending) if (f.partition.log.latestEpoch === undefined) f.truncated = true
    if (withEpoch.length === 0) return
    const response = await this.request<OffsetForLeaderEpochResponse>(
      client,
      ApiKey.OffsetForLeaderEpoch,
      OFFSET_FOR_LEADER_EPOCH_VERSION,
      {
        replicaId: this.settings.nodeId,
        topics: groupByTopic(withEpoch).map(([topic, list]) => ({
          topic,
          partitions: list.map((f) => ({
            partition: f.partition.partition,
            currentLeaderEpoch: f.leaderEpoch,
            leaderEpoch: f.partition.log.latestEpoch!,
          })),
        })),
      },
    )
    // The answer names topics: it is about the partitions this request asked for, which
    // may have been unfollowed (or replaced by a re-created topic's) while it was out.
    const asked = new Map(withEpoch.map((f) => [nameKey(f.partition.topic, f.partition.partition), f]))
    for (const topic of response.topics) {
      for (const result of topic.partitions) {
        const followed = asked.get(nameKey(topic.topic, result.partition))
        if (followed && this.partitions.get(keyOf(followed.partition)) === followed)
          await this.truncateTo(followed, result)
      }
    }
  }

  private async truncateTo(
    followed: Followed,
    result: OffsetForLeaderEpochResponse['topics'][number]['partitions'][number],
  ): Promise<void> {
    const { partition } = followed
    if (result.errorCode !== ErrorCode.NONE) {
      this.backOff(followed, result.errorCode)
      return
    }
    const log = partition.log
    let target: Offset
    let anotherRound = false
    if (result.endOffset === UNDEFINED_EPOCH_OFFSET) {
      target = partition.highWatermark // the leader knows no epoch of ours: Kafka's fallback
    } else {
      // From the leader (tidelog or Kafka): checked, a value out of range is a peer's bug.
      target = toOffset(Number(result.endOffset))
      if (result.leaderEpoch < (log.latestEpoch ?? -1)) {
        // The leader's answer is for an older epoch; our own end for that epoch may be lower.
        const own = log.endOffsetForEpoch(toLeaderEpoch(result.leaderEpoch))
        if (own && own.leaderEpoch !== result.leaderEpoch) {
          // We never had the leader's epoch: what we hold past our end of the epoch before it
          // diverges, but our records of that earlier epoch may still run past where the
          // leader's end. Truncate to our end for it and ask again (Kafka's
          // getOffsetTruncationState with truncationCompleted = false).
          target = own.endOffset
          anotherRound = target < log.logEndOffset
        } else if (own) target = minOffset(target, own.endOffset)
      }
    }
    if (target < log.logEndOffset) {
      const committedLost = Math.max(0, partition.highWatermark - target)
      const fields = {
        topic: partition.topic,
        partition: partition.partition,
        from: log.logEndOffset,
        to: target,
      }
      if (committedLost > 0) {
        this.stats.committedOffsetsTruncated += committedLost
        this.settings.logger.warn(
          { ...fields, highWatermark: partition.highWatermark, committedLost },
          'truncating committed records: the new leader was elected uncleanly and lacks them',
        )
      } else this.settings.logger.info(fields, 'truncating follower log to the leader epoch end offset')
      await partition.truncateTo(target)
    }
    followed.truncated = !anotherRound
  }

  // ---- fetching -------------------------------------------------------------------------------

  /** One fetch for every ready partition; false when nothing was ready to fetch. */
  private async fetchOnce(client: BrokerClient): Promise<boolean> {
    const now = this.settings.clock.monotonicMs()
    this.readyPartitions(now)
    const ready = this.ready
    if (ready.size === 0) return false
    const fetch = this.session.build(ready, [...this.changed])
    this.changed.clear()
    const maxWaitMs = this.pollWaitMs(now)
    const request = this.fetchRequest(fetch, maxWaitMs)
    this.polling = client
    this.pollSentMs = now
    this.pollMaxWaitMs = maxWaitMs
    this.interrupted = false
    // A partition whose short backoff ends during this long poll joins the next fetch at once.
    const backoffRemainingMs = this.news.shortBackoffRemainingMs(now)
    const backoffEnd =
      backoffRemainingMs === undefined
        ? undefined
        : this.settings.clock.setTimeout(() => {
            if (this.polling === client) this.wake()
          }, backoffRemainingMs)
    this.stats.fetchRequests++
    this.stats.fetchPartitionsSent += fetch.toSend.length
    if (fetch.full) this.stats.fullFetches++
    let response: FetchResponse
    try {
      response = await this.request<FetchResponse>(client, ApiKey.Fetch, FETCH_VERSION, request)
    } catch (error) {
      this.session.handleError()
      throw error
    } finally {
      backoffEnd?.cancel()
      if (this.polling === client) this.polling = null
      // The next fetch carries whatever the pending wake-up was for.
      this.wakeTimer?.cancel()
      this.wakeTimer = null
    }
    return this.onFetchResponse(client, ready, response)
  }

  /**
   * The leader's answer: the session's outcome, then every partition's data appended side by
   * side. False: back off before the next fetch (a top-level error other than a session's).
   */
  private async onFetchResponse(
    client: BrokerClient,
    ready: ReadonlyMap<string, SessionEntry<Followed>>,
    response: FetchResponse,
  ): Promise<boolean> {
    if (response.errorCode !== ErrorCode.NONE || response.sessionId === 0) this.stats.sessionsRefused++
    if (!this.session.handleResponse(response.errorCode, response.sessionId)) {
      // A session error (evicted, or out of step) costs one round trip: the next fetch is
      // full at once. Any other top-level error backs off as when nothing is ready.
      this.settings.logger.debug(
        { leader: this.leaderId, errorCode: response.errorCode },
        'fetch session refused; the next fetch is full',
      )
      return SESSION_ERRORS.has(response.errorCode)
    }
    // Each partition has its own log: append them side by side (the next fetch, which
    // reports the new log ends to the leader, goes once all of them are done), so one
    // partition's write does not hold back another's high watermark. In a session the
    // answer lists only partitions with news: one not listed has nothing new.
    const handled: Promise<void>[] = []
    for (const topic of response.responses) {
      for (const data of topic.partitions) {
        // The Followed this fetch was sent for: a partition re-followed meanwhile (a new
        // leader epoch) is a new one, which must not take the old epoch's answer.
        const key = idKey(topic.topicId, data.partitionIndex)
        const sent = ready.get(key)
        // Appended to, backing off or truncated: the next round sends what changed.
        this.news.touched(key)
        if (sent) handled.push(this.onPartitionData(client, sent.handle, data, sent.data.fetchOffset))
        else this.warnUnasked(topic.topicId, data.partitionIndex)
      }
    }
    // Every partition settles before an error is rethrown: the next fetch must not start
    // while an append is still running.
    const settled = await Promise.allSettled(handled)
    for (const outcome of settled) if (outcome.status === 'rejected') throw outcome.reason
    return true
  }

  /**
   * The partitions this round fetches, as session entries. As Kafka's fetchers: the session
   * holds the partitions fetched this round; one left out (backing off, truncating) is
   * forgotten, and sent again when it is ready. Only the partitions with news are looked at
   * (follower-round-news.ts): an idle round touches none.
   */
  private readyPartitions(now: number): void {
    const { ready, changed } = this
    for (const key of this.news.take(now, this.partitions.keys())) {
      const f = this.partitions.get(key)
      const kept = ready.get(key)
      if (f === undefined || !f.truncated || f.backoffUntilMs > now) {
        if (kept !== undefined && ready.delete(key)) changed.add(key)
        continue
      }
      // Looked at, yet the same partition at the same log end and start: nothing to send.
      const log = f.partition.log
      if (kept?.handle === f && kept.data.fetchOffset === log.logEndOffset) {
        const same = kept.data.logStartOffset === log.logStartOffset
        if (same && kept.data.partitionMaxBytes === this.settings.fetchMaxBytes) continue
      }
      changed.add(key)
      if (f.sent !== true) {
        f.sent = true
        const waitedMs = now - (f.addedMs ?? now)
        this.stats.firstFetches++
        this.stats.firstFetchWaitMsTotal += waitedMs
        this.stats.firstFetchWaitMsMax = Math.max(this.stats.firstFetchWaitMsMax, waitedMs)
      }
      ready.set(key, {
        topic: f.partition.topic,
        topicId: f.partition.id.topicId,
        partition: f.partition.partition,
        data: {
          fetchOffset: f.partition.log.logEndOffset,
          logStartOffset: f.partition.log.logStartOffset,
          currentLeaderEpoch: f.leaderEpoch,
          partitionMaxBytes: this.settings.fetchMaxBytes,
        },
        handle: f,
      })
    }
  }

  /** The Fetch request of this round: the session's partitions to send and to forget. */
  private fetchRequest(fetch: SessionFetch<Followed>, maxWaitMs: number): FetchRequest {
    return {
      ...defaultFetchRequest(),
      replicaState: {
        replicaId: this.settings.nodeId,
        replicaEpoch: BigInt(this.settings.brokerEpoch?.() ?? -1),
      },
      maxWaitMs,
      minBytes: this.settings.fetchMinBytes,
      maxBytes: this.settings.fetchResponseMaxBytes,
      isolationLevel: 0,
      sessionId: fetch.sessionId,
      sessionEpoch: fetch.sessionEpoch,
      topics: groupEntries(fetch.toSend).map((list) => ({
        topic: list[0].topic,
        topicId: list[0].topicId,
        partitions: list.map((e) => ({
          partition: e.partition,
          currentLeaderEpoch: e.data.currentLeaderEpoch,
          fetchOffset: BigInt(e.data.fetchOffset),
          lastFetchedEpoch: -1,
          logStartOffset: BigInt(e.data.logStartOffset),
          partitionMaxBytes: e.data.partitionMaxBytes,
          replicaDirectoryId: ZERO_UUID,
          // Fetch v18's follower high watermark (KIP-1166): tidelog's followers do not send it.
          highWatermark: FETCH_HIGH_WATERMARK_UNKNOWN,
        })),
      })),
      forgottenTopicsData: groupEntries(fetch.toForget).map((list) => ({
        topic: list[0].topic,
        topicId: list[0].topicId,
        partitions: list.map((e) => e.partition),
      })),
      rackId: '',
    }
  }

  /**
   * The leader answered for a partition this fetch's session does not hold: the two sides
   * disagree on the session's partitions. Ignored, such answers once hid a leader session
   * that served a re-created topic's partition under the old topic id: the follower never
   * fetched it, silently (issue 40, item 4).
   */
  private warnUnasked(topicId: string, partition: number): void {
    if (this.warnedUnasked) return
    this.warnedUnasked = true
    this.settings.logger.warn(
      { leader: this.leaderId, topicId, partition },
      'the leader answered for a partition this fetch session does not hold; ignored',
    )
  }

  private async onPartitionData(
    client: BrokerClient,
    followed: Followed,
    data: FetchResponse['responses'][number]['partitions'][number],
    fetchOffset: Offset,
  ): Promise<void> {
    const { partition } = followed
    if (!this.partitions.has(keyOf(partition)) || this.partitions.get(keyOf(partition)) !== followed) return
    // The log was cut while the fetch was out (a corrupt batch found by a read): these
    // records start past its new end; the next fetch asks from there.
    if (partition.log.logEndOffset !== fetchOffset) return
    if (data.errorCode === ErrorCode.OFFSET_OUT_OF_RANGE) {
      await this.onOutOfRange(client, followed)
      return
    }
    if (data.errorCode !== ErrorCode.NONE) {
      this.backOff(followed, data.errorCode)
      return
    }
    followed.started = true
    followed.errors = 0
    const records = data.records as Buffer | null
    // A fetch response may end with a partial batch: append the whole ones only.
    const whole =
      records && records.length > 0 ? records.subarray(0, splitBatches(records).validBytes) : Buffer.alloc(0)
    await partition.appendAsFollower(whole, Number(data.highWatermark))
  }

  /** Ahead of the leader (truncate to its end) or behind its log start (start over there). */
  private async onOutOfRange(client: BrokerClient, followed: Followed): Promise<void> {
    const { partition } = followed
    const [earliest, latest] = await Promise.all(
      [-2n, -1n].map((timestamp) => this.listOffset(client, followed, timestamp)),
    )
    // Unfollowed while the offsets were asked for (this broker may lead it now): not ours to cut.
    if (this.partitions.get(keyOf(partition)) !== followed) return
    const log = partition.log
    if (latest !== null && log.logEndOffset > latest) {
      await partition.truncateTo(latest)
    } else if (earliest !== null && log.logEndOffset < earliest) {
      this.settings.logger.warn(
        { topic: partition.topic, partition: partition.partition, from: log.logEndOffset, to: earliest },
        'follower behind the leader log start: starting over there',
      )
      await partition.truncateFullyAndStartAt(earliest)
    }
  }

  private async listOffset(
    client: BrokerClient,
    followed: Followed,
    timestamp: bigint,
  ): Promise<Offset | null> {
    const { partition } = followed
    const response = await this.request<ListOffsetsResponse>(
      client,
      ApiKey.ListOffsets,
      LIST_OFFSETS_VERSION,
      {
        replicaId: this.settings.nodeId,
        isolationLevel: 0,
        topics: [
          {
            name: partition.topic,
            partitions: [
              {
                partitionIndex: partition.partition,
                currentLeaderEpoch: followed.leaderEpoch,
                timestamp,
                maxNumOffsets: 1,
              },
            ],
          },
        ],
      },
    )
    const result = response.topics[0]?.partitions[0]
    return result && result.errorCode === ErrorCode.NONE ? toOffset(Number(result.offset)) : null
  }
}

/** Entries grouped by topic, in first-seen order. */
function groupEntries<P>(list: readonly SessionEntry<P>[]): SessionEntry<P>[][] {
  const byTopic = new Map<string, SessionEntry<P>[]>()
  for (const e of list) {
    const group = byTopic.get(e.topicId)
    if (group === undefined) byTopic.set(e.topicId, [e])
    else group.push(e)
  }
  return [...byTopic.values()]
}

function groupByTopic(list: readonly Followed[]): [string, Followed[]][] {
  const byTopic = new Map<string, Followed[]>()
  for (const f of list) {
    const group = byTopic.get(f.partition.topic)
    if (group === undefined) byTopic.set(f.partition.topic, [f])
    else group.push(f)
  }
  return [...byTopic]
}

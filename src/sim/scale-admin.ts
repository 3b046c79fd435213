/**
 * `scale`: the admin client that lays out thousands of partitions. Two CreateTopics requests
 * go at once to random live brokers through the real handler over the simulated network:
 * one topic holding half the partitions, and many 20-partition topics in one request. A
 * request that fails (connection reset by a crash, a store call timed out, no answer within
 * ADMIN_TIMEOUT_MS) is sent again for the topics not created yet, as an admin tool retries;
 * TOPIC_ALREADY_EXISTS then means an earlier attempt created it. The same client asks
 * Metadata for every topic every METADATA_POLL_MS and hands the answers to the checks: a
 * client must never see a topic with only part of its partitions.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import type { CreateTopicsResponse } from '../protocol/generated/create-topics-response.js'
import { ApiKey } from '../protocol/generated/index.js'
import { defaultMetadataRequest } from '../protocol/generated/metadata-request.js'
import type { MetadataResponse } from '../protocol/generated/metadata-response.js'
import { BrokerClient } from '../replication/broker-client.js'
import { SimNetwork } from './network.js'
import type { SimRandom } from './random.js'
import type { WorldInternals } from './world-internals.js'
import { Violation } from './world-view.js'

/** The admin client's network id (clients are never cut off, only brokers). */
const ADMIN_NODE = 700
/** Partitions of each small topic of the many-topics request. */
export const SMALL_TOPIC_PARTITIONS = 20
/** The request's own timeout (leaders serving every partition) and the client's, beyond it. */
const CREATE_TIMEOUT_MS = 30_000
const ADMIN_TIMEOUT_MS = 40_000
const RETRY_BACKOFF_MS = 500
const METADATA_POLL_MS = 1000

/** The topic layout of `totalPartitions`: one big topic, then 20-partition topics, RF 3 each. */
export function scaleLayout(totalPartitions: number): { big: [string, number]; small: [string, number][] } {
  const smallCount = Math.floor(totalPartitions / 2 / SMALL_TOPIC_PARTITIONS)
  const small: [string, number][] = Array.from({ length: smallCount }, (_, i) => [
    `scale-t${String(i).padStart(3, '0')}`,
    SMALL_TOPIC_PARTITIONS,
  ])
  return { big: ['scale-big', totalPartitions - smallCount * SMALL_TOPIC_PARTITIONS], small }
}

export class ScaleAdmin {
  /** Topic name → partitions asked for, from the moment the first request naming it is sent. */
  readonly expected = new Map<string, number>()
  readonly created = new Set<string>()
  /** When every topic was first answered created (-1: not yet), and the attempts it took. */
  allCreatedAtMs = -1
  attempts = 0
  metadataAnswers = 0
  private readonly clients = new Map<number, BrokerClient>()
  private polling = true

  constructor(
    private readonly world: WorldInternals,
    private readonly random: SimRandom,
    private readonly onMetadata: (from: number, response: MetadataResponse) => void,
  ) {
    const layout = scaleLayout(world.options.scalePartitions ?? 0)
    for (const [name, partitions] of [layout.big, ...layout.small]) this.expected.set(name, partitions)
  }

  /** Both creations at once, then the Metadata polls. */
  start(): void {
    const layout = scaleLayout(this.world.options.scalePartitions ?? 0)
    this.world.log(
      `scale: soon CreateTopics ${layout.big[0]} (${layout.big[1]} partitions) and, at once, ${layout.small.length} topics of ${SMALL_TOPIC_PARTITIONS} partitions; RF 3`,
    )
    // Sent once the faults may have begun (the first comes 0.5-1.5 s in): creation under faults.
    this.world.scheduler.schedule(this.random.int(300, 3000), () => {
      this.create([layout.big[0]])
      this.create(layout.small.map(([name]) => name))
    })
    const poll = (): void => {
      if (!this.polling) return
      this.pollMetadata()
      this.world.scheduler.schedule(METADATA_POLL_MS, poll)
    }
    this.world.scheduler.schedule(METADATA_POLL_MS, poll)
  }

  /** The polls stop at the heal; a creation still under way goes on (the liveness phase waits for it). */
  stopPolling(): void {
    this.polling = false
  }

  private liveBroker(): number | null {
    const live = this.world.brokerIds.filter((id) => this.world.isUp(id))
    return live.length === 0 ? null : this.random.pick(live)
  }

  private client(brokerId: number): BrokerClient {
    let client = this.clients.get(brokerId)
    if (!client) {
      client = new BrokerClient(
        SimNetwork.hostOf(brokerId),
        9092,
        'sim-scale-admin',
        this.world.network.transportFor(ADMIN_NODE, () => true),
      )
      this.clients.set(brokerId, client)
    }
    return client
  }

  /** A request with the client's own deadline: a stalled broker may never answer. */
  private request<T>(brokerId: number, apiKey: number, version: number, body: unknown): Promise<T> {
    const client = this.client(brokerId)
    return new Promise<T>((resolve, reject) => {
      const timer = this.world.scheduler.setTimeout(() => {
        if (this.clients.get(brokerId) === client) this.clients.delete(brokerId)
        client.close()
        reject(new Error(`no answer from broker ${brokerId} within ${ADMIN_TIMEOUT_MS} ms`))
      }, ADMIN_TIMEOUT_MS)
      client.request<T>(apiKey, version, body).then(
        (answer) => {
          timer.cancel()
          resolve(answer)
        },
        (error: unknown) => {
          timer.cancel()
          if (this.clients.get(brokerId) === client) this.clients.delete(brokerId)
          reject(error instanceof Error ? error : new Error(String(error)))
        },
      )
    })
  }

  private create(names: readonly string[]): void {
    if (names.length === 0) return
    const brokerId = this.liveBroker()
    if (brokerId === null) {
      this.world.scheduler.schedule(RETRY_BACKOFF_MS, () => this.create(names))
      return
    }
    this.attempts++
    const body = {
      topics: names.map((name) => ({
        name,
        numPartitions: this.expected.get(name)!,
        replicationFactor: 3,
        assignments: [],
        configs: [{ name: 'min.insync.replicas', value: '2' }],
      })),
      timeoutMs: CREATE_TIMEOUT_MS,
      validateOnly: false,
    }
    this.request<CreateTopicsResponse>(brokerId, ApiKey.CreateTopics, 5, body).then(
      (answer) => this.onCreated(brokerId, names, answer),
      (error: unknown) => {
        this.world.log(
          `scale: CreateTopics of ${names.length} topics to broker ${brokerId} failed: ${String(error)}`,
        )
        this.world.scheduler.schedule(RETRY_BACKOFF_MS, () => this.create(names))
      },
    )
  }

  private onCreated(brokerId: number, names: readonly string[], answer: CreateTopicsResponse): void {
    const again: string[] = []
    const errors = new Map<number, number>()
    for (const result of answer.topics) {
      const done =
        result.errorCode === ErrorCode.NONE ||
        result.errorCode === ErrorCode.TOPIC_ALREADY_EXISTS ||
        // Created, its leaders not all serving within the request's timeout.
        result.errorCode === ErrorCode.REQUEST_TIMED_OUT
      if (result.errorCode !== ErrorCode.NONE)
        errors.set(result.errorCode, (errors.get(result.errorCode) ?? 0) + 1)
      if (done) this.created.add(result.name)
      else again.push(result.name)
    }
    const missing = names.filter((name) => !answer.topics.some((t) => t.name === name))
    if (missing.length > 0)
      this.world.clientFailure(
        new Violation(`CreateTopics answer from broker ${brokerId} left out ${missing.join(',')}`),
      )
    this.world.log(
      `scale: CreateTopics of ${names.length} topics answered by broker ${brokerId}${errors.size > 0 ? `; error codes ${[...errors].map(([code, n]) => `${code}: ${n}`).join(', ')}` : ''}`,
    )
    if (this.created.size === this.expected.size && this.allCreatedAtMs < 0) {
      this.allCreatedAtMs = this.world.scheduler.now
      this.world.log(`scale: every topic created (${this.attempts} CreateTopics requests)`)
    }
    if (again.length > 0) this.world.scheduler.schedule(RETRY_BACKOFF_MS, () => this.create(again))
  }

  private pollMetadata(): void {
    const brokerId = this.liveBroker()
    if (brokerId === null) return
    const body = { ...defaultMetadataRequest(), topics: null, allowAutoTopicCreation: false }
    this.request<MetadataResponse>(brokerId, ApiKey.Metadata, 12, body).then(
      (answer) => {
        this.metadataAnswers++
        this.world.checkInCallback(() => this.onMetadata(brokerId, answer))
      },
      () => undefined,
    )
  }
}

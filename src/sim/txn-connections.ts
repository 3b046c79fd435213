/**
 * The simulated transactional clients' wire: one client instance's connections to the
 * brokers over the simulated network (a timed-out request's bytes still land), and
 * FindCoordinator at a random live broker. Split out of txn-producer.ts.
 */
import type { BrokerId } from '../common/types.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { ApiKey, type FindCoordinatorResponse } from '../protocol/generated/index.js'
import { BrokerClient } from '../replication/broker-client.js'
import { SimNetwork } from './network.js'
import type { SimRandom } from './random.js'
import type { WorldView } from './world-view.js'

export const REQUEST_TIMEOUT_MS = 2500
/** A timed-out request's connection is closed this long after (its bytes still land meanwhile). */
const LINGER_MS = 8000

/** Counts the errors the clients met (TxnWorkload). */
export interface ErrorCounter {
  countError(api: string, code: number): void
}

export class NoAnswer extends Error {}

/** FindCoordinator v4 (batched keys; key type 0 GROUP, 1 TRANSACTION) at a random live broker; null if none answered. */
export async function findCoordinatorOf(
  world: WorldView,
  random: SimRandom,
  workload: ErrorCounter,
  session: { conns: Connections; coordinator: number | null },
  key: string,
  keyType: number,
): Promise<number | null> {
  const live = liveBrokers(world)
  if (live.length === 0) return null
  const via = random.pick(live)
  try {
    const answer = await session.conns.request<FindCoordinatorResponse>(
      via,
      ApiKey.FindCoordinator,
      4,
      { key: '', keyType, coordinatorKeys: [key] },
      REQUEST_TIMEOUT_MS,
    )
    const found = answer.coordinators.find((c) => c.key === key)
    if (!found || found.errorCode !== ErrorCode.NONE || found.nodeId < 0) {
      if (found) workload.countError('FindCoordinator', found.errorCode)
      return null
    }
    session.coordinator = found.nodeId
    return found.nodeId
  } catch (error) {
    if (error instanceof NoAnswer) return null
    throw error
  }
}

/** Brokers up and started (clients ask them for metadata and the coordinator). */
export function liveBrokers(world: WorldView): BrokerId[] {
  return world.brokerIds.filter((id) => {
    const b = world.brokers.get(id)
    return b?.isAlive === true && b.started
  })
}

/** One client instance's connections, one per broker. */
export class Connections {
  private readonly clients = new Map<number, BrokerClient>()
  private readonly transport
  private closed = false

  constructor(
    private readonly world: WorldView,
    private readonly name: string,
    networkId: number,
  ) {
    this.transport = world.network.transportFor(networkId, () => !this.closed)
  }

  close(): void {
    this.closed = true
    for (const client of this.clients.values()) client.close()
    this.clients.clear()
  }

  /**
   * One request; rejects with NoAnswer after `timeoutMs` or on a connection error. `holdMs`
   * delays its bytes; `onLate` hears an answer that came after the client stopped waiting.
   */
  request<T>(
    nodeId: number,
    apiKey: number,
    version: number,
    body: unknown,
    timeoutMs: number,
    holdMs = 0,
    onLate?: (answer: T) => void,
  ): Promise<T> {
    let client = this.clients.get(nodeId)
    if (!client) {
      client = new BrokerClient(SimNetwork.hostOf(nodeId), 9092, this.name, this.transport)
      this.clients.set(nodeId, client)
    }
    const used = client
    return new Promise<T>((resolve, reject) => {
      let settled = false
      const timer = this.world.scheduler.schedule(timeoutMs, () => {
        if (settled) return
        settled = true
        // Set aside, not closed: what was sent still lands; closed later.
        if (this.clients.get(nodeId) === used) this.clients.delete(nodeId)
        this.world.scheduler.schedule(LINGER_MS, () => used.close())
        reject(new NoAnswer(`no answer from broker ${nodeId} within ${timeoutMs} ms`))
      })
      const send = (): void => {
        used.request<T>(apiKey, version, body).then(
          (value) => {
            if (settled) {
              onLate?.(value)
              return
            }
            settled = true
            timer.cancelled = true
            resolve(value)
          },
          (error: unknown) => {
            if (this.clients.get(nodeId) === used) this.clients.delete(nodeId)
            used.close()
            if (settled) return
            settled = true
            timer.cancelled = true
            reject(new NoAnswer(String(error)))
          },
        )
      }
      if (holdMs > 0) this.world.scheduler.schedule(holdMs, send)
      else send()
    })
  }
}

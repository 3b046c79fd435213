/**
 * Each broker's connections for share state requests to other brokers (the share
 * coordinators, the partition leaders' ListOffsets), on the inter-broker listener, redialled
 * when an address changes; and the time a request may take.
 */
import type { BrokerId } from '../../common/types.js'
import { BrokerClient } from '../../replication/broker-client.js'
import type { BrokerServices } from '../broker-services.js'

/** How long another broker has to answer a share state request (Kafka's request.timeout.ms default). */
export const SHARE_REQUEST_TIMEOUT_MS = 30_000

const clients = new WeakMap<BrokerServices, Map<number, { address: string; client: BrokerClient }>>()

export function clientFor(broker: BrokerServices, nodeId: BrokerId): BrokerClient | undefined {
  const dialer = broker.interBroker
  const address = dialer?.brokerAddress(nodeId)
  if (!dialer || !address) return undefined
  let known = clients.get(broker)
  if (!known) {
    known = new Map()
    clients.set(broker, known)
  }
  const key = `${address.host}:${address.port}`
  const existing = known.get(nodeId)
  if (existing?.address === key) return existing.client
  existing?.client.close()
  const client = new BrokerClient(
    address.host,
    address.port,
    `broker-${broker.nodeId}-share`,
    dialer.transport,
  )
  known.set(nodeId, { address: key, client })
  return client
}

/** Forgets a connection that failed or hung: the next request dials again. */
export function dropClient(broker: BrokerServices, nodeId: BrokerId, client: BrokerClient): void {
  const known = clients.get(broker)
  if (known?.get(nodeId)?.client === client) known.delete(nodeId)
  client.close()
}

export function withTimeout<T>(
  broker: BrokerServices,
  promise: Promise<T>,
  timeoutMs = SHARE_REQUEST_TIMEOUT_MS,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = broker.clock.setTimeout(() => reject(new Error('share state request timed out')), timeoutMs)
    promise.then(
      (value) => {
        timer.cancel()
        resolve(value)
      },
      (error: unknown) => {
        timer.cancel()
        reject(error)
      },
    )
  })
}

/** Waits `ms` on the broker's clock. */
export function sleep(broker: BrokerServices, ms: number): Promise<void> {
  return new Promise((resolve) => broker.clock.setTimeout(resolve, ms))
}

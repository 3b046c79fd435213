/**
 * The schema registries of this process, by broker: a write sent to a broker that is not the
 * writer reaches the writer's registry here, opening it if no request has yet. Kept apart
 * from registry.ts so that a broker names itself here without loading the registry.
 */
import type { BrokerId } from '../common/types.js'
import type { RegistryHost } from './types.js'

/** A broker's registry; `R` is registry.ts's SchemaRegistry (named there, not here). */
export interface RegistryPeer<R = unknown> {
  readonly host: RegistryHost
  open(): Promise<R>
}

const peers = new Set<RegistryPeer>()

/** Adds a broker's registry; the function returned removes it. */
export function addRegistryPeer(peer: RegistryPeer): () => void {
  peers.add(peer)
  return () => peers.delete(peer)
}

/** The registry of broker `nodeId` of the cluster `clusterId` in this process, if any. */
export function findRegistryPeer<R>(clusterId: string, nodeId: BrokerId): RegistryPeer<R> | undefined {
  for (const peer of peers)
    if (peer.host.nodeId === nodeId && peer.host.clusterId() === clusterId) return peer as RegistryPeer<R>
  return undefined
}

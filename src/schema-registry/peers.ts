/**
 * The schema registries of this process, by broker: a write sent to a broker that is not the
 * writer reaches the writer's registry here, opening it if no request has yet. Kept apart
 * from registry.ts so that a broker names itself here without loading the registry.
 */
import type { RegistryHost, SchemaRegistry } from './registry.js'

export interface RegistryPeer {
  readonly host: RegistryHost
  open(): Promise<SchemaRegistry>
}

const peers = new Set<RegistryPeer>()

/** Adds a broker's registry; the function returned removes it. */
export function addRegistryPeer(peer: RegistryPeer): () => void {
  peers.add(peer)
  return () => peers.delete(peer)
}

/** The registry of broker `nodeId` of the cluster `clusterId` in this process, if any. */
export function findRegistryPeer(clusterId: string, nodeId: number): RegistryPeer | undefined {
  for (const peer of peers)
    if (peer.host.nodeId === nodeId && peer.host.clusterId() === clusterId) return peer
  return undefined
}

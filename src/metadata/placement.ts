/**
 * Replica placement on topic creation, Kafka's way (AdminUtils.assignReplicasToBrokers):
 * leaders spread round robin from a random start, followers shifted so that no two
 * partitions share the same replica list pattern, and with racks, brokers interleaved by
 * rack so each partition's replicas land on as many racks as possible.
 */
import { assert } from '../common/assert.js'
import type { BrokerId, BrokerRegistration } from './cluster-image.js'

/** A source of randomness in [0, 1); injected so the simulation can seed it. */
export type Random = () => number

export function assignReplicas(
  brokers: readonly BrokerRegistration[],
  partitions: number,
  replicationFactor: number,
  random: Random,
  firstPartition = 0,
): BrokerId[][] {
  assert(
    replicationFactor >= 1 && replicationFactor <= brokers.length,
    'replication factor outside 1..brokers',
  )
  const racks = new Set(brokers.map((b) => b.rack))
  const rackAware = brokers.every((b) => b.rack !== null) && racks.size > 1
  return rackAware
    ? assignRackAware(brokers, partitions, replicationFactor, random, firstPartition)
    : assignRackUnaware(
        brokers.map((b) => b.nodeId).sort((a, b) => a - b),
        partitions,
        replicationFactor,
        random,
        firstPartition,
      )
}

function randomIndex(random: Random, n: number): number {
  return Math.floor(random() * n)
}

/** Kafka's replicaIndex: followers of the first replica, shifted by `shift`. */
function replicaIndex(first: number, shift: number, j: number, n: number): number {
  return (first + 1 + ((shift + j) % (n - 1))) % n
}

function assignRackUnaware(
  ids: readonly BrokerId[],
  partitions: number,
  replicationFactor: number,
  random: Random,
  firstPartition: number,
): BrokerId[][] {
  const n = ids.length
  const startIndex = randomIndex(random, n)
  let shift = randomIndex(random, n)
  const result: BrokerId[][] = []
  for (let p = firstPartition; p < firstPartition + partitions; p++) {
    if (p > 0 && p % n === 0) shift++
    const first = (p + startIndex) % n
    const replicas = [ids[first]]
    for (let j = 0; j < replicationFactor - 1; j++) replicas.push(ids[replicaIndex(first, shift, j, n)])
    result.push(replicas)
  }
  return result
}

/** Brokers ordered rack by rack in turn: r1b1, r2b1, r3b1, r1b2, ... (Kafka's getRackAlternatedBrokerList). */
function rackAlternated(brokers: readonly BrokerRegistration[]): {
  ids: BrokerId[]
  rackOf: Map<BrokerId, string>
} {
  const byRack = new Map<string, BrokerId[]>()
  for (const b of [...brokers].sort((x, y) => x.nodeId - y.nodeId)) {
    const rack = b.rack ?? ''
    byRack.set(rack, [...(byRack.get(rack) ?? []), b.nodeId])
  }
  const racks = [...byRack.keys()].sort()
  const ids: BrokerId[] = []
  for (let i = 0; ids.length < brokers.length; i++) {
    for (const rack of racks) {
      const list = byRack.get(rack)!
      if (i < list.length) ids.push(list[i])
    }
  }
  const rackOf = new Map(brokers.map((b) => [b.nodeId, b.rack ?? '']))
  return { ids, rackOf }
}

function assignRackAware(
  brokers: readonly BrokerRegistration[],
  partitions: number,
  replicationFactor: number,
  random: Random,
  firstPartition: number,
): BrokerId[][] {
  const { ids, rackOf } = rackAlternated(brokers)
  const n = ids.length
  const rackCount = new Set(rackOf.values()).size
  const startIndex = randomIndex(random, n)
  let shift = randomIndex(random, n)
  const result: BrokerId[][] = []
  for (let p = firstPartition; p < firstPartition + partitions; p++) {
    if (p > 0 && p % n === 0) shift++
    const first = (p + startIndex) % n
    const replicas = [ids[first]]
    const usedRacks = new Set([rackOf.get(ids[first])])
    for (let k = 0; replicas.length < replicationFactor && k < n * n; k++) {
      const candidate = ids[replicaIndex(first, shift, k, n)]
      if (replicas.includes(candidate)) continue
      // Prefer a new rack until every rack holds a replica, then allow repeats.
      if (usedRacks.has(rackOf.get(candidate)) && usedRacks.size < rackCount) continue
      replicas.push(candidate)
      usedRacks.add(rackOf.get(candidate))
    }
    assert(replicas.length === replicationFactor, 'rack-aware placement found too few brokers')
    result.push(replicas)
  }
  return result
}

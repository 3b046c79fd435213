import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { BrokerRegistration } from '../../src/metadata/cluster-image.js'
import { assignReplicas } from '../../src/metadata/placement.js'
import { toBrokerId } from '../helpers/broker-ids.js'

function brokers(n: number, rack?: (i: number) => string): BrokerRegistration[] {
  return Array.from({ length: n }, (_, i) => ({
    nodeId: toBrokerId(i),
    host: '127.0.0.1',
    port: 9092 + i,
    rack: rack ? rack(i) : null,
  }))
}

function seeded(seed: number): () => number {
  let x = seed
  return () => {
    x = (x * 1103515245 + 12345) % 2147483648
    return x / 2147483648
  }
}

test('replicas are distinct, leaders and replicas spread evenly', () => {
  const assignment = assignReplicas(brokers(5), 20, 3, seeded(1))
  const leaders = new Map<number, number>()
  const replicas = new Map<number, number>()
  for (const list of assignment) {
    assert.equal(new Set(list).size, 3)
    leaders.set(list[0], (leaders.get(list[0]) ?? 0) + 1)
    for (const id of list) replicas.set(id, (replicas.get(id) ?? 0) + 1)
  }
  assert.deepEqual([...leaders.values()], [4, 4, 4, 4, 4])
  assert.deepEqual([...replicas.values()], [12, 12, 12, 12, 12])
})

test('rack-aware placement puts each partition on as many racks as there are replicas', () => {
  const racks = ['a', 'a', 'b', 'b', 'c', 'c']
  const assignment = assignReplicas(
    brokers(6, (i) => racks[i]),
    12,
    3,
    seeded(7),
  )
  for (const list of assignment)
    assert.equal(new Set(list.map((id) => racks[id])).size, 3, `replicas ${list}`)
})

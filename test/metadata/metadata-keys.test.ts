import assert from 'node:assert/strict'
import { test } from 'node:test'
import { InvariantError } from '../../src/common/assert.js'
import { buildClusterPart, KEYS } from '../../src/metadata/metadata-keys.js'
import type { KeyValue } from '../../src/metadata/store/metadata-store.js'
import { toBrokerId } from '../helpers/broker-ids.js'

function kv(key: string, value: unknown, revision: number): KeyValue {
  return {
    key,
    value: JSON.stringify(value),
    version: 1,
    createRevision: revision,
    modRevision: revision,
    lease: null,
  }
}

function registration(nodeId: unknown): object {
  return { nodeId, host: 'h', port: 9092, rack: null }
}

test('broker ids read from the store are branded there: registrations, controller and served keys', () => {
  const part = buildClusterPart(
    [
      kv(KEYS.broker(toBrokerId(2)), registration(2), 7),
      kv(KEYS.controller, { nodeId: 2 }, 8),
      kv(KEYS.servedRange(toBrokerId(2), 'id', 1), { '1005': 3 }, 9),
      kv(KEYS.servedWhole(toBrokerId(2)), { 'id:0': 4 }, 10),
    ],
    new Map(),
  )
  assert.equal(part.controllerId, 2)
  assert.equal(part.brokers.get(toBrokerId(2))?.brokerEpoch, 7)
  assert.equal(part.servedLeaderEpochs.get(toBrokerId(2))?.get('id')?.get(1)?.get(1005), 3)
  assert.equal(part.servedLeaderEpochs.get(toBrokerId(2))?.size, 1, 'the key of before the split is not read')
})

test('a stored id that is no broker id is a bug, not a broker', () => {
  for (const bad of [-2, 1.5, 2 ** 31, '3', null]) {
    assert.throws(
      () => buildClusterPart([kv('brokers/x', registration(bad), 7)], new Map()),
      InvariantError,
      `registration ${String(bad)}`,
    )
  }
  assert.throws(() => buildClusterPart([kv(KEYS.controller, { nodeId: 0.5 }, 8)], new Map()), InvariantError)
  assert.throws(() => buildClusterPart([kv('served/x', { 'id:0': 3 }, 9)], new Map()), InvariantError)
  assert.throws(() => buildClusterPart([kv('served/x/id/0', { 0: 3 }, 9)], new Map()), InvariantError)
  assert.throws(() => buildClusterPart([kv('served/1/id/-1', { 0: 3 }, 9)], new Map()), InvariantError)
})

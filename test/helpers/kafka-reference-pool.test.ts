/**
 * The pool of shared reference clusters (kafka-reference.ts, `shared: true` under npm test):
 * a file takes the running cluster of its options, one process at a time, and gives it back
 * without stopping it. A tidelog broker stands in for the pooled Kafka cluster: taking one
 * checks only that every node answers Metadata naming all of them.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { startBroker } from './cluster.js'
import { poolKey, takeFromPool } from './kafka-reference.js'

test('options name the same pool cluster in any order, and other options another', () => {
  const key = poolKey({ nodes: 1, properties: { a: 1, b: 'x' }, features: { 'share.version': 1 } })
  assert.equal(poolKey({ features: { 'share.version': 1 }, properties: { b: 'x', a: 1 } }), key)
  assert.notEqual(poolKey({ nodes: 3, properties: { a: 1, b: 'x' }, features: { 'share.version': 1 } }), key)
  assert.notEqual(poolKey({ nodes: 1, properties: { a: 1, b: 'x' } }), key)
  assert.notEqual(
    poolKey({ nodes: 1, properties: { a: 1, b: 'x' }, features: { 'share.version': 1 }, saslListener: true }),
    key,
  )
})

test('a pool cluster is taken by one process at a time, given back by stop() without stopping it', async () => {
  const cluster = await startBroker()
  const pool = mkdtempSync(join(tmpdir(), 'kafka-reference-pool-test-'))
  try {
    const options = { nodes: 1, shared: true }
    const key = poolKey(options)
    // Stands for the nodes' state directory, which only scripts/test.sh removes.
    const dir = mkdtempSync(join(pool, 'kafka-reference-'))
    writeFileSync(join(pool, `${key}.json`), JSON.stringify({ bootstrap: cluster.bootstrapServers, dir }))
    const owner = process.pid

    const first = await takeFromPool(pool, owner, options)
    assert.ok(first)
    assert.equal(first.bootstrap, cluster.bootstrapServers)
    assert.equal(first.dir, dir)
    // The same process asking again (two clusters of the same options) gets none from the pool.
    assert.equal(await takeFromPool(pool, owner, options), null)
    await first.stop()
    assert.ok(existsSync(dir), 'giving the cluster back leaves it running')

    const again = await takeFromPool(pool, owner, options)
    assert.equal(again?.bootstrap, cluster.bootstrapServers)
    await again?.stop()

    // A lease of a live process is respected; one left by a process that is gone is taken over.
    const leaseFile = join(pool, `${key}.lease`)
    writeFileSync(leaseFile, String(process.ppid))
    assert.equal(await takeFromPool(pool, owner, options), null)
    const gone = spawnSync('true').pid
    writeFileSync(leaseFile, String(gone))
    const takenOver = await takeFromPool(pool, owner, options)
    assert.equal(takenOver?.bootstrap, cluster.bootstrapServers)
    await takenOver?.stop()
    assert.equal(existsSync(leaseFile), false, 'stop() removes the lease')
  } finally {
    await cluster.stop()
    rmSync(pool, { recursive: true, force: true })
  }
})

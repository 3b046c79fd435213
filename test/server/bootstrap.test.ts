/**
 * Issue 2's compatibility check: real clients connect over real sockets, negotiate
 * versions with ApiVersions and read the broker from Metadata.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Admin } from '@platformatic/kafka'
import { Kafka, logLevel } from 'kafkajs'
import { polyfillPromiseWithResolvers, run, withBroker } from '../helpers/cluster.js'

test('kcat -L lists the broker', async () => {
  await withBroker(async (cluster) => {
    const result = await run('kcat', ['-b', cluster.bootstrapServers, '-L', '-J'])
    assert.equal(result.code, 0, result.stderr)
    const metadata = JSON.parse(result.stdout)
    assert.equal(metadata.brokers.length, 1)
    assert.equal(metadata.brokers[0].id, 0)
    assert.equal(metadata.brokers[0].name, cluster.bootstrapServers)
  })
})

test('kafkajs admin connects and fetches cluster metadata', async () => {
  await withBroker(async (cluster) => {
    const kafka = new Kafka({ brokers: [cluster.bootstrapServers], logLevel: logLevel.NOTHING })
    const admin = kafka.admin()
    await admin.connect()
    try {
      const described = await admin.describeCluster()
      assert.equal(described.brokers.length, 1)
      assert.equal(described.controller, 0)
      assert.ok(described.clusterId.length > 0)
      assert.deepEqual(await admin.listTopics(), [])
    } finally {
      await admin.disconnect()
    }
  })
})

test('@platformatic/kafka admin connects and fetches metadata', async () => {
  polyfillPromiseWithResolvers()
  await withBroker(async (cluster) => {
    const admin = new Admin({ clientId: 'tidelog-test', bootstrapBrokers: [cluster.bootstrapServers] })
    try {
      const metadata = await admin.metadata({ topics: [] })
      assert.equal(metadata.brokers.size, 1)
      assert.equal(metadata.brokers.get(0)?.port, cluster.brokers[0].port)
    } finally {
      await admin.close()
    }
  })
})

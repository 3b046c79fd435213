/**
 * Finalized feature levels across a cluster (issue 33, item 1): `tidelog features` and raw
 * UpdateFeatures on one broker change them in the metadata store, and every broker's
 * ApiVersions reports the new levels with the same, larger epoch. With group.version at 0
 * ConsumerGroupHeartbeat answers UNSUPPORTED_VERSION on every broker (Kafka 4.4 still lists
 * the API); with share.version at 0 ShareGroupHeartbeat does. Authorization: CLUSTER ALTER.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { ApiVersionsResponse } from '../../src/protocol/generated/api-versions-response.js'
import {
  ApiKey,
  type ConsumerGroupHeartbeatResponse,
  type FindCoordinatorResponse,
  type ShareGroupHeartbeatResponse,
  type UpdateFeaturesResponse,
} from '../../src/protocol/generated/index.js'
import type { Cluster } from '../../src/server/cluster.js'
import { tidelogBin } from '../helpers/broker-process.js'
import { run, startBroker, startCluster } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { waitUntil } from '../helpers/wait.js'

const SOFTWARE = { clientSoftwareName: 'features-test', clientSoftwareVersion: '1' }

async function call<T>(cluster: Cluster, index: number, apiKey: number, version: number, body: unknown) {
  const client = await RawClient.connect(cluster.brokers[index].port)
  try {
    return await rawCall<T>(client, apiKey, version, body, 30_000)
  } finally {
    client.socket.destroy()
  }
}

/** group.version's finalized level (0 when not listed) and the epoch, as broker `index` reports them. */
async function groupVersion(cluster: Cluster, index: number): Promise<{ level: number; epoch: bigint }> {
  const answer = await call<ApiVersionsResponse>(cluster, index, ApiKey.ApiVersions, 4, SOFTWARE)
  const finalized = answer.finalizedFeatures.find((f) => f.name === 'group.version')
  return { level: finalized?.maxVersionLevel ?? 0, epoch: answer.finalizedFeaturesEpoch }
}

/** Waits until all three brokers report group.version at `level` with one epoch, and returns it. */
async function agreed(cluster: Cluster, level: number): Promise<bigint> {
  let seen: { level: number; epoch: bigint }[] = []
  await waitUntil(`every broker reports group.version ${level}`, 30_000, async () => {
    seen = await Promise.all([0, 1, 2].map((i) => groupVersion(cluster, i)))
    return seen.every((s) => s.level === level && s.epoch === seen[0].epoch)
  })
  return seen[0].epoch
}

function cli(cluster: Cluster, index: number, ...args: string[]) {
  const bootstrap = `127.0.0.1:${cluster.brokers[index].port}`
  return run(process.execPath, [tidelogBin(), 'features', ...args, '--bootstrap-server', bootstrap], {
    timeoutMs: 60_000,
  })
}

test('a feature level changed on one broker is what every broker reports, with a larger epoch', {
  timeout: 180_000,
}, async () => {
  const cluster = await startCluster({ brokers: 3, port: 0 })
  try {
    assert.equal(await agreed(cluster, 1), 0n, 'bootstrap: group.version 1, epoch 0')

    const dryRun = await cli(cluster, 0, 'downgrade', '--feature', 'group.version=0', '--dry-run')
    assert.equal(dryRun.code, 0, dryRun.stderr)
    assert.equal(dryRun.stdout, 'group.version can be downgraded to 0.\n')
    assert.equal(await agreed(cluster, 1), 0n, 'a dry run changes nothing')

    const downgrade = await cli(cluster, 0, 'downgrade', '--feature', 'group.version=0')
    assert.equal(downgrade.code, 0, downgrade.stderr)
    assert.equal(downgrade.stdout, 'group.version was downgraded to 0.\n')
    const downgradedEpoch = await agreed(cluster, 0)
    assert.ok(downgradedEpoch > 0n, `epoch ${downgradedEpoch}`)

    // Kafka 4.4 with group.version 0: the API stays listed, every heartbeat is refused.
    const versions = await call<ApiVersionsResponse>(cluster, 2, ApiKey.ApiVersions, 4, SOFTWARE)
    assert.ok(versions.apiKeys.some((k) => k.apiKey === ApiKey.ConsumerGroupHeartbeat))
    const heartbeat = await call<ConsumerGroupHeartbeatResponse>(
      cluster,
      2,
      ApiKey.ConsumerGroupHeartbeat,
      1,
      {
        groupId: 'features-group',
        memberId: 'features-member-000000',
        memberEpoch: 0,
        rebalanceTimeoutMs: 30_000,
        subscribedTopicNames: ['t'],
        topicPartitions: [],
      },
    )
    assert.equal(heartbeat.errorCode, ErrorCode.UNSUPPORTED_VERSION)

    // Back up through another broker, with the raw request (v1 names each feature).
    const upgrade = await call<UpdateFeaturesResponse>(cluster, 1, ApiKey.UpdateFeatures, 1, {
      timeoutMs: 30_000,
      featureUpdates: [
        { feature: 'group.version', maxVersionLevel: 1, upgradeType: 1, allowDowngrade: false },
      ],
      validateOnly: false,
    })
    assert.deepEqual(
      [upgrade.errorCode, upgrade.results.map((r) => [r.feature, r.errorCode])],
      [ErrorCode.NONE, [['group.version', ErrorCode.NONE]]],
    )
    const upgradedEpoch = await agreed(cluster, 1)
    assert.ok(upgradedEpoch > downgradedEpoch, `epoch ${upgradedEpoch} after ${downgradedEpoch}`)

    const described = await cli(cluster, 2, 'describe')
    assert.equal(described.code, 0, described.stderr)
    assert.ok(
      described.stdout.includes(
        `Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\tEpoch: ${upgradedEpoch}\n`,
      ),
      described.stdout,
    )
    // A level tidelog cannot run is refused, and nothing is written.
    // (streams.version 1 is the highest both Kafka 4.4 and tidelog support.)
    const refused = await cli(cluster, 0, 'upgrade', '--feature', 'streams.version=2')
    assert.equal(refused.code, 1)
    assert.match(
      refused.stdout,
      /^Could not upgrade streams\.version to 2\. The update failed for all features since the following feature had an error: Invalid update version 2 for feature streams\.version\. Local controller 0 only supports versions 0-1\n1 out of 1 operation\(s\) failed\.\n$/,
    )
    assert.equal(await agreed(cluster, 1), upgradedEpoch)

    // share.version 0 turns share groups off: a share heartbeat is refused until it is 1 again.
    let coordinator = -1
    await waitUntil('the share group has a coordinator', 30_000, async () => {
      const found = await call<FindCoordinatorResponse>(cluster, 0, ApiKey.FindCoordinator, 4, {
        keyType: 0,
        coordinatorKeys: ['features-share-group'],
      })
      const [answer] = found.coordinators
      coordinator = cluster.brokers.findIndex((b) => b.nodeId === answer.nodeId)
      return answer.errorCode === ErrorCode.NONE && coordinator >= 0
    })
    const shareHeartbeat = () =>
      call<ShareGroupHeartbeatResponse>(cluster, coordinator, ApiKey.ShareGroupHeartbeat, 1, {
        groupId: 'features-share-group',
        memberId: 'features-share-member-0',
        memberEpoch: 0,
        rackId: null,
        subscribedTopicNames: ['t'],
      })
    // The first heartbeat may meet the group coordinator still coming up (COORDINATOR_NOT_AVAILABLE).
    await waitUntil('share heartbeats served', 30_000, async () => {
      return (await shareHeartbeat()).errorCode === ErrorCode.NONE
    })
    const disabled = await cli(cluster, 0, 'disable', '--feature', 'share.version')
    assert.equal(disabled.code, 0, disabled.stderr)
    await waitUntil('share heartbeats refused', 30_000, async () => {
      return (await shareHeartbeat()).errorCode === ErrorCode.UNSUPPORTED_VERSION
    })
    const enabled = await cli(cluster, 1, 'upgrade', '--feature', 'share.version=1')
    assert.equal(enabled.code, 0, enabled.stderr)
    await waitUntil('share heartbeats served again', 30_000, async () => {
      return (await shareHeartbeat()).errorCode === ErrorCode.NONE
    })
  } finally {
    await cluster.stop()
  }
})

test('UpdateFeatures without ALTER on the cluster: CLUSTER_AUTHORIZATION_FAILED', {
  timeout: 60_000,
}, async () => {
  const cluster = await startBroker({
    properties: { 'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer' },
  })
  try {
    const answer = await call<UpdateFeaturesResponse>(cluster, 0, ApiKey.UpdateFeatures, 2, {
      timeoutMs: 30_000,
      featureUpdates: [
        { feature: 'group.version', maxVersionLevel: 0, upgradeType: 2, allowDowngrade: false },
      ],
      validateOnly: false,
    })
    assert.equal(answer.errorCode, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
  } finally {
    await cluster.stop()
  }
})

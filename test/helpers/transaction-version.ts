/**
 * The transaction version of a tidelog test cluster (transaction.version, 2 by default as
 * on Kafka 4.4; 0 for the classic protocol, version 1).
 */
import assert from 'node:assert/strict'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { ApiVersionsResponse } from '../../src/protocol/generated/api-versions-response.js'
import { ApiKey, type UpdateFeaturesResponse } from '../../src/protocol/generated/index.js'
import type { Cluster } from '../../src/server/cluster.js'
import { rawCall } from './raw-call.js'
import { RawClient } from './raw-client.js'
import { waitUntil } from './wait.js'

/**
 * UpdateFeatures of transaction.version to `level` on one broker, then waits until every
 * broker reports it: the Java producer picks the protocol from the broker it asks.
 */
export async function setTransactionVersion(cluster: Cluster, level: 0 | 2): Promise<void> {
  const ask = async <T>(index: number, apiKey: number, version: number, body: unknown): Promise<T> => {
    const client = await RawClient.connect(cluster.brokers[index].port)
    try {
      return await rawCall<T>(client, apiKey, version, body, 30_000)
    } finally {
      client.socket.destroy()
    }
  }
  const upgrade = await ask<UpdateFeaturesResponse>(0, ApiKey.UpdateFeatures, 1, {
    timeoutMs: 30_000,
    featureUpdates: [
      // A downgrade must say it is one (1 upgrade, 2 safe downgrade).
      {
        feature: 'transaction.version',
        maxVersionLevel: level,
        upgradeType: level === 2 ? 1 : 2,
        allowDowngrade: false,
      },
    ],
    validateOnly: false,
  })
  assert.equal(upgrade.errorCode, ErrorCode.NONE, upgrade.errorMessage ?? '')
  await waitUntil(`every broker reports transaction.version ${level}`, 30_000, async () => {
    const levels = await Promise.all(
      cluster.brokers.map(async (_, index) => {
        const versions = await ask<ApiVersionsResponse>(index, ApiKey.ApiVersions, 4, {
          clientSoftwareName: 'java-clients-test',
          clientSoftwareVersion: '1',
        })
        // Level 0 is disabled: Kafka leaves it out of the finalized features.
        return versions.finalizedFeatures.find((f) => f.name === 'transaction.version')?.maxVersionLevel ?? 0
      }),
    )
    return levels.every((reported) => reported === level)
  })
}

/**
 * Transaction version 2 (KIP-890 part 2) on a tidelog test cluster, which finalizes
 * transaction.version 0 by default.
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
 * UpdateFeatures to transaction.version 2 on one broker, then waits until every broker
 * reports it: the Java producer picks the protocol from the broker it asks.
 */
export async function finalizeTransactionVersion2(cluster: Cluster): Promise<void> {
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
      { feature: 'transaction.version', maxVersionLevel: 2, upgradeType: 1, allowDowngrade: false },
    ],
    validateOnly: false,
  })
  assert.equal(upgrade.errorCode, ErrorCode.NONE, upgrade.errorMessage ?? '')
  await waitUntil('every broker reports transaction.version 2', 30_000, async () => {
    const levels = await Promise.all(
      cluster.brokers.map(async (_, index) => {
        const versions = await ask<ApiVersionsResponse>(index, ApiKey.ApiVersions, 4, {
          clientSoftwareName: 'java-clients-test',
          clientSoftwareVersion: '1',
        })
        return versions.finalizedFeatures.find((f) => f.name === 'transaction.version')?.maxVersionLevel
      }),
    )
    return levels.every((level) => level === 2)
  })
}

/**
 * CreateTopics on a raw connection, for tests of what the broker answers (a closed
 * connection rejects: issue 39's symptom when a creation was over the store's limits).
 */
import assert from 'node:assert/strict'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { CreateTopicsResponse } from '../../src/protocol/generated/create-topics-response.js'
import type { ElectLeadersResponse } from '../../src/protocol/generated/elect-leaders-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import { waitFor } from './broker-process.js'
import { kcatMetadata, type MetadataView } from './metadata-view.js'
import { rawCall } from './raw-call.js'
import { RawClient } from './raw-client.js'

/** CreateTopics v5 to the broker on `port`, RF 3, waiting up to `timeoutMs` for the answer. */
export async function createTopicsRaw(
  port: number,
  topics: readonly { name: string; numPartitions: number }[],
  timeoutMs: number,
): Promise<CreateTopicsResponse> {
  const client = await RawClient.connect(port)
  try {
    return await rawCall<CreateTopicsResponse>(
      client,
      ApiKey.CreateTopics,
      5,
      {
        topics: topics.map((t) => ({
          name: t.name,
          numPartitions: t.numPartitions,
          replicationFactor: 3,
          assignments: [],
          configs: [],
        })),
        timeoutMs,
        validateOnly: false,
      },
      timeoutMs + 10_000,
    )
  } finally {
    client.socket.destroy()
  }
}

/** Whether a view has `total` partitions, each led and with its 3 replicas in sync. */
export function allInSync(total: number): (view: MetadataView) => boolean {
  return (view) => {
    const all = [...view.topics.values()].flat()
    return all.length === total && all.every((p) => p.isr.length === 3 && p.leader >= 0)
  }
}

/**
 * Waits until `total` partitions have their 3 replicas in sync, then, if any is not led by
 * its preferred replica (a session a stalled broker lost while creating moves leaderships
 * away), elects the preferred leaders through the broker on `port` and waits for them, so a
 * fault injected next is the only change. Returns that metadata. `timeoutMs` bounds the first
 * wait, half of it the second.
 */
export async function inSyncUnderPreferredLeaders(
  port: number,
  bootstrap: string,
  total: number,
  timeoutMs = 60_000,
): Promise<MetadataView> {
  const inSync = allInSync(total)
  const synced = await waitFor(
    'every partition with its 3 replicas in sync',
    async () => {
      const view = await kcatMetadata(bootstrap)
      return inSync(view) ? view : undefined
    },
    timeoutMs,
    500,
  )
  if ([...synced.topics.values()].flat().some((p) => p.leader !== p.replicas[0])) {
    const raw = await RawClient.connect(port)
    try {
      const response = await rawCall<ElectLeadersResponse>(raw, ApiKey.ElectLeaders, 2, {
        electionType: 0,
        topicPartitions: null,
        timeoutMs: 30_000,
      })
      assert.equal(response.errorCode, ErrorCode.NONE)
    } finally {
      raw.socket.destroy()
    }
  }
  return waitFor(
    'every partition led by its preferred replica',
    async () => {
      const view = await kcatMetadata(bootstrap)
      const all = [...view.topics.values()].flat()
      return inSync(view) && all.every((p) => p.leader === p.replicas[0]) ? view : undefined
    },
    timeoutMs / 2,
    500,
  )
}

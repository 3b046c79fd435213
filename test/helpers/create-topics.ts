/**
 * CreateTopics on a raw connection, for tests of what the broker answers (a closed
 * connection rejects: issue 39's symptom when a creation was over the store's limits).
 */
import type { CreateTopicsResponse } from '../../src/protocol/generated/create-topics-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
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

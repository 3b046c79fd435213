/**
 * A Produce handler that answers only when the test says so (a request in flight for as
 * long as the test likes), and the Produce frames to send it: for tests of a connection's
 * request bookkeeping (queued bytes, idleness) without a broker behind it.
 */
import { encodeRequestFrame } from '../../src/protocol/frame-encoder.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import { HandlerRegistry } from '../../src/server/handlers/registry.js'

/** A Produce request v9 of one partition holding `recordBytes` bytes of records. */
export const produceFrame = (correlationId: number, recordBytes = 10): Buffer =>
  Buffer.concat(
    encodeRequestFrame(ApiKey.Produce, 9, correlationId, 'test', {
      transactionalId: null,
      acks: -1,
      timeoutMs: 30_000,
      topicData: [
        { name: 't', topicId: '', partitionData: [{ index: 0, records: Buffer.alloc(recordBytes) }] },
      ],
    }),
  )

/** Handlers whose Produce answers wait in `answers` (call one to answer its request). */
export function heldProduceHandlers(): { handlers: HandlerRegistry; answers: (() => void)[] } {
  const answers: (() => void)[] = []
  const handlers = new HandlerRegistry([
    {
      apiKey: ApiKey.Produce,
      minVersion: 0,
      maxVersion: 12,
      handle: () =>
        new Promise((resolve) =>
          answers.push(() => resolve({ responses: [], throttleTimeMs: 0, nodeEndpoints: [] })),
        ),
    },
  ])
  return { handlers, answers }
}

/**
 * The warm-up of a broker process (tidelog.warmup.records, off by default): right after
 * start, the process runs the replicated write path on a private 2-broker cluster of its
 * own, so that V8 compiles that path before a client's first records arrive.
 *
 * Why: V8 runs a function interpreted until it has run enough to be optimized, and each
 * optimization is a compile job on a background thread. Under `--trace-opt`, the brokers
 * of bench:report compiled 130-171 functions each during the first 4 s of acks=all
 * records after CreateTopics, 83-109 in the next 4 s, 45-61 in the third and 5-13 in the
 * fourth (docs/notes/performance.md, "The first seconds"): the writer and reader
 * primitives, batch validation, the log's append, the produce and fetch handlers and
 * codecs, the replica fetcher, stream internals. On a 2-core machine shared by three
 * brokers, those compile jobs and the interpreted code until they land are the likely cost
 * of the first seconds (nothing else differs: no extra disk work, the ISR already formed).
 *
 * What it runs is the shipped code, nothing written for it: `startCluster` with two
 * brokers on loopback ports the system picks, an RF 2 acks=all topic, and tidelog's own
 * producer sending single-record requests one after another, as a paced producer does,
 * so one broker runs the leader's path (produce, a follower's fetch, high watermark) and
 * the other the follower's (fetcher, append). Its logs go to a temporary directory removed
 * at the end and its brokers log nothing. It runs after the real broker is listening, so
 * it delays no client's connection, but it competes with early clients for the CPU.
 *
 * Why off by default: measured, it moves the second and third 4 s of compiling before the
 * first topic (29-62 and 4-15 functions per broker there instead of 83-109 and 45-61) but
 * not the first: run 1 still compiled 79-150, most of them functions the warm-up had
 * optimized already (writeGroup, appendToLeader, fetchOnce). Its code did not survive into
 * the real broker's traffic (not bytecode flushing: the same with --no-flush-bytecode; few
 * deopts), and it costs a `tidelog start` about 3 s of CPU and 4-6 s at start on this
 * machine, and 95 MiB more resident memory until the memory reclaimer has run.
 *
 * Not warmed: the paths the private cluster does not take (a consumer's fetch, groups,
 * transactions, the codecs of request versions tidelog's client does not send), and
 * brokers in worker threads (each thread is an isolate of its own).
 */
import { Producer } from '../client/index.js'
import type { Logger } from '../common/logger.js'
import { silentLogger } from '../common/logger.js'
import { startCluster } from '../server/cluster.js'

const RECORD_BYTES = 1024
const TOPIC = 'warm-up'

export interface WarmUpResult {
  readonly records: number
  readonly elapsedMs: number
}

/**
 * Runs `records` acks=all produces through a private 2-broker cluster, then stops it;
 * `signal` ends it early (the process is stopping).
 */
export async function warmUp(
  records: number,
  nowMs: () => number,
  signal?: AbortSignal,
): Promise<WarmUpResult> {
  if (!(Number.isInteger(records) && records >= 0)) throw new RangeError('warm-up records must be >= 0')
  const startedMs = nowMs()
  if (records === 0) return { records: 0, elapsedMs: 0 }
  const cluster = await startCluster({
    brokers: 2,
    port: 0,
    logger: silentLogger,
    properties: {
      'default.replication.factor': 2,
      'min.insync.replicas': 2,
      'num.partitions': 1,
    },
  })
  try {
    const producer = new Producer({ bootstrapServers: cluster.bootstrapServers, acks: 'all', lingerMs: 0 })
    try {
      const value = Buffer.alloc(RECORD_BYTES, 0x61)
      let sent = 0
      while (sent < records && signal?.aborted !== true) {
        await producer.send({ topic: TOPIC, value })
        sent++
      }
      records = sent
    } finally {
      await producer.close()
    }
  } finally {
    await cluster.stop()
  }
  return { records, elapsedMs: nowMs() - startedMs }
}

/**
 * Starts the warm-up in the background and returns its stop, which ends it early and
 * resolves once its cluster is gone. A failure is logged at warn and changes nothing else:
 * the broker serves as it would have without it.
 */
export function startWarmUp(records: number, logger: Logger, nowMs: () => number): () => Promise<void> {
  const abort = new AbortController()
  const done = warmUp(records, nowMs, abort.signal).then(
    (result) => {
      if (result.records > 0) logger.info(result, 'warm-up done')
    },
    (error: unknown) => logger.warn({ err: error }, 'warm-up failed; the broker serves without it'),
  )
  return () => {
    abort.abort()
    return done
  }
}

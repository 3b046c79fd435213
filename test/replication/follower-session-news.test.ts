/**
 * The leader's bookkeeping of a follower's fetch session (follower-session-news.ts): an idle
 * round trip considers only the partitions with news, and the ISR keeps Kafka's semantics
 * (replica.lag.time.max.ms) for the partitions it skips. Real Partitions over real logs in a
 * temp directory, driven through fetchMessages with a manual clock.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { NO_OFFSET, type Offset, toOffset, toPartitionEpoch } from '../../src/common/types.js'
import type { PartitionState } from '../../src/metadata/cluster-image.js'
import {
  type FetchHost,
  type FetchPartitionRequest,
  fetchMessages,
} from '../../src/replication/fetch-messages.js'
import { FollowerSessionNews } from '../../src/replication/follower-session-news.js'
import { KafkaError } from '../../src/replication/kafka-error.js'
import { type IsrProposal, Partition } from '../../src/replication/partition.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { FetchSessionCache } from '../../src/server/fetch-session-cache.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock, simpleBatch, withTempDir } from '../storage/helpers.js'

const LAG_MS = 10_000
const FETCH_EVERY_MS = 500
const FOLLOWER = toBrokerId(2)

interface Target extends FetchPartitionRequest {
  readonly sessionPartition: {
    lastHighWatermark: Offset
    lastLogStartOffset: Offset
    lastLastStableOffset: Offset
  }
}

interface World {
  readonly clock: ManualClock
  readonly partitions: Partition[]
  readonly proposals: IsrProposal[]
  readonly news: FollowerSessionNews<Target>
  /** One incremental fetch of the session at `fetchOffsets` (default: each log end); returns the partitions it considered. */
  fetch(fetchOffsets?: readonly number[], maxWaitMs?: number): Promise<number>
  shrinkAll(): void
}

function state(partition: number): PartitionState {
  return {
    partition,
    replicas: ids(1, FOLLOWER),
    isr: ids(1, FOLLOWER),
    leader: toBrokerId(1),
    leaderEpoch: 0,
    partitionEpoch: toPartitionEpoch(0),
  }
}

async function withSession(
  count: number,
  body: (world: World) => Promise<void>,
  sweepIntervalMs = Number.POSITIVE_INFINITY,
): Promise<void> {
  await withTempDir(async (dir) => {
    const clock = new ManualClock()
    const proposals: IsrProposal[] = []
    const logs: UnifiedLog[] = []
    const partitions: Partition[] = []
    try {
      for (let index = 0; index < count; index++) {
        const log = await UnifiedLog.open({ fs: nodeFileSystem, dir: join(dir, `t-${index}`), clock })
        logs.push(log)
        partitions.push(
          new Partition({ topic: 't', partition: index, topicId: 'id' }, log, state(index), {
            localBrokerId: toBrokerId(1),
            isFenced: () => false,
            nowMs: () => clock.monotonicMs(),
            // Proposals stay pending: the test reads which ISR each partition asked for.
            alterIsr: (proposal: IsrProposal) => {
              proposals.push(proposal)
              return new Promise<boolean>(() => {})
            },
          }),
        )
      }
      const host: FetchHost = {
        clock,
        getPartition: (_topic, partition) => partitions[partition],
        getPartitionOrError: (_topic, partition) => {
          const found = partitions[partition]
          if (found === undefined) throw new KafkaError(3, 'unknown')
          return found
        },
      }
      const news = new FollowerSessionNews<Target>(FOLLOWER, clock.monotonicMs(), sweepIntervalMs)
      const fetch = async (fetchOffsets?: readonly number[], maxWaitMs = 0): Promise<number> => {
        for (const [index, partition] of partitions.entries()) {
          const fetchOffset = fetchOffsets?.[index] ?? partition.log.logEndOffset
          // The follower sends a partition again only when its position moved (KIP-227).
          const sent = sentOffsets.get(index)
          if (sent !== fetchOffset) {
            sentOffsets.set(index, fetchOffset)
            news.set(`t-${index}`, target(index, fetchOffset, seen.get(index)))
          }
        }
        const candidates = news.candidates(clock.monotonicMs())
        await fetchMessages(
          host,
          {
            reader: { kind: 'follower', replicaId: FOLLOWER, brokerEpoch: -1 },
            partitions: candidates,
            maxBytes: 1 << 20,
            minBytes: 1,
            maxWaitMs,
            firstBatchMayExceed: true,
            byTopicId: false,
            incremental: true,
            metadataImage: () => {
              throw new Error('not used')
            },
            followerSession: news,
          },
          (results) => {
            // What the handler's rememberSeen does: the client saw these offsets.
            for (const { target: t, data } of results) {
              t.sessionPartition.lastHighWatermark = data.highWatermark
              t.sessionPartition.lastLogStartOffset = data.logStartOffset
              t.sessionPartition.lastLastStableOffset = data.lastStableOffset
              seen.set(t.partition, t.sessionPartition)
            }
          },
        )
        return candidates.length
      }
      const sentOffsets = new Map<number, number>()
      const seen = new Map<number, Target['sessionPartition']>()
      await body({
        clock,
        partitions,
        proposals,
        news,
        fetch,
        shrinkAll: () => {
          for (const partition of partitions) partition.maybeShrinkIsr(LAG_MS)
        },
      })
    } finally {
      for (const log of logs) await log.close()
    }
  })
}

function target(partition: number, fetchOffset: number, seen?: Target['sessionPartition']): Target {
  return {
    topic: 't',
    topicId: 'id',
    partition,
    fetchOffset: toOffset(fetchOffset),
    partitionMaxBytes: 1 << 20,
    currentLeaderEpoch: 0,
    sessionPartition: seen ?? {
      lastHighWatermark: NO_OFFSET,
      lastLogStartOffset: NO_OFFSET,
      lastLastStableOffset: NO_OFFSET,
    },
  }
}

/** The follower partitions each proposal removes the follower from. */
function shrunk(world: World): number[] {
  return world.proposals.filter((p) => !p.isr.includes(FOLLOWER)).map((p) => p.partition)
}

describe('FollowerSessionNews', () => {
  it('an idle round trip considers no partition, and a caught-up idle follower stays in the ISR', async () => {
    await withSession(20, async (world) => {
      assert.equal(await world.fetch(), 20, 'a new session considers every partition')
      assert.equal(await world.fetch(), 20, 'and the next fetch finds them unchanged')
      let considered = 0
      for (let elapsed = 0; elapsed < 3 * LAG_MS; elapsed += FETCH_EVERY_MS) {
        world.clock.advance(FETCH_EVERY_MS)
        considered += await world.fetch()
        world.shrinkAll()
      }
      assert.equal(considered, 0, 'idle: no partition to consider')
      assert.deepEqual(shrunk(world), [], 'caught up at every fetch: never leaves the ISR')
    })
  })

  it('a stalled follower leaves the ISR of that partition only, while its session fetches on', async () => {
    await withSession(5, async (world) => {
      await world.fetch()
      world.clock.advance(FETCH_EVERY_MS)
      await world.fetch()
      const stalledSince = world.clock.now
      await world.partitions[3].appendRecordsToLeader(simpleBatch(5), 1, 1)
      // The follower keeps fetching partition 3 at 0: it never gets the 5 records.
      const offsets = [0, 0, 0, 0, 0]
      while (world.clock.now <= stalledSince + LAG_MS) {
        world.clock.advance(FETCH_EVERY_MS)
        assert.ok((await world.fetch(offsets)) <= 1, 'only the stalled partition has news')
        world.shrinkAll()
        if (world.clock.now <= stalledSince + LAG_MS) assert.deepEqual(shrunk(world), [])
      }
      assert.deepEqual(shrunk(world), [3])
    })
  })

  it('a follower that stops fetching leaves every ISR after replica.lag.time.max.ms', async () => {
    await withSession(4, async (world) => {
      await world.fetch()
      world.clock.advance(FETCH_EVERY_MS)
      await world.fetch()
      world.clock.advance(FETCH_EVERY_MS)
      await world.fetch()
      const lastFetch = world.clock.now
      world.clock.now = lastFetch + LAG_MS
      world.shrinkAll()
      assert.deepEqual(shrunk(world), [], 'exactly lag.time.max.ms since its last fetch')
      world.clock.now = lastFetch + LAG_MS + 1
      world.shrinkAll()
      assert.deepEqual(shrunk(world), [0, 1, 2, 3])
    })
  })

  it('a closed session stops its clock: its partitions are caught up as of its last fetch', async () => {
    await withSession(3, async (world) => {
      await world.fetch()
      world.clock.advance(FETCH_EVERY_MS)
      await world.fetch()
      const lastFetch = world.clock.now
      world.news.close()
      world.clock.advance(FETCH_EVERY_MS)
      world.news.onFetched(world.clock.now)
      world.clock.now = lastFetch + LAG_MS + 1
      world.shrinkAll()
      assert.deepEqual(shrunk(world), [0, 1, 2])
    })
  })

  it('a forgotten partition no longer follows the session clock', async () => {
    await withSession(2, async (world) => {
      await world.fetch()
      world.clock.advance(FETCH_EVERY_MS)
      await world.fetch()
      const forgottenAt = world.clock.now
      world.news.delete('t-1')
      while (world.clock.now <= forgottenAt + LAG_MS) {
        world.clock.advance(FETCH_EVERY_MS)
        world.news.onFetched(world.clock.now)
      }
      world.shrinkAll()
      assert.deepEqual(shrunk(world), [1])
    })
  })

  it('a follower dropped from the ISR of a skipped partition is considered at once, and rejoins', async () => {
    await withSession(3, async (world) => {
      await world.fetch()
      await world.fetch()
      world.partitions[1].updateState({ ...state(1), isr: ids(1), partitionEpoch: toPartitionEpoch(1) })
      world.clock.advance(FETCH_EVERY_MS)
      assert.equal(await world.fetch(), 1)
      assert.deepEqual(
        world.proposals.map((p) => [p.partition, [...p.isr]]),
        [[1, [1, FOLLOWER]]],
      )
    })
  })

  it('considers every partition again once per sweep interval', async () => {
    await withSession(
      3,
      async (world) => {
        await world.fetch()
        await world.fetch()
        const considered: number[] = []
        for (let fetches = 0; fetches < 4; fetches++) {
          world.clock.advance(FETCH_EVERY_MS)
          considered.push(await world.fetch())
        }
        assert.deepEqual(considered, [0, 3, 0, 3])
      },
      2 * FETCH_EVERY_MS,
    )
  })
})

describe('a waiting fetch of a follower session', () => {
  /** Counts the watchers registered on the partitions from now on. */
  function countWatches(partitions: readonly Partition[]): { registered: number } {
    const count = { registered: 0 }
    for (const partition of partitions) {
      const onLogEnd = partition.watchLogEnd.bind(partition)
      const onHighWatermark = partition.watchHighWatermark.bind(partition)
      partition.watchLogEnd = (watcher) => {
        count.registered++
        return onLogEnd(watcher)
      }
      partition.watchHighWatermark = (watcher) => {
        count.registered++
        return onHighWatermark(watcher)
      }
    }
    return count
  }
  const tick = () => new Promise((resolve) => setImmediate(resolve))

  it('registers no watcher of its own on the partitions a sweep finds unchanged; an append to one ends it', async () => {
    await withSession(
      20,
      async (world) => {
        await world.fetch()
        await world.fetch()
        const watches = countWatches(world.partitions)
        world.clock.advance(FETCH_EVERY_MS)
        let answered = false
        const swept = world.fetch(undefined, FETCH_EVERY_MS).then((considered) => {
          answered = true
          return considered
        })
        await tick()
        assert.equal(answered, false, 'nothing new: the fetch waits')
        assert.equal(watches.registered, 0, 'twenty partitions swept, no watcher registered')
        await world.partitions[7].appendRecordsToLeader(simpleBatch(2), 1, 1)
        await tick()
        assert.equal(answered, true, 'the append ended the wait before maxWaitMs')
        assert.equal(await swept, 20)
      },
      FETCH_EVERY_MS,
    )
  })

  it('ends at a new leader epoch of a clean partition, as its own watch did', async () => {
    await withSession(3, async (world) => {
      await world.fetch()
      await world.fetch()
      let answered = false
      const waiting = world.fetch(undefined, FETCH_EVERY_MS).then(() => {
        answered = true
      })
      await tick()
      assert.equal(answered, false)
      world.partitions[2].updateState({ ...state(2), leaderEpoch: 1, partitionEpoch: toPartitionEpoch(1) })
      await tick()
      assert.equal(answered, true, 'the new epoch ended the wait before maxWaitMs')
      await waiting
    })
  })
})

describe('FetchSessionCache', () => {
  it('closes a session it drops: re-created, closed, or evicted for another', () => {
    const cache = new FetchSessionCache(1, () => 7)
    const requester = { privileged: true, partitionCount: 1 }
    const first = cache.begin(0, 0, 0, requester).session!
    let closed = 0
    first.onClose = () => closed++
    const second = cache.begin(first.id, 0, 1, requester).session! // re-created with epoch 0
    assert.equal(closed, 1)
    second.onClose = () => closed++
    cache.remove(second.id)
    assert.equal(closed, 2)
    let ids = 10
    const evicting = new FetchSessionCache(1, () => ids++)
    evicting.begin(0, 0, 0, { privileged: false, partitionCount: 1 }).session!.onClose = () => closed++
    assert.ok(evicting.begin(0, 0, 1, requester).session !== null, 'a follower evicts a consumer')
    assert.equal(closed, 3)
  })
})

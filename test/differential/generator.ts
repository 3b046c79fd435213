/**
 * Generated request sequences for the differential harness: a seed gives a sequence of
 * valid and invalid requests (produce with every acks and with bad batches, idempotent
 * produce with right and wrong sequences and epochs, fetch and list offsets anywhere around
 * the log, delete records, offset commits and fetches, metadata, configs, topic creation)
 * over a small set of topics of its own. The same seed gives the same sequence: every random
 * choice is made while generating, never inside a step's body (which runs once per broker).
 */
import { ApiKey } from '../../src/protocol/generated/index.js'
import { errorCodes, type Sequence, type Step, type TargetContext } from './harness.js'
import {
  BASE_TIMESTAMP_MS,
  batch,
  corruptCrc,
  createTopics,
  deleteRecords,
  describeConfigs,
  EARLIEST,
  fetch,
  initProducerId,
  LATEST,
  listOffsets,
  MAX_TIMESTAMP,
  metadata,
  offsetCommit,
  offsetFetch,
  produce,
  RESOURCE_TOPIC,
  withMagic,
} from './requests.js'

/** mulberry32: a small, fast, seedable generator (uniform in [0, 1)). */
function random(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

interface Partition {
  readonly topic: string
  readonly index: number
}

export function generatedSequence(seed: number, stepCount: number): Sequence {
  const next = random(seed)
  const int = (min: number, max: number) => min + Math.floor(next() * (max - min + 1))
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]
  const chance = (p: number) => next() < p

  const prefix = `g${seed}`
  const topicA = `${prefix}-a`
  const topicB = `${prefix}-b`
  const missing = `${prefix}-missing`
  const partitions: Partition[] = [
    { topic: topicA, index: 0 },
    { topic: topicA, index: 1 },
    { topic: topicB, index: 0 },
  ]
  // A rough model of each partition's log end and the producer's next sequence, so that
  // offsets and sequences land near the interesting places (the generator never runs requests).
  const logEnd = new Map<string, number>(partitions.map((p) => [`${p.topic}-${p.index}`, 0]))
  const nextSequence = new Map<string, number>()
  let producerEpoch = 0
  const keyOf = (p: Partition) => `${p.topic}-${p.index}`

  const steps: Step[] = [
    {
      name: 'create topics',
      apiKey: ApiKey.CreateTopics,
      body: (ctx) =>
        createTopics(ctx, [
          { name: topicA, partitions: 2 },
          { name: topicB, configs: { 'max.message.bytes': '2000' } },
        ]),
    },
    {
      name: 'await topics',
      apiKey: ApiKey.Metadata,
      compare: false,
      body: () => metadata([topicA, topicB]),
      retryWhile: (answer) =>
        (answer.topics as { errorCode: number; partitions: { leaderId: number }[] }[]).some(
          (t) => t.errorCode !== 0 || t.partitions.some((p) => p.leaderId < 0),
        ),
    },
    // Metadata naming a leader is not yet a leader that appends: an uncompared ListOffsets
    // of every partition waits for that, as an acks=0 produce cannot be resent.
    ...partitions.map(
      (p): Step => ({
        name: `await ${p.topic}-${p.index}`,
        apiKey: ApiKey.ListOffsets,
        body: () => listOffsets(p.topic, [{ partition: p.index, timestamp: LATEST }]),
        compare: false,
        retryWhile: (answer) => errorCodes(answer).some((code) => code !== 0),
      }),
    ),
    // A group's coordinator must be looked up before its offsets are (which creates
    // __consumer_offsets on a fresh broker): clients always do.
    ...[0, 1, 2].map(
      (g): Step => ({
        name: `find coordinator of ${prefix}-group-${g}`,
        apiKey: ApiKey.FindCoordinator,
        body: () => ({ key: '', keyType: 0, coordinatorKeys: [`${prefix}-group-${g}`] }),
        compare: false,
      }),
    ),
    {
      name: 'init producer id',
      apiKey: ApiKey.InitProducerId,
      body: () => initProducerId(null),
      capture: (answer, ctx) => ctx.vars.set('pid', answer.producerId),
    },
  ]
  const pid = (ctx: TargetContext) => ctx.variable<bigint>('pid')

  for (let i = 0; i < stepCount; i++) {
    const p = chance(0.1)
      ? { topic: missing, index: 0 }
      : chance(0.05)
        ? { topic: topicA, index: 5 }
        : pick(partitions)
    const end = logEnd.get(keyOf(p)) ?? 0
    const at = `#${i}`
    const kind = int(0, 99)
    if (kind < 25) {
      const acks = pick([1, -1, -1, 0, 2])
      const count = int(1, 4)
      const big = p.topic === topicB && chance(0.3)
      const bad = chance(0.1) ? pick(['crc', 'magic'] as const) : null
      let records = batch({
        count,
        prefix: `${prefix}-${i}`,
        timestampOffsetMs: i * 100,
        ...(big ? { valueBytes: 900 } : {}),
      })
      if (bad === 'crc') records = corruptCrc(records)
      if (bad === 'magic') records = withMagic(records, 3)
      if (acks !== 2 && bad === null && !big && logEnd.has(keyOf(p))) logEnd.set(keyOf(p), end + count)
      steps.push({
        name: `${at} produce acks=${acks} ${p.topic}-${p.index} x${count}${big ? ' big' : ''}${bad ? ` ${bad}` : ''}`,
        apiKey: ApiKey.Produce,
        ...(acks === 0 ? { noResponse: true } : {}),
        body: () => produce(p.topic, p.index, records, acks),
      })
    } else if (kind < 35) {
      const count = int(1, 3)
      const expected = nextSequence.get(keyOf(p)) ?? 0
      const mode = pick(['next', 'next', 'next', 'duplicate', 'gap', 'bump', 'old-epoch'] as const)
      let sequence = expected
      let epoch = producerEpoch
      if (mode === 'duplicate') sequence = Math.max(0, expected - count)
      if (mode === 'gap') sequence = expected + int(1, 5)
      if (mode === 'bump') {
        producerEpoch++
        epoch = producerEpoch
        sequence = 0
      }
      if (mode === 'old-epoch') epoch = Math.max(0, producerEpoch - 1)
      const valid = mode === 'next' || mode === 'bump' || (mode === 'old-epoch' && producerEpoch === 0)
      if (valid && logEnd.has(keyOf(p))) {
        nextSequence.set(keyOf(p), sequence + count)
        logEnd.set(keyOf(p), end + count)
      }
      if (mode === 'bump')
        for (const other of partitions) if (keyOf(other) !== keyOf(p)) nextSequence.set(keyOf(other), 0)
      steps.push({
        name: `${at} idempotent ${p.topic}-${p.index} epoch ${epoch} seq ${sequence} x${count} (${mode})`,
        apiKey: ApiKey.Produce,
        body: (ctx) =>
          produce(
            p.topic,
            p.index,
            batch({
              count,
              prefix: `${prefix}-i${i}`,
              producerId: pid(ctx),
              producerEpoch: epoch,
              baseSequence: sequence,
              timestampOffsetMs: i * 100,
            }),
          ),
      })
    } else if (kind < 55) {
      const offset = pick([0, end, end + 1, int(0, end), -1, int(0, end + 3)])
      const isolationLevel = chance(0.2) ? 1 : 0
      const partitionMaxBytes = chance(0.2) ? int(1, 300) : 1024 * 1024
      steps.push({
        name: `${at} fetch ${p.topic}-${p.index} @${offset} max ${partitionMaxBytes}${isolationLevel ? ' read_committed' : ''}`,
        apiKey: ApiKey.Fetch,
        body: (ctx) =>
          fetch(ctx, [{ topic: p.topic, partition: p.index, offset, partitionMaxBytes }], { isolationLevel }),
      })
    } else if (kind < 67) {
      const timestamp = pick([
        LATEST,
        EARLIEST,
        MAX_TIMESTAMP,
        BASE_TIMESTAMP_MS + int(-100, stepCount * 100),
        0,
      ])
      const isolationLevel = chance(0.2) ? 1 : 0
      steps.push({
        name: `${at} list offsets ${p.topic}-${p.index} ${timestamp}${isolationLevel ? ' read_committed' : ''}`,
        apiKey: ApiKey.ListOffsets,
        body: () => listOffsets(p.topic, [{ partition: p.index, timestamp }], isolationLevel),
      })
    } else if (kind < 72) {
      const offset = pick([-1, int(0, end), end + 1, int(0, end)])
      steps.push({
        name: `${at} delete records ${p.topic}-${p.index} below ${offset}`,
        apiKey: ApiKey.DeleteRecords,
        body: () => deleteRecords(p.topic, [{ partition: p.index, offset }]),
      })
    } else if (kind < 82) {
      const group = `${prefix}-group-${int(0, 2)}`
      if (chance(0.5)) {
        const offset = int(-2, end + 2)
        const generation = chance(0.8) ? -1 : int(0, 3)
        steps.push({
          name: `${at} commit ${group} ${p.topic}-${p.index} @${offset} generation ${generation}`,
          apiKey: ApiKey.OffsetCommit,
          body: () =>
            offsetCommit(group, p.topic, [{ partition: p.index, offset }], {
              generation,
              memberId: generation < 0 ? '' : 'member',
            }),
        })
      } else {
        const topics = chance(0.3) ? null : [{ name: p.topic, partitions: [p.index, 1] }]
        steps.push({
          name: `${at} offset fetch ${group}`,
          apiKey: ApiKey.OffsetFetch,
          body: (_ctx, version) => offsetFetch(group, topics, version),
        })
      }
    } else if (kind < 88) {
      const topics = chance(0.2) ? [] : [p.topic, ...(chance(0.5) ? [pick([topicA, topicB, missing])] : [])]
      steps.push({
        name: `${at} metadata ${topics.join(',')}`,
        apiKey: ApiKey.Metadata,
        body: () => metadata([...new Set(topics)]),
      })
    } else if (kind < 94) {
      const keys = chance(0.3)
        ? null
        : [pick(['retention.ms', 'max.message.bytes', 'cleanup.policy', 'segment.bytes', 'bogus.key'])]
      const synonyms = chance(0.5)
      steps.push({
        name: `${at} describe configs ${p.topic} ${keys?.join(',') ?? 'all'}${synonyms ? ' with synonyms' : ''}`,
        apiKey: ApiKey.DescribeConfigs,
        body: () => describeConfigs([{ type: RESOURCE_TOPIC, name: p.topic, keys }], synonyms),
      })
    } else {
      const name = pick([topicA, `${prefix}-new-${i}`, `${prefix}/bad`, `${prefix}-v-${i}`])
      const partitionCount = pick([1, 2, 0, -1])
      const validateOnly = chance(0.4)
      steps.push({
        name: `${at} create ${name} partitions ${partitionCount}${validateOnly ? ' validate only' : ''}`,
        apiKey: ApiKey.CreateTopics,
        body: (ctx) => createTopics(ctx, [{ name, partitions: partitionCount }], validateOnly),
      })
    }
  }
  return { name: `seed ${seed}`, steps }
}

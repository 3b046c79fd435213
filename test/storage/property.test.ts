/**
 * Random operation sequences against a simple in-memory model (Redpanda's opfuzz idea):
 * appends (single and concurrent), truncations, rolls, clean and unclean reopenings,
 * DeleteRecords and retention must always give back exactly the bytes the model holds, in
 * order, with consecutive offsets.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import type { LeaderEpoch, Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { fromProperties, type LogConfig } from '../../src/storage/log-config.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { makeTempDir, readAll, removeDir, simpleBatch } from './helpers.js'

interface ModelBatch {
  readonly baseOffset: number
  readonly lastOffset: number
  readonly bytes: Buffer
}

interface Model {
  batches: ModelBatch[]
  startOffset: number
  logStartOffset: number
  logEndOffset: number
  highWatermark: number
  epoch: number
}

interface Real {
  log: UnifiedLog
  readonly dir: string
  readonly config: LogConfig
}

type Command = fc.AsyncCommand<Model, Real>

const batchSpec = fc.record({
  records: fc.integer({ min: 1, max: 6 }),
  valueBytes: fc.integer({ min: 0, max: 60 }),
})
const appendSpec = fc.array(batchSpec, { minLength: 1, maxLength: 3 })

async function appendTo(
  model: Model,
  real: Real,
  spec: readonly { records: number; valueBytes: number }[],
  seed: number,
) {
  const buffer = Buffer.concat(spec.map((b, i) => simpleBatch(b.records, b.valueBytes, seed + i)))
  const info = await real.log.append(buffer, { assignOffsets: true, leaderEpoch: model.epoch as LeaderEpoch })
  assert.equal(info.firstOffset, model.logEndOffset)
  let at = 0
  for (const b of spec) {
    const size = 12 + buffer.readInt32BE(at + 8)
    const baseOffset = Number(buffer.readBigInt64BE(at))
    model.batches.push({
      baseOffset,
      lastOffset: baseOffset + b.records - 1,
      bytes: Buffer.from(buffer.subarray(at, at + size)),
    })
    at += size
  }
  model.logEndOffset = info.lastOffset + 1
}

class AppendCommand implements Command {
  constructor(
    readonly spec: readonly { records: number; valueBytes: number }[],
    readonly seed: number,
    readonly newEpoch: boolean,
  ) {}
  check(): boolean {
    return true
  }
  async run(model: Model, real: Real) {
    if (this.newEpoch) model.epoch++
    await appendTo(model, real, this.spec, this.seed)
    await verify(model, real)
  }
  toString(): string {
    return `append(${JSON.stringify(this.spec)}${this.newEpoch ? ', new epoch' : ''})`
  }
}

class ConcurrentAppendsCommand implements Command {
  constructor(readonly specs: readonly (readonly { records: number; valueBytes: number }[])[]) {}
  check(): boolean {
    return true
  }
  async run(model: Model, real: Real) {
    // Issued in one tick: one write group. Each resolves with consecutive offsets in call order.
    const buffers = this.specs.map((spec, i) =>
      Buffer.concat(spec.map((b, j) => simpleBatch(b.records, b.valueBytes, i * 10 + j))),
    )
    const infos = await Promise.all(
      buffers.map((buf) =>
        real.log.append(buf, { assignOffsets: true, leaderEpoch: model.epoch as LeaderEpoch }),
      ),
    )
    for (let i = 0; i < buffers.length; i++) {
      assert.equal(infos[i].firstOffset, model.logEndOffset)
      let at = 0
      while (at < buffers[i].length) {
        const size = 12 + buffers[i].readInt32BE(at + 8)
        const baseOffset = Number(buffers[i].readBigInt64BE(at))
        const lastOffset = baseOffset + buffers[i].readInt32BE(at + 23)
        model.batches.push({ baseOffset, lastOffset, bytes: Buffer.from(buffers[i].subarray(at, at + size)) })
        at += size
      }
      model.logEndOffset = infos[i].lastOffset + 1
    }
    await verify(model, real)
  }
  toString(): string {
    return `concurrentAppends(${this.specs.length})`
  }
}

class TruncateCommand implements Command {
  constructor(readonly fraction: number) {}
  check(model: Readonly<Model>): boolean {
    return model.logEndOffset > model.logStartOffset
  }
  async run(model: Model, real: Real) {
    const target =
      model.logStartOffset + Math.floor(this.fraction * (model.logEndOffset - model.logStartOffset + 2))
    const changed = await real.log.truncateTo(target as Offset)
    assert.equal(changed, target < model.logEndOffset)
    if (changed) {
      model.batches = model.batches.filter((b) => b.lastOffset < target)
      const keptEnd =
        model.batches.at(-1) === undefined ? model.startOffset : model.batches.at(-1)!.lastOffset + 1
      // Not below the log start offset unless the target is (local-log.ts): records deleted
      // before it stay deleted, as Kafka's logStartOffset = min(target, logStartOffset)
      // (seed -725340949: a truncation to the log start inside the batch that straddles it).
      model.logEndOffset = Math.max(keptEnd, Math.min(model.logStartOffset, target))
      model.logStartOffset = Math.min(model.logStartOffset, model.logEndOffset)
      model.highWatermark = Math.min(model.highWatermark, model.logEndOffset)
    }
    await verify(model, real)
  }
  toString(): string {
    return `truncateTo(${this.fraction.toFixed(2)})`
  }
}

class RollCommand implements Command {
  check(): boolean {
    return true
  }
  async run(model: Model, real: Real) {
    await real.log.roll()
    await verify(model, real)
  }
  toString(): string {
    return 'roll'
  }
}

class ReopenCommand implements Command {
  constructor(
    readonly clean: boolean,
    readonly fromZero: boolean,
  ) {}
  check(): boolean {
    return true
  }
  async run(model: Model, real: Real) {
    const recoveryPoint = this.fromZero ? 0 : real.log.recoveryPoint
    if (this.clean) await real.log.close()
    else await real.log.closeHandlers()
    real.log = await UnifiedLog.open({
      fs: nodeFileSystem,
      dir: real.dir,
      config: real.config,
      hadCleanShutdown: this.clean,
      recoveryPoint: recoveryPoint as Offset,
      logStartOffset: model.logStartOffset as Offset,
      highWatermark: model.highWatermark as Offset,
    })
    await verify(model, real)
  }
  toString(): string {
    return `reopen(${this.clean ? 'clean' : 'unclean'}${this.fromZero ? ', from 0' : ''})`
  }
}

class DeleteRecordsCommand implements Command {
  constructor(readonly fraction: number) {}
  check(): boolean {
    return true
  }
  async run(model: Model, real: Real) {
    model.highWatermark = real.log.updateHighWatermark(model.logEndOffset as Offset)
    const target =
      model.logStartOffset + Math.floor(this.fraction * (model.highWatermark - model.logStartOffset))
    const start = await real.log.deleteRecordsBefore(target as Offset)
    model.logStartOffset = Math.max(model.logStartOffset, target)
    assert.equal(start, model.logStartOffset)
    await real.log.deleteOldSegments()
    await verify(model, real)
  }
  toString(): string {
    return `deleteRecordsBefore(${this.fraction.toFixed(2)})`
  }
}

class RestartAtCommand implements Command {
  constructor(readonly gap: number) {}
  check(): boolean {
    return true
  }
  async run(model: Model, real: Real) {
    const offset = model.logEndOffset + this.gap
    await real.log.truncateFullyAndStartAt(offset as Offset)
    Object.assign(model, {
      batches: [],
      startOffset: offset,
      logStartOffset: offset,
      logEndOffset: offset,
      highWatermark: offset,
    })
    await verify(model, real)
  }
  toString(): string {
    return `truncateFullyAndStartAt(+${this.gap})`
  }
}

async function verify(model: Model, real: Real): Promise<void> {
  const log = real.log
  assert.equal(log.logEndOffset, model.logEndOffset, 'logEndOffset')
  assert.equal(log.logStartOffset, model.logStartOffset, 'logStartOffset')
  assert.equal(log.highWatermark, model.highWatermark, 'highWatermark')
  const expected = model.batches.filter((b) => b.lastOffset >= model.logStartOffset)
  const actual = await readAll(log, log.logStartOffset, 700)
  assert.equal(actual.length, expected.length, 'batch count')
  for (let i = 0; i < actual.length; i++) {
    assert.equal(actual[i].baseOffset, expected[i].baseOffset)
    if (i > 0) assert.equal(actual[i].baseOffset, actual[i - 1].lastOffset + 1, 'consecutive offsets')
    assert.ok(actual[i].bytes.equals(expected[i].bytes), `bytes of batch ${actual[i].baseOffset}`)
  }
}

const commands = [
  fc
    .tuple(appendSpec, fc.nat(200), fc.boolean())
    .map(([s, seed, e]) => new AppendCommand(s, seed, e) as Command),
  fc.array(appendSpec, { minLength: 2, maxLength: 6 }).map((s) => new ConcurrentAppendsCommand(s) as Command),
  fc.double({ min: 0, max: 1, noNaN: true }).map((f) => new TruncateCommand(f) as Command),
  fc.constant(new RollCommand() as Command),
  fc.tuple(fc.boolean(), fc.boolean()).map(([c, z]) => new ReopenCommand(c, z) as Command),
  fc.double({ min: 0, max: 1, noNaN: true }).map((f) => new DeleteRecordsCommand(f) as Command),
  fc.nat(5).map((g) => new RestartAtCommand(g) as Command),
]

/** TIDELOG_PROPERTY_RUNS multiplies the runs for a longer soak. */
const RUNS_FACTOR = Number(process.env['TIDELOG_PROPERTY_RUNS'] ?? 1)

async function runModel(config: LogConfig, baseRuns: number, seed?: number) {
  const numRuns = Math.max(1, Math.round(baseRuns * RUNS_FACTOR))
  await fc.assert(
    fc.asyncProperty(fc.commands(commands, { maxCommands: 40 }), async (cmds) => {
      const root = await makeTempDir('tidelog-prop-')
      const dir = join(root, 'prop-0')
      const real: Real = { log: await UnifiedLog.open({ fs: nodeFileSystem, dir, config }), dir, config }
      const model: Model = {
        batches: [],
        startOffset: 0,
        logStartOffset: 0,
        logEndOffset: 0,
        highWatermark: 0,
        epoch: 0,
      }
      try {
        await fc.asyncModelRun(() => ({ model, real }), cmds)
      } finally {
        await real.log.closeHandlers()
        await removeDir(root)
      }
    }),
    { numRuns, seed, includeErrorInReport: true },
  )
}

describe('storage against a model', () => {
  it('tiny segments: appends, truncations, rolls, reopenings and deletions match the model', async () => {
    await runModel(
      fromProperties({
        'retention.ms': -1,
        'segment.bytes': 1500,
        'index.interval.bytes': 100,
        'segment.index.bytes': 4096,
      }),
      40,
    )
  })

  it('tiny indexes that fill up and force rolls', async () => {
    await runModel(
      fromProperties({
        'retention.ms': -1,
        'segment.bytes': 4000,
        'index.interval.bytes': 0,
        'segment.index.bytes': 48,
      }),
      25,
    )
  })
})

/**
 * Test helpers for storage: a tiny magic-v2 record batch builder (uncompressed records,
 * varint framing, CRC-32C), temp directories, and whole-log reads.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Clock } from '../../src/common/clock.js'
import type { FileLock, FileSystem } from '../../src/common/file-system.js'
import { ATTRIBUTES_OFFSET, CRC_OFFSET } from '../../src/protocol/batch-header.js'
import { crc32c } from '../../src/protocol/crc32c.js'
import { Writer } from '../../src/protocol/primitives.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import type { UnifiedLog } from '../../src/storage/unified-log.js'
import { waitUntil } from '../helpers/wait.js'

/**
 * node:fs for a process the test crashes in-process: `crash()` releases the locks it took,
 * as the kernel releases a dead process's, so the next open of the same dirs succeeds.
 */
export function crashableFileSystem(): { fs: FileSystem; crash(): Promise<void> } {
  const locks: FileLock[] = []
  const fs: FileSystem = Object.create(nodeFileSystem)
  fs.lockExclusive = async (path) => {
    const lock = await nodeFileSystem.lockExclusive(path)
    locks.push(lock)
    return lock
  }
  return {
    fs,
    crash: async () => {
      for (const lock of locks.splice(0)) await lock.release()
    },
  }
}

export interface TestRecord {
  readonly key?: Buffer | null
  readonly value: Buffer | null
  readonly timestampDelta?: number
}

export interface BatchSpec {
  readonly baseOffset?: number
  readonly partitionLeaderEpoch?: number
  readonly baseTimestamp?: number
  readonly records: readonly TestRecord[]
  readonly attributes?: number
}

function encodeRecord(record: TestRecord, offsetDelta: number): Buffer {
  const body = new Writer()
  body.writeInt8(0)
  body.writeVarlong(BigInt(record.timestampDelta ?? 0))
  body.writeVarint(offsetDelta)
  const key = record.key ?? null
  if (key === null) body.writeVarint(-1)
  else body.writeVarint(key.length).writeRaw(key)
  if (record.value === null) body.writeVarint(-1)
  else body.writeVarint(record.value.length).writeRaw(record.value)
  body.writeVarint(0)
  const bytes = body.toBuffer()
  return new Writer().writeVarint(bytes.length).writeRaw(bytes).toBuffer()
}

/** A valid v2 batch (CRC included) holding `spec.records`. */
export function buildBatch(spec: BatchSpec): Buffer {
  const baseTimestamp = spec.baseTimestamp ?? 1_700_000_000_000
  const records = spec.records.map((r, i) => encodeRecord(r, i))
  const maxDelta = Math.max(0, ...spec.records.map((r) => r.timestampDelta ?? 0))
  const w = new Writer()
  w.writeInt64(BigInt(spec.baseOffset ?? 0))
  w.writeInt32(0) // batchLength, patched below
  w.writeInt32(spec.partitionLeaderEpoch ?? -1)
  w.writeInt8(2)
  w.writeUInt32(0) // crc, patched below
  w.writeInt16(spec.attributes ?? 0)
  w.writeInt32(spec.records.length - 1)
  w.writeInt64(BigInt(baseTimestamp))
  w.writeInt64(BigInt(baseTimestamp + maxDelta))
  w.writeInt64(-1n)
  w.writeInt16(-1)
  w.writeInt32(-1)
  w.writeInt32(spec.records.length)
  for (const r of records) w.writeRaw(r)
  const buf = Buffer.from(w.toBuffer())
  buf.writeInt32BE(buf.length - 12, 8)
  buf.writeUInt32BE(crc32c(buf.subarray(ATTRIBUTES_OFFSET)), CRC_OFFSET)
  return buf
}

/** A batch of `count` records with values of `valueBytes` bytes, filled from `seed`. */
export function simpleBatch(
  count: number,
  valueBytes = 10,
  seed = 0,
  extra: Partial<BatchSpec> = {},
): Buffer {
  const records: TestRecord[] = []
  for (let i = 0; i < count; i++) {
    records.push({ value: Buffer.alloc(valueBytes, (seed + i) & 0xff), timestampDelta: i })
  }
  return buildBatch({ records, ...extra })
}

export async function makeTempDir(prefix = 'tidelog-storage-'): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix))
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true })
}

/** Runs `body` with a fresh temp directory, removed afterwards. */
export async function withTempDir<T>(body: (dir: string) => Promise<T>): Promise<T> {
  const dir = await makeTempDir()
  try {
    return await body(dir)
  } finally {
    await removeDir(dir)
  }
}

export interface ReadBatch {
  readonly baseOffset: number
  readonly lastOffset: number
  readonly bytes: Buffer
}

/** Splits concatenated batches. */
export function splitBatches(buffers: readonly Buffer[]): ReadBatch[] {
  const out: ReadBatch[] = []
  for (const buf of buffers) {
    let at = 0
    while (at < buf.length) {
      const size = 12 + buf.readInt32BE(at + 8)
      const baseOffset = Number(buf.readBigInt64BE(at))
      out.push({
        baseOffset,
        lastOffset: baseOffset + buf.readInt32BE(at + 23),
        bytes: buf.subarray(at, at + size),
      })
      at += size
    }
  }
  return out
}

/** Every batch from `from` to the log end, reading in small steps to exercise the read path. */
export async function readAll(
  log: UnifiedLog,
  from = log.logStartOffset,
  maxBytes = 64 * 1024,
): Promise<ReadBatch[]> {
  const out: ReadBatch[] = []
  let offset = from
  while (offset < log.logEndOffset) {
    const data = await log.read(offset, { maxBytes, maxOffset: log.logEndOffset })
    const batches = splitBatches(data.records)
    if (batches.length === 0) throw new Error(`no progress reading at ${offset}`)
    out.push(...batches)
    offset = data.nextOffset
  }
  return out
}

export function crcIsValid(batch: Buffer): boolean {
  return batch.readUInt32BE(CRC_OFFSET) === crc32c(batch.subarray(ATTRIBUTES_OFFSET))
}

/** A clock the test moves by hand; timers fire when it passes their due time. */
export class ManualClock implements Clock {
  private timers: { dueMs: number; callback: () => void; cancelled: boolean }[] = []
  constructor(public now = 1_000_000) {}
  nowMs(): number {
    return this.now
  }
  monotonicMs(): number {
    return this.now
  }
  setTimeout(callback: () => void, delayMs: number) {
    const timer = { dueMs: this.now + delayMs, callback, cancelled: false }
    this.timers.push(timer)
    return { cancel: () => void (timer.cancelled = true) }
  }
  advance(ms: number): void {
    this.now += ms
    const due = this.timers.filter((t) => !t.cancelled && t.dueMs <= this.now)
    this.timers = this.timers.filter((t) => !due.includes(t))
    for (const t of due) t.callback()
  }
}

/** Polls `condition` on real time until it holds or `timeoutMs` passes. */
export function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  return waitUntil('the condition', timeoutMs, condition, 2)
}

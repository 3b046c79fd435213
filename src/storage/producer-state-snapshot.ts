/**
 * Producer state snapshot files beside a partition's segments: `<20-digit offset>.snapshot`,
 * the state of every producer id as of that offset (everything below it applied). Kafka's
 * ProducerStateManager format, version 1, so the files read the same in both:
 *
 *   version int16 | crc uint32 (CRC-32C of every byte after it) | count int32 |
 *   count x { producerId int64 | epoch int16 | lastSequence int32 | lastOffset int64 |
 *             offsetDelta int32 | timestamp int64 | coordinatorEpoch int32 |
 *             currentTxnFirstOffset int64 }
 *
 * As in Kafka, only the last batch of each producer is kept: the batches before it are
 * found again by replaying the log from the snapshot's offset. A producer without a batch
 * (its only write here was a marker) has lastSequence and lastOffset -1.
 */
import { join } from 'node:path'
import { TidelogError } from '../common/errors.js'
import { type FileSystem, isNotFound, readWholeFile, writeFileAtomically } from '../common/file-system.js'
import { isOffset, isProducerId, type Offset, type ProducerId, toOffset } from '../common/types.js'
import { crc32c } from '../protocol/crc32c.js'

export const SNAPSHOT_SUFFIX = '.snapshot'
const SNAPSHOT_FILE = /^(\d{20})\.snapshot$/
const VERSION = 1
const CRC_OFFSET = 2
const ENTRIES_OFFSET = 6
const ENTRY_BYTES = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8

export interface ProducerSnapshotEntry {
  readonly producerId: ProducerId
  readonly producerEpoch: number
  readonly lastSequence: number
  readonly lastOffset: Offset
  /** lastOffset - firstOffset of the last batch (also lastSequence - firstSequence). */
  readonly offsetDelta: number
  /** The last batch's max timestamp: producer.id.expiration.ms counts from it. */
  readonly timestamp: number
  /** Epoch of the coordinator that wrote the producer's last marker, -1 for none. */
  readonly coordinatorEpoch: number
  /** First offset of the producer's open transaction, -1 for none. */
  readonly currentTxnFirstOffset: Offset
}

export function snapshotFileName(offset: Offset): string {
  return `${String(offset).padStart(20, '0')}${SNAPSHOT_SUFFIX}`
}

export function encodeSnapshot(entries: readonly ProducerSnapshotEntry[]): Buffer {
  const buf = Buffer.alloc(ENTRIES_OFFSET + 4 + entries.length * ENTRY_BYTES)
  buf.writeInt16BE(VERSION, 0)
  buf.writeInt32BE(entries.length, ENTRIES_OFFSET)
  let at = ENTRIES_OFFSET + 4
  for (const e of entries) {
    buf.writeBigInt64BE(e.producerId, at)
    buf.writeInt16BE(e.producerEpoch, at + 8)
    buf.writeInt32BE(e.lastSequence, at + 10)
    buf.writeBigInt64BE(BigInt(e.lastOffset), at + 14)
    buf.writeInt32BE(e.offsetDelta, at + 22)
    buf.writeBigInt64BE(BigInt(e.timestamp), at + 26)
    buf.writeInt32BE(e.coordinatorEpoch, at + 34)
    buf.writeBigInt64BE(BigInt(e.currentTxnFirstOffset), at + 38)
    at += ENTRY_BYTES
  }
  buf.writeUInt32BE(crc32c(buf.subarray(ENTRIES_OFFSET)), CRC_OFFSET)
  return buf
}

/** Throws CORRUPT_SNAPSHOT for a wrong version, length or CRC. */
export function decodeSnapshot(buf: Buffer): ProducerSnapshotEntry[] {
  if (buf.length < ENTRIES_OFFSET + 4) throw corrupt(`${buf.length} bytes`)
  const version = buf.readInt16BE(0)
  if (version !== VERSION) throw corrupt(`version ${version}`)
  const crc = buf.readUInt32BE(CRC_OFFSET)
  if (crc32c(buf.subarray(ENTRIES_OFFSET)) !== crc) throw corrupt('CRC mismatch')
  const count = buf.readInt32BE(ENTRIES_OFFSET)
  if (count < 0 || buf.length !== ENTRIES_OFFSET + 4 + count * ENTRY_BYTES) throw corrupt(`count ${count}`)
  const entries: ProducerSnapshotEntry[] = []
  for (let i = 0, at = ENTRIES_OFFSET + 4; i < count; i++, at += ENTRY_BYTES) {
    const producerId = buf.readBigInt64BE(at)
    const lastOffset = Number(buf.readBigInt64BE(at + 14))
    const currentTxnFirstOffset = Number(buf.readBigInt64BE(at + 38))
    // Past the CRC these hold unless the writer had a bug; either way the log is the truth.
    if (!isProducerId(producerId)) throw corrupt(`producer id ${producerId}`)
    if (!isOffset(lastOffset)) throw corrupt(`last offset ${lastOffset}`)
    if (!isOffset(currentTxnFirstOffset)) throw corrupt(`transaction's first offset ${currentTxnFirstOffset}`)
    entries.push({
      producerId,
      producerEpoch: buf.readInt16BE(at + 8),
      lastSequence: buf.readInt32BE(at + 10),
      lastOffset,
      offsetDelta: buf.readInt32BE(at + 22),
      timestamp: Number(buf.readBigInt64BE(at + 26)),
      coordinatorEpoch: buf.readInt32BE(at + 34),
      currentTxnFirstOffset,
    })
  }
  return entries
}

/** A snapshot that cannot be read is not trusted: the state is rebuilt from the log instead. */
function corrupt(problem: string): TidelogError {
  return new TidelogError('CORRUPT_SNAPSHOT', `producer snapshot: ${problem}`)
}

/** The snapshot files of a partition directory: offsets, ascending. */
export async function listSnapshotOffsets(fs: FileSystem, dir: string): Promise<Offset[]> {
  const offsets: Offset[] = []
  for (const name of await fs.readdir(dir)) {
    const match = SNAPSHOT_FILE.exec(name)
    if (match !== null) offsets.push(toOffset(Number(match[1])))
  }
  return offsets.sort((a, b) => a - b)
}

export async function writeSnapshot(
  fs: FileSystem,
  dir: string,
  offset: Offset,
  entries: readonly ProducerSnapshotEntry[],
): Promise<void> {
  await writeFileAtomically(fs, join(dir, snapshotFileName(offset)), encodeSnapshot(entries))
}

export async function readSnapshot(
  fs: FileSystem,
  dir: string,
  offset: Offset,
): Promise<ProducerSnapshotEntry[]> {
  return decodeSnapshot(await readWholeFile(fs, join(dir, snapshotFileName(offset))))
}

/**
 * Deletes the snapshots whose offset `remove` selects; a file already gone is fine.
 * `listed`: the directory's snapshot offsets when the caller has just listed them.
 */
export async function deleteSnapshots(
  fs: FileSystem,
  dir: string,
  remove: (offset: Offset) => boolean,
  listed?: readonly Offset[],
): Promise<void> {
  for (const offset of listed ?? (await listSnapshotOffsets(fs, dir))) {
    if (!remove(offset)) continue
    try {
      await fs.unlink(join(dir, snapshotFileName(offset)))
    } catch (err) {
      if (!isNotFound(err)) throw err
    }
  }
}

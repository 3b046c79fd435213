/**
 * Persistence of the embedded store: one file of JSON lines. The first line may be a
 * snapshot of every key not bound to a lease; each further line is one committed revision's
 * changes to such keys, appended and fsynced before the transaction resolves (write-ahead).
 * When the file grows past a limit it is replaced, atomically, by a single snapshot line.
 *
 * Lease-bound keys are never written: sessions do not survive a restart.
 *
 * Recovery: a last line without its newline, or a last line that does not parse, is a write
 * torn by a crash; it is dropped and cut off. A bad line anywhere else means the file is
 * damaged, and opening fails rather than silently forgetting metadata.
 */
import { basename, dirname } from 'node:path'
import { assert } from '../../common/assert.js'
import { TidelogError } from '../../common/errors.js'
import {
  type FileHandle,
  type FileLock,
  type FileSystem,
  isNotFound,
  lockDirectory,
  readWholeFile,
  writeFileAtomically,
} from '../../common/file-system.js'
import type { KeyValue } from './metadata-store.js'

/** A persisted key: never bound to a lease, so `lease` is implied null. */
export type PersistedKeyValue = Omit<KeyValue, 'lease'>

export interface JournalRecord {
  readonly revision: number
  readonly puts: readonly PersistedKeyValue[]
  readonly deletes: readonly string[]
}

export interface JournalSnapshot {
  readonly revision: number
  readonly kvs: readonly PersistedKeyValue[]
}

/** What the file held: the last revision written and the keys as of it. */
export interface RecoveredState {
  readonly revision: number
  readonly kvs: Map<string, PersistedKeyValue>
}

type Line = { readonly snapshot: JournalSnapshot } | JournalRecord

const NEWLINE = 0x0a

/** The journal's lock file is its own name with this suffix (`__tidelog_metadata.log.lock`). */
const LOCK_SUFFIX = '.lock'

export class Journal {
  private constructor(
    private readonly fs: FileSystem,
    private readonly path: string,
    private handle: FileHandle,
    private size: number,
    private snapshotBytes: number,
    private lastRevision: number,
    private readonly bytesMax: number,
    private readonly lock: FileLock,
  ) {}

  /**
   * Locks the journal (`<file>.lock` beside it: a DirectoryLockedError while another store,
   * in this process or another, has it open), then reads it.
   */
  static async open(
    fs: FileSystem,
    path: string,
    bytesMax: number,
  ): Promise<{ journal: Journal; state: RecoveredState }> {
    assert(bytesMax > 0, 'journal bytesMax must be positive')
    const lock = await lockDirectory(fs, dirname(path), `${basename(path)}${LOCK_SUFFIX}`)
    let handle: FileHandle | undefined
    try {
      const content = await readIfExists(fs, path)
      const { state, goodBytes, snapshotBytes } = recover(content ?? Buffer.alloc(0), path)
      handle = await fs.open(path, content === null ? 'w+' : 'r+')
      // A new file must survive a crash as an entry in its directory, not only as data.
      if (content === null) await fs.syncDir(dirname(path))
      if (content !== null && goodBytes < content.length) {
        await handle.truncate(goodBytes)
        await handle.sync()
      }
      const journal = new Journal(fs, path, handle, goodBytes, snapshotBytes, state.revision, bytesMax, lock)
      return { journal, state }
    } catch (err) {
      await handle?.close()
      await lock.release()
      throw err
    }
  }

  /** Appends one revision's changes and fsyncs: the revision is durable when this resolves. */
  async append(record: JournalRecord): Promise<void> {
    assert(
      record.revision > this.lastRevision,
      () => `journal revision ${record.revision} <= ${this.lastRevision}`,
    )
    const line = Buffer.from(`${JSON.stringify(record)}\n`)
    await this.handle.write(line, this.size)
    await this.handle.sync()
    this.size += line.length
    this.lastRevision = record.revision
  }

  /** The latest revision on disk; a revision without changes to persisted keys may be newer. */
  persistedRevision(): number {
    return this.lastRevision
  }

  /**
   * Rewrites the file as one snapshot line once it is past the limit and at least twice the
   * last snapshot, so a big keyspace is not rewritten after every transaction.
   */
  async maybeCompact(snapshot: () => JournalSnapshot): Promise<void> {
    if (this.size <= Math.max(this.bytesMax, 2 * this.snapshotBytes)) return
    const taken = snapshot()
    assert(taken.revision >= this.lastRevision, 'snapshot older than the journal')
    const content = Buffer.from(`${JSON.stringify({ snapshot: taken } satisfies Line)}\n`)
    await writeFileAtomically(this.fs, this.path, content)
    const next = await this.fs.open(this.path, 'r+')
    const previous = this.handle
    this.handle = next
    this.size = content.length
    this.snapshotBytes = content.length
    this.lastRevision = taken.revision
    await previous.close()
  }

  async close(): Promise<void> {
    try {
      await this.handle.close()
    } finally {
      await this.lock.release()
    }
  }
}

async function readIfExists(fs: FileSystem, path: string): Promise<Buffer | null> {
  try {
    return await readWholeFile(fs, path)
  } catch (err) {
    if (isNotFound(err)) return null
    throw err
  }
}

/** Replays the file; `goodBytes` is where the last complete, valid line ends. */
function recover(content: Buffer, path: string) {
  const kvs = new Map<string, PersistedKeyValue>()
  let revision = 0
  let goodBytes = 0
  let snapshotBytes = 0
  while (goodBytes < content.length) {
    const end = content.indexOf(NEWLINE, goodBytes)
    if (end === -1) break // torn: the crash came before the newline
    const line = parseLine(content.subarray(goodBytes, end))
    if (line === null) {
      if (end + 1 === content.length) break // torn last line
      throw corrupt(path, goodBytes, 'unreadable line')
    }
    if ('snapshot' in line) {
      if (goodBytes !== 0) throw corrupt(path, goodBytes, 'snapshot after the first line')
      revision = applySnapshot(kvs, line.snapshot, path)
      snapshotBytes = end + 1
    } else {
      if (line.revision <= revision)
        throw corrupt(path, goodBytes, `revision ${line.revision} after ${revision}`)
      revision = applyRecord(kvs, line, path)
    }
    goodBytes = end + 1
  }
  return { state: { revision, kvs }, goodBytes, snapshotBytes }
}

function parseLine(bytes: Buffer): Line | null {
  try {
    const parsed: unknown = JSON.parse(bytes.toString('utf8'))
    return isLine(parsed) ? parsed : null
  } catch {
    // Not JSON: a torn or damaged line, judged by the caller from where it sits.
    return null
  }
}

function isLine(value: unknown): value is Line {
  if (typeof value !== 'object' || value === null) return false
  if ('snapshot' in value) return true
  const record = value as Partial<JournalRecord>
  return typeof record.revision === 'number' && Array.isArray(record.puts) && Array.isArray(record.deletes)
}

function applySnapshot(kvs: Map<string, PersistedKeyValue>, snapshot: JournalSnapshot, path: string): number {
  for (const kv of snapshot.kvs) {
    if (!(kv.modRevision <= snapshot.revision))
      throw corrupt(path, 0, `snapshot key ${kv.key} newer than the snapshot`)
    kvs.set(kv.key, kv)
  }
  return snapshot.revision
}

function applyRecord(kvs: Map<string, PersistedKeyValue>, record: JournalRecord, path: string): number {
  for (const key of record.deletes) kvs.delete(key)
  for (const kv of record.puts) {
    if (kv.modRevision !== record.revision) throw corrupt(path, -1, `put of ${kv.key} at another revision`)
    kvs.set(kv.key, kv)
  }
  return record.revision
}

/** Damaged metadata is an operating error (a disk problem), not a bug: it names the file. */
function corrupt(path: string, offset: number, what: string): TidelogError {
  const where = offset >= 0 ? ` at byte ${offset}` : ''
  return new TidelogError('METADATA_CORRUPT', `metadata store file ${path}${where}: ${what}`)
}

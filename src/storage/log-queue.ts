/**
 * UnifiedLog's operation queue: every mutation of one log (appends, roll, flush,
 * truncation, retention, close) runs here, strictly in call order, one at a time (what
 * Kafka's UnifiedLog serializes with its lock). Appends queued in the same tick, or while
 * an earlier operation is in flight, join one task, so the log writes them as one group.
 * Apart from unified-log.ts because ordering and failure propagation are one concern, the
 * log's offsets another: the log runs the tasks (LogQueueHost), the queue only orders them.
 */
import { isStorageError, type StorageError } from './errors.js'
import type { AppendOptions, LogAppendInfo } from './unified-log-types.js'

/** One produce's (or fetch response's) batches, waiting for its group's turn. */
export interface PendingAppend {
  readonly buffer: Buffer
  readonly options: AppendOptions
  readonly resolve: (info: LogAppendInfo) => void
  readonly reject: (err: unknown) => void
}

type Task =
  | { kind: 'appends'; appends: PendingAppend[] }
  | { kind: 'op'; run: () => Promise<void>; reject: (err: unknown) => void }

/**
 * What the queue needs of its log, called with the log (`owner`): one object serves every
 * log (five closures per log cost ~340 bytes of heap).
 */
export interface LogQueueHost<T> {
  /** Writes one group of appends (settling each of them). */
  runAppends(owner: T, appends: readonly PendingAppend[]): Promise<void>
  /** Why the log takes no more work (offline, closing, closed); undefined while it does. */
  unusableError(owner: T): StorageError | undefined
  /** The error the log went offline with, once it did. */
  failure(owner: T): StorageError | undefined
  /** A task failed unexpectedly: the log goes offline (and calls rejectAll). */
  fail(owner: T, err: unknown): void
  /** A task ran (or failed): what the log holds may have changed. */
  taskDone(owner: T): void
}

export class LogQueue<T> {
  private readonly tasks: Task[] = []
  private draining = false

  constructor(
    private readonly owner: T,
    private readonly host: LogQueueHost<T>,
  ) {}

  /** An append, truncation or other queued operation is under way or waiting. */
  get hasQueuedWork(): boolean {
    return this.draining || this.tasks.length > 0
  }

  /** Queues an append, joining the appends queued last if nothing else came after them. */
  append(buffer: Buffer, options: AppendOptions): Promise<LogAppendInfo> {
    return new Promise<LogAppendInfo>((resolve, reject) => {
      const unusable = this.host.unusableError(this.owner)
      if (unusable !== undefined) {
        reject(unusable)
        return
      }
      const pending: PendingAppend = { buffer, options, resolve, reject }
      const last = this.tasks.at(-1)
      if (last?.kind === 'appends') last.appends.push(pending)
      else this.tasks.push({ kind: 'appends', appends: [pending] })
      this.scheduleDrain()
    })
  }

  enqueue<T>(run: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const unusable = this.host.unusableError(this.owner)
      if (unusable !== undefined) {
        reject(unusable)
        return
      }
      const settle = async () => {
        try {
          resolve(await run())
        } catch (err) {
          // An outcome for the caller (out of range, ...) leaves the log usable; anything else takes it offline.
          if (!isStorageError(err) || err.code === 'KAFKA_STORAGE_ERROR') throw err
          reject(err)
        }
      }
      this.tasks.push({ kind: 'op', run: settle, reject })
      this.scheduleDrain()
    })
  }

  /** The log went offline: everything still queued fails with `err`. */
  rejectAll(err: StorageError): void {
    for (const task of this.tasks.splice(0)) this.rejectTask(task, err)
  }

  private scheduleDrain(): void {
    if (this.draining) return
    this.draining = true
    // A microtask, so that appends made in the same tick join one group (one writev).
    queueMicrotask(() => {
      this.drain().catch((err: unknown) => this.host.fail(this.owner, err))
    })
  }

  private async drain(): Promise<void> {
    try {
      for (let task = this.tasks.shift(); task !== undefined; task = this.tasks.shift()) {
        await this.runTask(task)
      }
    } finally {
      this.draining = false
    }
  }

  private async runTask(task: Task): Promise<void> {
    const failure = this.host.failure(this.owner)
    if (failure !== undefined) {
      this.rejectTask(task, failure)
      return
    }
    try {
      if (task.kind === 'appends') await this.host.runAppends(this.owner, task.appends)
      else await task.run()
    } catch (err) {
      this.host.fail(this.owner, err)
      this.rejectTask(task, this.host.failure(this.owner) ?? err)
    } finally {
      this.host.taskDone(this.owner)
    }
  }

  private rejectTask(task: Task, err: unknown): void {
    if (task.kind === 'appends') for (const pending of task.appends) pending.reject(err)
    else task.reject(err)
  }
}

/**
 * One broker in a worker thread of its own (`startCluster({ workerThreads: true })`): an
 * event loop per broker, so the brokers of one process use as many cores as there are
 * brokers. The main thread keeps the cluster's metadata store and serves each worker's
 * store calls over a MessageChannel (metadata/store/port-store.ts); brokers talk to each
 * other and to clients over real TCP as always. A worker's log lines come to the main
 * thread's logger, which writes them (or a test's log guard checks them) as its own.
 *
 * Main thread: `BrokerThread.spawn`. Worker: `serveBrokerThread`, called by an entry module
 * (server/broker-worker.ts, testing/broker-worker.ts) that composes the broker.
 */
import { MessageChannel, type MessagePort, parentPort, Worker, workerData } from 'node:worker_threads'
import { pino } from 'pino'
import { TidelogError } from '../common/errors.js'
import type { Logger } from '../common/logger.js'
import { type BrokerId, toBrokerId } from '../common/types.js'
import type { MetadataStore, StoreLimits } from '../metadata/store/metadata-store.js'
import { PortStoreClient, StoreHost } from '../metadata/store/port-store.js'
import type { Broker } from './broker.js'

/** What a worker is started with (structured-cloned). */
export interface BrokerThreadInit<Extra = unknown> {
  readonly nodeId: number
  /** The broker's properties, by Kafka name. */
  readonly properties: readonly (readonly [string, string])[]
  /** The main thread logger's level: lines below it are not even sent. */
  readonly logLevel: string
  readonly storeLimits: StoreLimits
  /** Whatever the entry module needs beyond a plain broker (the fault API's shared link table). */
  readonly extra: Extra
}

/** What the main thread knows of a started broker without asking it. */
export interface BrokerThreadInfo {
  readonly nodeId: BrokerId
  readonly bootstrapServers: string
  readonly httpUrl: string | null
  readonly schemaRegistryUrl: string | null
  readonly shutdownTimeoutMs: number
}

/** An operation the main thread may ask of a worker's broker, beyond stop. */
export type BrokerThreadOp = (args: unknown) => unknown

type ToWorker = { readonly t: 'call'; readonly callId: number; readonly op: string; readonly args: unknown }

type FromWorker =
  | { readonly t: 'started'; readonly info: BrokerThreadInfo }
  | { readonly t: 'startFailed'; readonly error: { readonly code: string | null; readonly message: string } }
  | { readonly t: 'result'; readonly callId: number; readonly value: unknown }
  | { readonly t: 'error'; readonly callId: number; readonly message: string }
  | { readonly t: 'log'; readonly line: string }
  /** The broker stopped, asked to or on its own (a failed log dir): the thread ends next. */
  | { readonly t: 'stopped' }

interface WorkerData {
  readonly init: BrokerThreadInit
  readonly storePort: MessagePort
}

const PINO_LEVELS: Readonly<Record<number, 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal'>> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
}

/** The main thread's handle on a broker in a worker thread. */
export class BrokerThread {
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  private nextCallId = 1
  private readonly exited: Promise<void>
  private readonly stopped: Promise<void>
  private markStopped!: () => void
  private info: BrokerThreadInfo | null = null
  /** The thread is ended on purpose (stop, or a fault API's kill, which lets its leases expire). */
  private ending = false
  private hasExited = false

  private constructor(
    private readonly worker: Worker,
    private readonly storeHost: StoreHost,
    private readonly logger: Logger,
  ) {
    this.stopped = new Promise((resolve) => {
      this.markStopped = resolve
    })
    this.exited = new Promise((resolve) => {
      worker.once('exit', () => {
        this.hasExited = true
        // A thread that ended on its own (an uncaught error) keeps no session alive: its
        // leases end now, or its leaderships would stay with a broker that is gone.
        if (!this.ending)
          this.storeHost
            .revokeLeases()
            .catch((error: unknown) =>
              this.logger.warn({ err: error }, "revoking a dead thread's leases failed"),
            )
        this.storeHost.close()
        for (const pending of this.pending.values()) pending.reject(new Error('the broker thread exited'))
        this.pending.clear()
        this.markStopped()
        resolve()
      })
    })
    worker.on('error', (error) => this.logger.error({ err: error }, 'broker thread failed'))
  }

  /**
   * Starts a worker on `entry` (a module calling serveBrokerThread) and resolves once its
   * broker is started; rejects with the broker's start error (the thread is then gone).
   */
  static async spawn(
    entry: URL,
    init: Omit<BrokerThreadInit, 'storeLimits' | 'logLevel'>,
    store: MetadataStore,
    logger: Logger,
  ): Promise<BrokerThread> {
    const channel = new MessageChannel()
    const data: WorkerData = {
      init: { ...init, storeLimits: store.limits, logLevel: logger.level },
      storePort: channel.port2,
    }
    const worker = new Worker(entry, { workerData: data, transferList: [channel.port2] })
    const thread = new BrokerThread(worker, new StoreHost(store, channel.port1), logger)
    const started = new Promise<BrokerThreadInfo>((resolve, reject) => {
      worker.on('message', (message: FromWorker) => {
        if (message.t === 'started') resolve(message.info)
        else if (message.t === 'startFailed')
          reject(
            message.error.code === null
              ? new Error(message.error.message)
              : new TidelogError(message.error.code, message.error.message),
          )
        else thread.receive(message)
      })
      thread.exited.then(() => reject(new Error(`broker ${init.nodeId}'s thread exited while starting`)))
    })
    try {
      thread.info = await started
    } catch (error) {
      await thread.exited
      throw error
    }
    return thread
  }

  get nodeId(): BrokerId {
    return this.started.nodeId
  }
  get bootstrapServers(): string {
    return this.started.bootstrapServers
  }
  get httpUrl(): string | null {
    return this.started.httpUrl
  }
  get schemaRegistryUrl(): string | null {
    return this.started.schemaRegistryUrl
  }
  get shutdownTimeoutMs(): number {
    return this.started.shutdownTimeoutMs
  }

  /** The leases the broker holds in the main thread's store (the fault API lets them expire). */
  get leaseIds(): string[] {
    return this.storeHost.leaseIds
  }

  /** Runs `op` (one the entry module serves) on the broker and returns its result. */
  call(op: string, args: unknown = null): Promise<unknown> {
    if (this.hasExited) return Promise.reject(new Error('the broker thread has exited'))
    const callId = this.nextCallId++
    return new Promise((resolve, reject) => {
      this.pending.set(callId, { resolve, reject })
      const message: ToWorker = { t: 'call', callId, op, args }
      this.worker.postMessage(message)
    })
  }

  /** Resolves once the broker stopped (asked to, on its own, or its thread ended). */
  whenStopped(): Promise<void> {
    return this.stopped
  }

  /** Controlled shutdown of the broker, then its thread ends. */
  async stop(): Promise<void> {
    await this.call('stop').catch(() => undefined)
    await this.terminate()
  }

  /** Ends the thread now, whatever it was doing (as kill -9 ends a process). */
  async terminate(): Promise<void> {
    this.ending = true
    await this.worker.terminate()
    await this.exited
  }

  /** SIGHUP's reload of TLS key and trust stores, in the worker. */
  async reloadTls(): Promise<number> {
    return (await this.call('reloadTls')) as number
  }

  private get started(): BrokerThreadInfo {
    if (this.info === null) throw new Error('the broker thread has not started')
    return this.info
  }

  private receive(message: FromWorker): void {
    if (message.t === 'log') this.log(message.line)
    else if (message.t === 'stopped') {
      // A broker that stopped itself (a failed log dir) leaves nothing to run: its thread
      // ends, as a process whose only broker stopped exits.
      this.markStopped()
      this.terminate().catch(() => undefined)
    } else if (message.t === 'result' || message.t === 'error') {
      const pending = this.pending.get(message.callId)
      this.pending.delete(message.callId)
      if (message.t === 'result') pending?.resolve(message.value)
      else pending?.reject(new Error(message.message))
    }
  }

  /** A worker's pino line, written by this thread's logger at the line's own level. */
  private log(line: string): void {
    let record: Record<string, unknown>
    try {
      record = JSON.parse(line) as Record<string, unknown>
    } catch {
      this.logger.warn({ line }, 'unparsable log line from a broker thread')
      return
    }
    const { level, msg, time: _time, ...fields } = record
    const method = PINO_LEVELS[Number(level)] ?? 'info'
    this.logger[method](fields, typeof msg === 'string' ? msg : '')
  }
}

/**
 * The worker's side: composes the broker with `start` (given the main thread's store and a
 * logger that sends its lines there), reports it started, and serves `stop`, `reloadTls`
 * and the entry module's own ops until the broker stops.
 */
export function serveBrokerThread<Extra>(
  start: (
    init: BrokerThreadInit<Extra>,
    parts: { readonly store: MetadataStore; readonly logger: Logger },
  ) => Promise<{ readonly broker: Broker; readonly ops?: Readonly<Record<string, BrokerThreadOp>> }>,
): void {
  const port = parentPort
  if (port === null) throw new Error('serveBrokerThread runs in a worker thread')
  const { init, storePort } = workerData as WorkerData
  const send = (message: FromWorker): void => port.postMessage(message)
  const logger = pino(
    { level: init.logLevel, base: undefined },
    { write: (line: string) => send({ t: 'log', line }) },
  ).child({ broker: init.nodeId })
  const store = new PortStoreClient(storePort, init.storeLimits)
  const ops = new Map<string, BrokerThreadOp>()
  port.on('message', (message: ToWorker) => {
    const op = ops.get(message.op)
    if (op === undefined) {
      send({ t: 'error', callId: message.callId, message: `no operation '${message.op}' in a broker thread` })
      return
    }
    Promise.resolve()
      .then(() => op(message.args))
      .then(
        (value) => send({ t: 'result', callId: message.callId, value: value ?? null }),
        (error: unknown) =>
          send({ t: 'error', callId: message.callId, message: (error as Error)?.message ?? String(error) }),
      )
  })
  start(init as BrokerThreadInit<Extra>, { store, logger }).then(
    ({ broker, ops: extra }) => {
      ops.set('stop', () => broker.stop())
      ops.set('reloadTls', () => broker.reloadTls())
      ops.set('waitLeadersServing', (args) => {
        const { ids, timeoutMs } = args as { ids: number[]; timeoutMs: number }
        return broker.topicAdmin.waitLeadersServing(ids.map(toBrokerId), timeoutMs)
      })
      for (const [name, op] of Object.entries(extra ?? {})) ops.set(name, op)
      broker.whenStopped().then(() => send({ t: 'stopped' }))
      send({
        t: 'started',
        info: {
          nodeId: broker.nodeId,
          bootstrapServers: broker.bootstrapServers,
          httpUrl: broker.httpUrl,
          schemaRegistryUrl: broker.schemaRegistryUrl,
          shutdownTimeoutMs: broker.config.values.get('tidelog.shutdown.timeout.ms') as number,
        },
      })
    },
    (error: unknown) => {
      send({
        t: 'startFailed',
        error: {
          code: error instanceof TidelogError ? error.code : null,
          message: (error as Error)?.message ?? String(error),
        },
      })
      // Whatever the failed start left open must not keep the thread (after the message is out).
      setImmediate(() => process.exit(1))
    },
  )
}

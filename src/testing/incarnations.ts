/**
 * One run of one broker of a TestCluster, from its start to its kill or stop, and what the
 * fault API does to it: in the test's own thread (the default: its fault parts are right
 * here), or in a worker thread of its own (`workerThreads: true`: the fault parts live in
 * the thread, and the calls below reach them as messages or through shared memory).
 */

import type { EmbeddedStore } from '../metadata/store/embedded-store.js'
import type { Broker } from '../server/broker.js'
import type { BrokerThread } from '../server/broker-thread.js'
import type { FaultyFileSystem, FaultyNetwork, ProcessState, ProcessStore } from './fault-parts.js'
import { type SharedLinkState, SharedProcessState } from './thread-parts.js'

type CreateTopics = Broker['topicAdmin']['createTopics']

export interface Incarnation {
  /** The Broker object, when it lives in this thread; null for a broker thread. */
  readonly broker: Broker | null
  /** As kill -9, in effect when this returns; resolves once its locks and ports are free. */
  kill(): Promise<void>
  /** kill, and what was not fsynced is gone: `lost` says how much. */
  powerLoss(): { readonly exited: Promise<void>; readonly lost: Promise<{ files: number; bytes: number }> }
  /** Controlled shutdown. */
  stop(): Promise<void>
  pause(): void
  resume(): void
  /** The link to the metadata store is cut (isolate). */
  cutStoreLink(): void
  /** Every link is open again (the link table is already cleared). */
  heal(): void
  slowDisk(ms: number): void
  diskFull(full: boolean): void
  isLeader(topic: string, partition: number): Promise<boolean>
  createTopics(...args: Parameters<CreateTopics>): ReturnType<CreateTopics>
  /** Preferred leader election for `topic:partition` if this broker is the controller; false if not. */
  electPreferredLeader(key: string): Promise<boolean>
}

/** A broker in the test's thread, on the fault parts built for it. */
export class LocalIncarnation implements Incarnation {
  constructor(
    readonly broker: Broker,
    private readonly process: ProcessState,
    private readonly fileSystem: FaultyFileSystem,
    private readonly network: FaultyNetwork,
    private readonly store: ProcessStore,
    private readonly onHttpCloseError: (error: unknown) => void,
  ) {}

  kill(): Promise<void> {
    this.process.kill()
    const locksFreed = this.fileSystem.kill()
    this.network.kill()
    this.store.suspendLeases()
    // The HTTP listeners are node:http, outside the faulty parts: they die with the broker.
    const httpClosed = this.broker.closeHttpListeners().catch(this.onHttpCloseError)
    return Promise.all([locksFreed, httpClosed]).then(() => undefined)
  }

  powerLoss() {
    const exited = this.kill()
    return { exited, lost: this.fileSystem.losePageCache() }
  }

  stop(): Promise<void> {
    return this.broker.stop()
  }

  pause(): void {
    this.process.pause()
    this.store.suspendLeases()
  }

  resume(): void {
    this.store.resumeLeases()
    this.process.resume()
  }

  cutStoreLink(): void {
    this.store.cutLink()
  }

  heal(): void {
    this.store.healLink()
  }

  slowDisk(ms: number): void {
    this.fileSystem.slowMs = ms
  }

  diskFull(full: boolean): void {
    this.fileSystem.full = full
  }

  async isLeader(topic: string, partition: number): Promise<boolean> {
    return this.broker.replicaManager.getPartition(topic, partition)?.isLeader === true
  }

  createTopics(...args: Parameters<CreateTopics>): ReturnType<CreateTopics> {
    return this.broker.topicAdmin.createTopics(...args)
  }

  async electPreferredLeader(key: string): Promise<boolean> {
    const controller = this.broker.isController ? this.broker.controller : null
    if (!controller) return false
    await controller.electPreferredLeaders(new Set([key]))
    return true
  }
}

/**
 * A broker in a worker thread (testing/broker-worker.ts). Its leases live in this thread's
 * store, so pausing, isolating and killing it stop keeping them alive here; its death is a
 * shared flag, so its calls stop settling the moment kill returns, as in one thread.
 */
export class ThreadIncarnation implements Incarnation {
  readonly broker = null
  private paused = false
  private storeCut = false

  constructor(
    private readonly thread: BrokerThread,
    private readonly id: number,
    private readonly store: EmbeddedStore,
    private readonly links: SharedLinkState,
  ) {}

  kill(): Promise<void> {
    return this.die('kill').then(() => undefined)
  }

  powerLoss() {
    const lost = this.die('powerLoss') as Promise<{ files: number; bytes: number }>
    return { exited: lost.then(() => undefined), lost }
  }

  /** In effect at once (the flag); the thread then closes what its OS would, and ends. */
  private async die(op: 'kill' | 'powerLoss'): Promise<unknown> {
    SharedProcessState.setDead(this.links.dead, this.id, true)
    this.suspendLeases()
    const result = await this.thread.call(op)
    await this.thread.terminate()
    return result
  }

  stop(): Promise<void> {
    return this.thread.stop()
  }

  pause(): void {
    this.paused = true
    this.suspendLeases()
    this.post('pause')
  }

  resume(): void {
    this.paused = false
    this.resumeLeases()
    this.post('resume')
  }

  cutStoreLink(): void {
    this.storeCut = true
    this.suspendLeases()
    this.post('cutStoreLink')
  }

  heal(): void {
    if (this.storeCut && !this.paused) this.resumeLeases()
    this.storeCut = false
    this.post('heal')
  }

  slowDisk(ms: number): void {
    this.post('slowDisk', ms)
  }

  diskFull(full: boolean): void {
    this.post('diskFull', full)
  }

  async isLeader(topic: string, partition: number): Promise<boolean> {
    return (await this.thread.call('isLeader', { topic, partition })) === true
  }

  async createTopics(...args: Parameters<CreateTopics>): ReturnType<CreateTopics> {
    return (await this.thread.call('createTopics', args)) as Awaited<ReturnType<CreateTopics>>
  }

  async electPreferredLeader(key: string): Promise<boolean> {
    return (await this.thread.call('electPreferredLeader', key)) === true
  }

  /** A fault applied in the thread; messages arrive in order, so a later one sees it. */
  private post(op: string, args: unknown = null): void {
    this.thread.call(op, args).catch(() => undefined)
  }

  private suspendLeases(): void {
    for (const leaseId of this.thread.leaseIds) {
      try {
        this.store.suspendKeepAlive(leaseId)
      } catch {
        // LEASE_NOT_FOUND: already ended.
      }
    }
  }

  private resumeLeases(): void {
    for (const leaseId of this.thread.leaseIds) this.store.resumeKeepAlive(leaseId)
  }
}

/**
 * Client quotas in the cluster's metadata store, one key per entity
 * (`client-quotas/<entity key>`, a JSON object of quota key to value): what
 * AlterClientQuotas writes and every broker follows with a watch, so a quota set through
 * one broker holds on all and survives restarts.
 */
import type { Logger } from '../../common/logger.js'
import type { MetadataStore, StoreOp, VersionCompare, Watch } from '../../metadata/store/metadata-store.js'
import { packTxns, type TxnPart } from '../../metadata/store/txn-batches.js'
import { type ClientQuotaEntity, entityKey, parseEntityKey } from './client-quota-entity.js'

const PREFIX = 'client-quotas/'
/** Compare-and-set retries of one alteration racing another broker's. */
const MAX_ALTER_ATTEMPTS = 10

export interface QuotaEntry {
  readonly entity: ClientQuotaEntity
  readonly values: Readonly<Record<string, number>>
}

/** One entity's changes: a number sets the key, null removes it. */
export interface QuotaAlteration {
  readonly entity: ClientQuotaEntity
  readonly ops: ReadonlyMap<string, number | null>
}

export class ClientQuotaStore {
  private entries = new Map<string, QuotaEntry>()
  private revision = 0
  private watch: Watch | null = null
  private closed = false
  private readonly listeners: ((entries: ReadonlyMap<string, QuotaEntry>) => void)[] = []
  private revisionWaiters: { revision: number; resolve: () => void }[] = []

  constructor(
    private readonly store: MetadataStore,
    private readonly logger: Logger,
  ) {}

  /** Reads every quota and follows changes; a watch that ends restarts from a fresh read. */
  async start(): Promise<void> {
    await this.reload()
    this.follow()
  }

  close(): void {
    this.closed = true
    this.watch?.cancel()
    this.watch = null
    for (const waiter of this.revisionWaiters) waiter.resolve()
    this.revisionWaiters = []
  }

  /** Every entity with a quota, by entity key, as this broker last saw them. */
  current(): ReadonlyMap<string, QuotaEntry> {
    return this.entries
  }

  /** Calls `listener` with the entries now and after every change. */
  onChange(listener: (entries: ReadonlyMap<string, QuotaEntry>) => void): void {
    this.listeners.push(listener)
    listener(this.entries)
  }

  /**
   * Applies the alterations guarded by the versions read (each entity's compare-and-set
   * stands alone: as many per transaction as the store's limits take), retried
   * when another broker changed the same entities meanwhile; resolves once this broker's
   * own view includes the change, so a describe or a request right after sees it.
   */
  async alter(alterations: readonly QuotaAlteration[]): Promise<void> {
    if (alterations.length === 0) return
    for (let attempt = 1; ; attempt++) {
      const compares: VersionCompare[] = []
      const merged = new Map<string, Record<string, number>>()
      for (const { entity, ops: changes } of alterations) {
        const key = PREFIX + entityKey(entity)
        let values = merged.get(key)
        if (values === undefined) {
          const kv = await this.store.get(key)
          compares.push({ key, version: kv?.version ?? 0, ...(kv ? { modRevision: kv.modRevision } : {}) })
          values = kv ? { ...(JSON.parse(kv.value) as Record<string, number>) } : {}
          merged.set(key, values)
        }
        for (const [quotaKey, value] of changes) {
          if (value === null) delete values[quotaKey]
          else values[quotaKey] = value
        }
      }
      const parts: TxnPart[] = []
      for (const [key, values] of merged) {
        const compare = compares.find((c) => c.key === key)!
        const exists = compare.version > 0
        const op: StoreOp | null =
          Object.keys(values).length > 0
            ? { type: 'put', key, value: JSON.stringify(values) }
            : exists
              ? { type: 'delete', key }
              : null
        if (op !== null) parts.push({ compares: [compare], ops: [op] })
      }
      if (parts.length === 0) return
      let revision: number | null = null
      for (const txn of packTxns(this.store.limits, parts)) {
        const result = await this.store.txn(txn.compares, txn.ops)
        revision = result.succeeded ? result.revision : null
        if (revision === null) break
      }
      if (revision !== null) {
        await this.waitForRevision(revision)
        return
      }
      if (attempt >= MAX_ALTER_ATTEMPTS)
        throw new Error(`client quota alteration kept conflicting with others (${attempt} attempts)`)
    }
  }

  private waitForRevision(revision: number): Promise<void> {
    if (this.revision >= revision || this.closed) return Promise.resolve()
    return new Promise((resolve) => this.revisionWaiters.push({ revision, resolve }))
  }

  private follow(): void {
    this.watch = this.store.watch(
      PREFIX,
      this.revision + 1,
      (events, revision) => {
        if (revision <= this.revision) return
        const next = new Map(this.entries)
        for (const { type, kv } of events) {
          const key = kv.key.slice(PREFIX.length)
          if (type === 'delete') next.delete(key)
          else this.put(next, key, kv.value)
        }
        this.publish(next, revision)
      },
      (error) => {
        if (this.closed || error.code === 'STORE_CLOSED') return
        this.logger.warn({ err: error }, 'client quota watch ended; reloading')
        this.reload().then(
          () => this.follow(),
          (reloadError: unknown) => this.logger.error({ err: reloadError }, 'client quota reload failed'),
        )
      },
    )
  }

  private async reload(): Promise<void> {
    const { kvs, revision } = await this.store.range(PREFIX)
    const next = new Map<string, QuotaEntry>()
    for (const kv of kvs) this.put(next, kv.key.slice(PREFIX.length), kv.value)
    this.publish(next, revision)
  }

  private put(entries: Map<string, QuotaEntry>, key: string, value: string): void {
    const entity = parseEntityKey(key)
    if (entity === null) {
      this.logger.warn({ key: PREFIX + key }, 'ignoring a client quota key that names no entity')
      return
    }
    entries.set(key, { entity, values: JSON.parse(value) as Record<string, number> })
  }

  private publish(entries: Map<string, QuotaEntry>, revision: number): void {
    this.entries = entries
    this.revision = Math.max(this.revision, revision)
    for (const listener of this.listeners) listener(entries)
    const ready = this.revisionWaiters.filter((w) => w.revision <= this.revision)
    this.revisionWaiters = this.revisionWaiters.filter((w) => w.revision > this.revision)
    for (const waiter of ready) waiter.resolve()
  }
}

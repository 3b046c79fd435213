/**
 * ACLs in the cluster's metadata store, one key per binding (`acl/<binding>`, the binding's
 * fields encoded in the key, so creating an ACL twice leaves one), like SCRAM credentials:
 * CreateAcls/DeleteAcls on any broker write them, and every broker mirrors them by a prefix
 * watch into its authorizer. Describe and delete read the store itself, not the mirror.
 */
import type { Logger } from '../../common/logger.js'
import type { MetadataStore, StoreOp, Watch, WatchEvent } from '../../metadata/store/metadata-store.js'
import { applyInBatches } from '../../metadata/store/txn-batches.js'
import { type AclBinding, type AclBindingFilter, filterMatches } from './acl.js'

const PREFIX = 'acl/'

type StoredBinding = [
  resourceType: number,
  resourceName: string,
  patternType: number,
  principal: string,
  host: string,
  operation: number,
  permissionType: number,
]

export function aclKey(b: AclBinding): string {
  const fields: StoredBinding = [
    b.resourceType,
    b.resourceName,
    b.patternType,
    b.principal,
    b.host,
    b.operation,
    b.permissionType,
  ]
  return PREFIX + Buffer.from(JSON.stringify(fields)).toString('base64url')
}

function bindingOfKey(key: string): AclBinding | null {
  try {
    const fields = JSON.parse(Buffer.from(key.slice(PREFIX.length), 'base64url').toString()) as StoredBinding
    if (!Array.isArray(fields) || fields.length !== 7) return null
    const [resourceType, resourceName, patternType, principal, host, operation, permissionType] = fields
    return {
      resourceType,
      resourceName,
      patternType,
      principal,
      host,
      operation,
      permissionType,
    } as AclBinding
  } catch {
    // A key under acl/ that no tidelog wrote: not an ACL, so it grants and denies nothing.
    return null
  }
}

export class AclStore {
  private readonly mirror = new Map<string, AclBinding>()
  private revision = 0
  private watch: Watch | null = null
  private closed = false

  private constructor(
    private readonly store: MetadataStore,
    private readonly onChange: (bindings: Iterable<AclBinding>) => void,
    private readonly logger: Logger,
  ) {}

  /** Reads the ACLs, hands them to `onChange`, and follows the store from then on. */
  static async open(
    store: MetadataStore,
    onChange: (bindings: Iterable<AclBinding>) => void,
    logger: Logger,
  ): Promise<AclStore> {
    const acls = new AclStore(store, onChange, logger)
    await acls.reload()
    acls.follow()
    return acls
  }

  close(): void {
    this.closed = true
    this.watch?.cancel()
    this.watch = null
  }

  /**
   * Stores the bindings (as few transactions as the store's limits allow: each binding is a
   * key of its own) and waits until this broker's mirror has them.
   */
  async create(bindings: readonly AclBinding[]): Promise<void> {
    if (bindings.length === 0) return
    await applyInBatches(
      this.store,
      [...new Set(bindings.map(aclKey))].map((key) => ({ type: 'put', key, value: '{}' }) satisfies StoreOp),
    )
    await this.reload()
  }

  /** Every stored binding each filter matches (the store's, not the mirror's, view). */
  async matching(filters: readonly AclBindingFilter[]): Promise<AclBinding[][]> {
    const stored = await this.stored()
    return filters.map((filter) => stored.filter((b) => filterMatches(filter, b)))
  }

  /** Deletes the bindings (in batches, as create) and waits until this broker's mirror lost them. */
  async delete(bindings: readonly AclBinding[]): Promise<void> {
    if (bindings.length === 0) return
    await applyInBatches(
      this.store,
      [...new Set(bindings.map(aclKey))].map((key) => ({ type: 'delete', key }) satisfies StoreOp),
    )
    await this.reload()
  }

  private async stored(): Promise<AclBinding[]> {
    const { kvs } = await this.store.range(PREFIX)
    const bindings: AclBinding[] = []
    for (const kv of kvs) {
      const binding = bindingOfKey(kv.key)
      if (binding !== null) bindings.push(binding)
    }
    return bindings
  }

  private async reload(): Promise<void> {
    const { kvs, revision } = await this.store.range(PREFIX)
    if (revision < this.revision) return
    this.revision = revision
    this.mirror.clear()
    for (const kv of kvs) {
      const binding = bindingOfKey(kv.key)
      if (binding !== null) this.mirror.set(kv.key, binding)
    }
    this.onChange(this.mirror.values())
  }

  private follow(): void {
    this.watch = this.store.watch(
      PREFIX,
      this.revision + 1,
      (events, revision) => this.onEvents(events, revision),
      (error) => {
        if (this.closed || error.code === 'STORE_CLOSED') return
        this.logger.warn({ err: error }, 'ACL watch ended; reloading')
        this.reload().then(
          () => this.follow(),
          (reloadError: unknown) => this.logger.error({ err: reloadError }, 'ACL reload failed'),
        )
      },
    )
  }

  private onEvents(events: readonly WatchEvent[], revision: number): void {
    if (revision <= this.revision) return // already seen through a reload
    this.revision = revision
    for (const { type, kv } of events) {
      const binding = bindingOfKey(kv.key)
      if (binding === null) continue
      if (type === 'put') this.mirror.set(kv.key, binding)
      else this.mirror.delete(kv.key)
    }
    this.onChange(this.mirror.values())
  }
}

/**
 * SCRAM credentials in the cluster's metadata store, one key per user and mechanism
 * (`scram/<mechanism>/<user>`), salted: what AlterUserScramCredentials writes and every
 * broker's SCRAM authentication reads, so a user added on one broker can log in on any.
 */
import type { MetadataStore, StoreOp } from '../metadata/store/metadata-store.js'
import { applyInBatches } from '../metadata/store/txn-batches.js'
import { SCRAM_MECHANISMS, type ScramCredential, type ScramMechanism } from './scram.js'

const PREFIX = 'scram/'

interface StoredCredential {
  readonly salt: string
  readonly storedKey: string
  readonly serverKey: string
  readonly iterations: number
}

export type ScramAlteration =
  | {
      readonly type: 'upsert'
      readonly user: string
      readonly mechanism: ScramMechanism
      readonly credential: ScramCredential
    }
  | { readonly type: 'delete'; readonly user: string; readonly mechanism: ScramMechanism }

export class ScramCredentialStore {
  constructor(private readonly store: MetadataStore) {}

  async get(mechanism: ScramMechanism, user: string): Promise<ScramCredential | null> {
    const kv = await this.store.get(key(mechanism, user))
    if (kv === null) return null
    const stored = JSON.parse(kv.value) as StoredCredential
    return {
      salt: Buffer.from(stored.salt, 'base64'),
      storedKey: Buffer.from(stored.storedKey, 'base64'),
      serverKey: Buffer.from(stored.serverKey, 'base64'),
      iterations: stored.iterations,
    }
  }

  /** Every user with a credential, and the mechanisms and iterations of each. */
  async describe(): Promise<Map<string, { mechanism: ScramMechanism; iterations: number }[]>> {
    const { kvs } = await this.store.range(PREFIX)
    const users = new Map<string, { mechanism: ScramMechanism; iterations: number }[]>()
    for (const kv of kvs) {
      const rest = kv.key.slice(PREFIX.length)
      const slash = rest.indexOf('/')
      const mechanism = rest.slice(0, slash) as ScramMechanism
      if (!(SCRAM_MECHANISMS as readonly string[]).includes(mechanism)) continue
      const user = rest.slice(slash + 1)
      const list = users.get(user) ?? []
      list.push({ mechanism, iterations: (JSON.parse(kv.value) as StoredCredential).iterations })
      users.set(user, list)
    }
    return users
  }

  async exists(mechanism: ScramMechanism, user: string): Promise<boolean> {
    return (await this.store.get(key(mechanism, user))) !== null
  }

  /** Applies the alterations, each user's credential a key of its own, in as few transactions as fit. */
  async alter(alterations: readonly ScramAlteration[]): Promise<void> {
    if (alterations.length === 0) return
    const ops: StoreOp[] = alterations.map((a) =>
      a.type === 'delete'
        ? { type: 'delete', key: key(a.mechanism, a.user) }
        : {
            type: 'put',
            key: key(a.mechanism, a.user),
            value: JSON.stringify({
              salt: a.credential.salt.toString('base64'),
              storedKey: a.credential.storedKey.toString('base64'),
              serverKey: a.credential.serverKey.toString('base64'),
              iterations: a.credential.iterations,
            } satisfies StoredCredential),
          },
    )
    await applyInBatches(this.store, ops)
  }
}

function key(mechanism: ScramMechanism, user: string): string {
  return `${PREFIX}${mechanism}/${user}`
}

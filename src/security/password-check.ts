/**
 * A user's password checked against the cluster's SASL users without a SASL exchange: the
 * schema registry's HTTP basic auth. PLAIN's users are the JAAS `user_<name>` entries of the
 * listeners with PLAIN enabled; SCRAM's are the salted credentials in the metadata store
 * (checked as a SCRAM server would: the password salted with the stored salt and iterations
 * must give the stored key). A SCRAM check costs a PBKDF2 of 4096+ iterations, a few ms of
 * CPU: a successful check is remembered (by a hash of the password, never the password)
 * until the stored credential changes.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import { credentialFromSaltedPassword, SCRAM_MECHANISMS, saltedPassword } from './scram.js'
import type { ScramCredentialStore } from './scram-credentials.js'

/** Where the users come from, read at each check (listeners start after the registry). */
export interface PasswordSources {
  /** The PLAIN users of every listener with PLAIN enabled. */
  plainUsers(): Iterable<ReadonlyMap<string, string>>
  /** The cluster's SCRAM credentials (either mechanism's: the store is cluster-wide, as Kafka's). */
  readonly scramCredentials: ScramCredentialStore
}

/** Remembered successful SCRAM checks; bounded, the oldest dropped first. */
const CACHE_MAX_ENTRIES = 1024

export class PasswordCheck {
  private readonly verified = new Map<string, string>()

  constructor(private readonly sources: PasswordSources) {}

  async verify(user: string, password: string): Promise<boolean> {
    if (user === '' || password === '') return false
    for (const users of this.sources.plainUsers()) {
      const expected = users.get(user)
      if (expected !== undefined && sameText(expected, password)) return true
    }
    for (const mechanism of SCRAM_MECHANISMS) {
      const credential = await this.sources.scramCredentials.get(mechanism, user)
      if (credential === null) continue
      const key = `${mechanism}\u0000${user}`
      // What was verified: this credential (salt, stored key) with this password.
      const proof = createHash('sha256')
        .update(credential.salt)
        .update(credential.storedKey)
        .update(password, 'utf8')
        .digest('base64')
      if (this.verified.get(key) === proof) return true
      const salted = saltedPassword(mechanism, password, credential.salt, credential.iterations)
      const computed = credentialFromSaltedPassword(mechanism, salted, credential.salt, credential.iterations)
      if (
        computed.storedKey.length === credential.storedKey.length &&
        timingSafeEqual(computed.storedKey, credential.storedKey)
      ) {
        this.verified.delete(key)
        this.verified.set(key, proof)
        if (this.verified.size > CACHE_MAX_ENTRIES) this.verified.delete(this.verified.keys().next().value!)
        return true
      }
    }
    return false
  }
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8')
  const y = Buffer.from(b, 'utf8')
  return x.length === y.length && timingSafeEqual(x, y)
}

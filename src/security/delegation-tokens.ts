/**
 * Delegation tokens (KIP-48) in the cluster's metadata store, one key per token
 * (`delegation-tokens/<token id>`), so a token created through one broker authenticates on
 * any: Kafka's DelegationTokenManager and DelegationTokenControlManager rules. Enabled by
 * delegation.token.secret.key (the HMAC key, which every broker must share); a token's HMAC
 * is HmacSHA512(secret key, token id), and a SCRAM login with `tokenauth=true` names the
 * token id as user and the HMAC (base64) as password, authenticating as the token's owner.
 *
 * Expiry: a token lives until its expiry timestamp (issue time + delegation.token.expiry.time.ms,
 * pushed forward by renewals, never past its max timestamp: issue time +
 * min(requested max lifetime, delegation.token.max.lifetime.ms)). An expired token no longer
 * authenticates, is left out of DescribeDelegationToken, and is deleted from the store by
 * the next describe, login attempt or expiry check that finds it.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto'
import type { Clock } from '../common/clock.js'
import type { Random } from '../common/random.js'
import type { MetadataStore } from '../metadata/store/metadata-store.js'
import { ErrorCode } from '../protocol/error-codes.js'
import type { KafkaPrincipal } from './principal.js'
import {
  credentialFromSaltedPassword,
  type ScramCredential,
  type ScramMechanism,
  saltedPassword,
} from './scram.js'

const PREFIX = 'delegation-tokens/'
/** Kafka's ScramMechanism minIterations: the iterations of a token's SCRAM credential. */
const TOKEN_SCRAM_ITERATIONS = 4096
/** Compare-and-set retries of a renewal racing another broker's. */
const MAX_UPDATE_ATTEMPTS = 10

export interface DelegationToken {
  readonly tokenId: string
  readonly hmac: Buffer
  readonly owner: KafkaPrincipal
  readonly requester: KafkaPrincipal
  readonly renewers: readonly KafkaPrincipal[]
  readonly issueTimestampMs: number
  readonly expiryTimestampMs: number
  readonly maxTimestampMs: number
}

export interface DelegationTokenSettings {
  /** delegation.token.secret.key (or the deprecated delegation.token.master.key); null: tokens off. */
  readonly secretKey: string | null
  /** delegation.token.max.lifetime.ms */
  readonly maxLifetimeMs: number
  /** delegation.token.expiry.time.ms: the renewal period a token starts with and renews by by default. */
  readonly expiryTimeMs: number
}

/** A renewal or expiry's outcome: an error code, and the new expiry timestamp when NONE. */
export interface TokenUpdate {
  readonly errorCode: number
  readonly expiryTimestampMs: number
}

interface StoredToken {
  readonly hmac: string
  readonly owner: string
  readonly requester: string
  readonly renewers: readonly string[]
  readonly issueTimestampMs: number
  readonly expiryTimestampMs: number
  readonly maxTimestampMs: number
}

export class DelegationTokenStore {
  constructor(
    private readonly store: MetadataStore,
    private readonly clock: Clock,
    private readonly random: Random,
    private readonly settings: DelegationTokenSettings,
  ) {}

  /** Whether delegation.token.secret.key is set (else every token request is DELEGATION_TOKEN_AUTH_DISABLED). */
  get enabled(): boolean {
    return this.settings.secretKey !== null && this.settings.secretKey !== ''
  }

  /** A new token: `maxLifetimeMs` <= 0 takes delegation.token.max.lifetime.ms, a larger one is capped by it. */
  async create(
    owner: KafkaPrincipal,
    requester: KafkaPrincipal,
    renewers: readonly KafkaPrincipal[],
    maxLifetimeMs: number,
  ): Promise<DelegationToken> {
    const nowMs = this.clock.nowMs()
    const lifetimeMs =
      maxLifetimeMs <= 0 ? this.settings.maxLifetimeMs : Math.min(maxLifetimeMs, this.settings.maxLifetimeMs)
    const maxTimestampMs = nowMs + lifetimeMs
    // Kafka's CoreUtils.generateUuidAsBase64: 16 random bytes, base64url without padding.
    const tokenId = this.random.bytes(16).toString('base64url')
    const token: DelegationToken = {
      tokenId,
      hmac: this.hmacOf(tokenId),
      owner,
      requester,
      renewers: [...renewers],
      issueTimestampMs: nowMs,
      expiryTimestampMs: Math.min(maxTimestampMs, nowMs + this.settings.expiryTimeMs),
      maxTimestampMs,
    }
    const result = await this.store.txn(
      [{ key: PREFIX + tokenId, version: 0 }],
      [{ type: 'put', key: PREFIX + tokenId, value: encode(token) }],
    )
    if (!result.succeeded) throw new Error(`delegation token id ${tokenId} already exists`)
    return token
  }

  /** Every live token; expired ones found on the way are deleted. */
  async list(): Promise<DelegationToken[]> {
    const { kvs } = await this.store.range(PREFIX)
    const nowMs = this.clock.nowMs()
    const live: DelegationToken[] = []
    const expired: string[] = []
    for (const kv of kvs) {
      const token = decode(kv.key.slice(PREFIX.length), kv.value)
      if (isExpired(token, nowMs)) expired.push(kv.key)
      else live.push(token)
    }
    await this.deleteKeys(expired)
    return live
  }

  /** Deletes every expired token (the periodic expiry check); resolves with how many. */
  async removeExpired(): Promise<number> {
    const { kvs } = await this.store.range(PREFIX)
    const nowMs = this.clock.nowMs()
    const expired = kvs.filter((kv) => isExpired(decode(kv.key.slice(PREFIX.length), kv.value), nowMs))
    await this.deleteKeys(expired.map((kv) => kv.key))
    return expired.length
  }

  /**
   * RenewDelegationToken: the token the HMAC names must exist (DELEGATION_TOKEN_NOT_FOUND),
   * be live (DELEGATION_TOKEN_EXPIRED), and `principal` must be its owner or a renewer
   * (DELEGATION_TOKEN_OWNER_MISMATCH); its expiry moves to now + `renewPeriodMs` (the
   * default renewal period when negative), capped by its max timestamp.
   */
  renew(hmac: Buffer, principal: KafkaPrincipal, renewPeriodMs: number): Promise<TokenUpdate> {
    return this.update(hmac, principal, (token, nowMs) => {
      const periodMs = renewPeriodMs < 0 ? this.settings.expiryTimeMs : renewPeriodMs
      return Math.min(token.maxTimestampMs, nowMs + periodMs)
    })
  }

  /**
   * ExpireDelegationToken: the same checks; the expiry moves to now + `expiryTimePeriodMs`,
   * capped by the max timestamp; one in the past (a negative period) deletes the token now.
   */
  expire(hmac: Buffer, principal: KafkaPrincipal, expiryTimePeriodMs: number): Promise<TokenUpdate> {
    return this.update(hmac, principal, (token, nowMs) =>
      Math.min(token.maxTimestampMs, nowMs + expiryTimePeriodMs),
    )
  }

  /**
   * The SCRAM credential of a live token (its HMAC in base64 as the password) and the owner
   * a login with it becomes; null for an unknown or expired token.
   */
  async scramLogin(
    mechanism: ScramMechanism,
    tokenId: string,
  ): Promise<{ credential: ScramCredential; owner: KafkaPrincipal } | null> {
    if (!this.enabled) return null
    const kv = await this.store.get(PREFIX + tokenId)
    if (kv === null) return null
    const token = decode(tokenId, kv.value)
    if (isExpired(token, this.clock.nowMs())) {
      await this.deleteKeys([kv.key])
      return null
    }
    // Kafka salts each broker's copy at random; a salt derived from the id serves as well
    // and needs nothing kept beside the token.
    const salt = createHash('sha256').update(`tidelog-delegation-token:${tokenId}`).digest()
    const salted = saltedPassword(mechanism, token.hmac.toString('base64'), salt, TOKEN_SCRAM_ITERATIONS)
    return {
      credential: credentialFromSaltedPassword(mechanism, salted, salt, TOKEN_SCRAM_ITERATIONS),
      owner: token.owner,
    }
  }

  private async update(
    hmac: Buffer,
    principal: KafkaPrincipal,
    nextExpiry: (token: DelegationToken, nowMs: number) => number,
  ): Promise<TokenUpdate> {
    for (let attempt = 1; attempt <= MAX_UPDATE_ATTEMPTS; attempt++) {
      const found = await this.findByHmac(hmac)
      if (found === null) return { errorCode: ErrorCode.DELEGATION_TOKEN_NOT_FOUND, expiryTimestampMs: -1 }
      const { token, key, version } = found
      const nowMs = this.clock.nowMs()
      if (isExpired(token, nowMs))
        return { errorCode: ErrorCode.DELEGATION_TOKEN_EXPIRED, expiryTimestampMs: -1 }
      if (!mayRenew(token, principal)) {
        return { errorCode: ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, expiryTimestampMs: -1 }
      }
      const expiryTimestampMs = nextExpiry(token, nowMs)
      const op =
        expiryTimestampMs < nowMs
          ? ({ type: 'delete', key } as const)
          : ({ type: 'put', key, value: encode({ ...token, expiryTimestampMs }) } as const)
      const result = await this.store.txn([{ key, version }], [op])
      if (result.succeeded) return { errorCode: ErrorCode.NONE, expiryTimestampMs }
    }
    throw new Error(`delegation token update kept conflicting with others (${MAX_UPDATE_ATTEMPTS} attempts)`)
  }

  private async findByHmac(
    hmac: Buffer,
  ): Promise<{ token: DelegationToken; key: string; version: number } | null> {
    const { kvs } = await this.store.range(PREFIX)
    for (const kv of kvs) {
      const token = decode(kv.key.slice(PREFIX.length), kv.value)
      if (token.hmac.length === hmac.length && timingSafeEqual(token.hmac, hmac)) {
        return { token, key: kv.key, version: kv.version }
      }
    }
    return null
  }

  private hmacOf(tokenId: string): Buffer {
    return createHmac('sha512', Buffer.from(this.settings.secretKey ?? '', 'utf8'))
      .update(tokenId, 'utf8')
      .digest()
  }

  private async deleteKeys(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return
    // Another broker may delete the same expired token first: deleting a missing key is fine.
    await this.store.txn(
      [],
      keys.map((key) => ({ type: 'delete', key }) as const),
    )
  }
}

/** Kafka's allowedToRenew: the owner, or one of the renewers. */
function mayRenew(token: DelegationToken, principal: KafkaPrincipal): boolean {
  const text = principalKey(principal)
  return principalKey(token.owner) === text || token.renewers.some((r) => principalKey(r) === text)
}

function isExpired(token: DelegationToken, nowMs: number): boolean {
  return token.expiryTimestampMs < nowMs || token.maxTimestampMs < nowMs
}

function principalKey(principal: KafkaPrincipal): string {
  return `${principal.type}:${principal.name}`
}

function parsePrincipal(text: string): KafkaPrincipal {
  const colon = text.indexOf(':')
  return { type: 'User', name: colon < 0 ? text : text.slice(colon + 1) }
}

function encode(token: DelegationToken): string {
  return JSON.stringify({
    hmac: token.hmac.toString('base64'),
    owner: principalKey(token.owner),
    requester: principalKey(token.requester),
    renewers: token.renewers.map(principalKey),
    issueTimestampMs: token.issueTimestampMs,
    expiryTimestampMs: token.expiryTimestampMs,
    maxTimestampMs: token.maxTimestampMs,
  } satisfies StoredToken)
}

function decode(tokenId: string, value: string): DelegationToken {
  const stored = JSON.parse(value) as StoredToken
  return {
    tokenId,
    hmac: Buffer.from(stored.hmac, 'base64'),
    owner: parsePrincipal(stored.owner),
    requester: parsePrincipal(stored.requester),
    renewers: stored.renewers.map(parsePrincipal),
    issueTimestampMs: stored.issueTimestampMs,
    expiryTimestampMs: stored.expiryTimestampMs,
    maxTimestampMs: stored.maxTimestampMs,
  }
}

export { principalKey }

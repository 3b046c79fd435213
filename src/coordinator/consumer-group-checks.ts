/**
 * Checks of KIP-848 consumer groups that need no heartbeat step: a subscription's regular
 * expression, and the member and epoch of an offset commit or fetch.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import type { ConsumerGroupState } from './group.js'

const regexCache = new Map<string, RegExp | null>()
const REGEX_CACHE_MAX = 1024

/**
 * The subscription's regular expression, matched against whole topic names as Kafka's
 * Pattern.matches (RE2J there). JavaScript's RegExp is a superset of RE2's syntax for what
 * clients send (classes, alternation, quantifiers); RE2-only constructs (\C, \pN without
 * braces) are refused as invalid, and backreferences that RE2 refuses are accepted here.
 */
export function compileRegex(source: string): RegExp | null {
  if (regexCache.has(source)) return regexCache.get(source) ?? null
  let compiled: RegExp | null
  try {
    compiled = new RegExp(`^(?:${source})$`, 'u')
  } catch {
    compiled = null
  }
  if (regexCache.size >= REGEX_CACHE_MAX) regexCache.clear()
  regexCache.set(source, compiled)
  return compiled
}

/**
 * Kafka's ConsumerGroup.validateOffsetCommit / validateOffsetFetch: a request without a
 * member (epoch < 0, as the admin client sends) may commit only to an empty group and may
 * always fetch; a member must be known and send its current epoch: a newer one is
 * FENCED_MEMBER_EPOCH, an older one STALE_MEMBER_EPOCH (retriable by the client).
 */
export function validateConsumerOffsetRequest(
  state: ConsumerGroupState,
  memberId: string,
  memberEpoch: number,
  kind: 'commit' | 'fetch',
): number {
  if (kind === 'fetch' && memberEpoch < 0 && memberId === '') return ErrorCode.NONE
  if (kind === 'commit' && memberEpoch < 0 && state.members.size === 0) return ErrorCode.NONE
  const member = state.members.get(memberId)
  if (!member) return ErrorCode.UNKNOWN_MEMBER_ID
  if (memberEpoch > member.memberEpoch) return ErrorCode.FENCED_MEMBER_EPOCH
  if (memberEpoch < member.memberEpoch) return ErrorCode.STALE_MEMBER_EPOCH
  return ErrorCode.NONE
}

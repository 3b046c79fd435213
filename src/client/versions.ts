/**
 * The API versions this client speaks, per API key. A request goes out at the highest
 * version inside both this range and the broker's advertised range (as librdkafka and
 * @platformatic/kafka do). Ranges are capped where a newer version changes semantics the
 * client does not implement yet: Fetch stops at 12 because 13+ addresses topics by id.
 */
import { ApiKey } from '../protocol/generated/index.js'

export interface VersionRange {
  readonly min: number
  readonly max: number
}

export const CLIENT_VERSIONS: ReadonlyMap<number, VersionRange> = new Map([
  // Produce v3 is the first with record batches (magic 2); v13 addresses topics by id. v12
  // adds a transactional batch's partition to its transaction (transaction version 2).
  [ApiKey.Produce, { min: 3, max: 12 }],
  // Fetch v4 is the first returning record batches; 13+ uses topic ids.
  [ApiKey.Fetch, { min: 4, max: 12 }],
  [ApiKey.ListOffsets, { min: 1, max: 7 }],
  [ApiKey.Metadata, { min: 1, max: 12 }],
  [ApiKey.ApiVersions, { min: 0, max: 3 }],
  [ApiKey.CreateTopics, { min: 2, max: 7 }],
  [ApiKey.DeleteTopics, { min: 1, max: 6 }],
  [ApiKey.DeleteRecords, { min: 0, max: 2 }],
  [ApiKey.DescribeConfigs, { min: 1, max: 4 }],
  [ApiKey.AlterConfigs, { min: 0, max: 2 }],
  [ApiKey.CreatePartitions, { min: 0, max: 3 }],
  [ApiKey.IncrementalAlterConfigs, { min: 0, max: 1 }],
  [ApiKey.DescribeCluster, { min: 0, max: 1 }],
  // Idempotent producers (no transactional id): v3+ carry producer id and epoch, sent as -1.
  [ApiKey.InitProducerId, { min: 0, max: 5 }],
  // Group APIs: probed so the CLI can say whether the broker serves groups; used once the
  // groups issue lands.
  [ApiKey.ListGroups, { min: 0, max: 4 }],
  [ApiKey.DescribeGroups, { min: 0, max: 5 }],
  [ApiKey.FindCoordinator, { min: 0, max: 4 }],
  // Transactions. AddPartitionsToTxn v4+ is broker-to-broker (batched, verify only). EndTxn
  // v5 and TxnOffsetCommit v5 are transaction version 2's (KIP-890 part 2): a transactional
  // producer at version 1 caps them, and Produce, at TRANSACTION_V1_MAX_VERSIONS.
  [ApiKey.AddPartitionsToTxn, { min: 0, max: 3 }],
  [ApiKey.AddOffsetsToTxn, { min: 0, max: 4 }],
  [ApiKey.EndTxn, { min: 0, max: 5 }],
  // v6 addresses topics by id.
  [ApiKey.TxnOffsetCommit, { min: 0, max: 5 }],
  [ApiKey.ListTransactions, { min: 0, max: 1 }],
  [ApiKey.DescribeTransactions, { min: 0, max: 0 }],
  // ACLs: v1 is the first with pattern types (PREFIXED).
  [ApiKey.CreateAcls, { min: 1, max: 3 }],
  [ApiKey.DescribeAcls, { min: 1, max: 3 }],
  [ApiKey.DeleteAcls, { min: 1, max: 3 }],
  [ApiKey.DescribeClientQuotas, { min: 0, max: 1 }],
  [ApiKey.AlterClientQuotas, { min: 0, max: 1 }],
  // Group offsets: v10 addresses topics by id, which this client does not do.
  [ApiKey.OffsetCommit, { min: 0, max: 9 }],
  [ApiKey.OffsetFetch, { min: 0, max: 9 }],
  // Share groups (KIP-932): v1 is the first production version (v0 was early access). ShareFetch
  // and ShareAcknowledge v2 add record_limit acquisition and RENEW (KIP-1222).
  [ApiKey.ShareGroupHeartbeat, { min: 1, max: 1 }],
  [ApiKey.ShareFetch, { min: 1, max: 2 }],
  [ApiKey.ShareAcknowledge, { min: 1, max: 2 }],
])

/**
 * The highest versions a transactional producer at transaction version 1 sends (Java's
 * ProduceRequest.LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2 and the EndTxn and TxnOffsetCommit
 * builders): the next ones ask the broker for version 2's implicit adds and epoch bumps.
 */
export const TRANSACTION_V1_MAX_VERSIONS = { produce: 11, endTxn: 4, txnOffsetCommit: 4 } as const

/** The lowest versions of transaction version 2, which the broker must serve for the client to use it. */
export const TRANSACTION_V2_MIN_VERSIONS = { produce: 12, endTxn: 5, txnOffsetCommit: 5 } as const

/** The API keys a broker must serve for consumer-group membership (classic protocol). */
export const GROUP_API_KEYS: readonly number[] = [
  ApiKey.FindCoordinator,
  ApiKey.JoinGroup,
  ApiKey.SyncGroup,
  ApiKey.Heartbeat,
  ApiKey.LeaveGroup,
  ApiKey.OffsetCommit,
  ApiKey.OffsetFetch,
]

/** Highest version in both ranges, or -1 when they do not overlap. */
export function pickVersion(client: VersionRange, broker: VersionRange): number {
  const max = Math.min(client.max, broker.max)
  return max >= Math.max(client.min, broker.min) ? max : -1
}

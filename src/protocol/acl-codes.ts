/**
 * The wire codes of Kafka's ACL fields (org.apache.kafka.common.acl and .resource):
 * resource types, pattern types, operations and permission types, as CreateAcls,
 * DescribeAcls and DeleteAcls carry them; shared by the broker's authorizer and the client.
 */

export const ResourceType = {
  UNKNOWN: 0,
  ANY: 1,
  TOPIC: 2,
  GROUP: 3,
  CLUSTER: 4,
  TRANSACTIONAL_ID: 5,
  DELEGATION_TOKEN: 6,
  USER: 7,
} as const
export type ResourceType = (typeof ResourceType)[keyof typeof ResourceType]

export const PatternType = { UNKNOWN: 0, ANY: 1, MATCH: 2, LITERAL: 3, PREFIXED: 4 } as const
export type PatternType = (typeof PatternType)[keyof typeof PatternType]

export const AclOperation = {
  UNKNOWN: 0,
  ANY: 1,
  ALL: 2,
  READ: 3,
  WRITE: 4,
  CREATE: 5,
  DELETE: 6,
  ALTER: 7,
  DESCRIBE: 8,
  CLUSTER_ACTION: 9,
  DESCRIBE_CONFIGS: 10,
  ALTER_CONFIGS: 11,
  IDEMPOTENT_WRITE: 12,
  CREATE_TOKENS: 13,
  DESCRIBE_TOKENS: 14,
} as const
export type AclOperation = (typeof AclOperation)[keyof typeof AclOperation]

export const AclPermissionType = { UNKNOWN: 0, ANY: 1, DENY: 2, ALLOW: 3 } as const
export type AclPermissionType = (typeof AclPermissionType)[keyof typeof AclPermissionType]

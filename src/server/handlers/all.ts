import { addOffsetsToTxnHandler } from './add-offsets-to-txn.js'
import { addPartitionsToTxnHandler } from './add-partitions-to-txn.js'
import { alterClientQuotasHandler } from './alter-client-quotas.js'
import { alterConfigsHandler } from './alter-configs.js'
import { alterPartitionReassignmentsHandler } from './alter-partition-reassignments.js'
import { alterReplicaLogDirsHandler } from './alter-replica-log-dirs.js'
import { alterShareGroupOffsetsHandler } from './alter-share-group-offsets.js'
import { alterUserScramCredentialsHandler } from './alter-user-scram-credentials.js'
import { apiVersionsHandler } from './api-versions.js'
import { consumerGroupDescribeHandler } from './consumer-group-describe.js'
import { consumerGroupHeartbeatHandler } from './consumer-group-heartbeat.js'
import { createAclsHandler } from './create-acls.js'
import { createDelegationTokenHandler } from './create-delegation-token.js'
import { createPartitionsHandler } from './create-partitions.js'
import { createTopicsHandler } from './create-topics.js'
import { deleteAclsHandler } from './delete-acls.js'
import { deleteGroupsHandler } from './delete-groups.js'
import { deleteRecordsHandler } from './delete-records.js'
import { deleteShareGroupOffsetsHandler } from './delete-share-group-offsets.js'
import { deleteShareGroupStateHandler } from './delete-share-group-state.js'
import { deleteTopicsHandler } from './delete-topics.js'
import { describeAclsHandler } from './describe-acls.js'
import { describeClientQuotasHandler } from './describe-client-quotas.js'
import { describeClusterHandler } from './describe-cluster.js'
import { describeConfigsHandler } from './describe-configs.js'
import { describeDelegationTokenHandler } from './describe-delegation-token.js'
import { describeGroupsHandler } from './describe-groups.js'
import { describeLogDirsHandler } from './describe-log-dirs.js'
import { describeProducersHandler } from './describe-producers.js'
import { describeShareGroupOffsetsHandler } from './describe-share-group-offsets.js'
import { describeTopicPartitionsHandler } from './describe-topic-partitions.js'
import { describeTransactionsHandler } from './describe-transactions.js'
import { describeUserScramCredentialsHandler } from './describe-user-scram-credentials.js'
import { electLeadersHandler } from './elect-leaders.js'
import { endTxnHandler } from './end-txn.js'
import { expireDelegationTokenHandler } from './expire-delegation-token.js'
import { fetchHandler } from './fetch.js'
import { findCoordinatorHandler } from './find-coordinator.js'
import { getTelemetrySubscriptionsHandler } from './get-telemetry-subscriptions.js'
import { heartbeatHandler } from './heartbeat.js'
import { incrementalAlterConfigsHandler } from './incremental-alter-configs.js'
import { initProducerIdHandler } from './init-producer-id.js'
import { initializeShareGroupStateHandler } from './initialize-share-group-state.js'
import { joinGroupHandler } from './join-group.js'
import { leaveGroupHandler } from './leave-group.js'
import { listClientMetricsResourcesHandler } from './list-client-metrics-resources.js'
import { listGroupsHandler } from './list-groups.js'
import { listOffsetsHandler } from './list-offsets.js'
import { listPartitionReassignmentsHandler } from './list-partition-reassignments.js'
import { listTransactionsHandler } from './list-transactions.js'
import { metadataHandler } from './metadata.js'
import { offsetCommitHandler } from './offset-commit.js'
import { offsetDeleteHandler } from './offset-delete.js'
import { offsetFetchHandler } from './offset-fetch.js'
import { offsetForLeaderEpochHandler } from './offset-for-leader-epoch.js'
import { produceHandler } from './produce.js'
import { pushTelemetryHandler } from './push-telemetry.js'
import { readShareGroupStateHandler } from './read-share-group-state.js'
import { readShareGroupStateSummaryHandler } from './read-share-group-state-summary.js'
import type { AnyApiHandler } from './registry.js'
import { renewDelegationTokenHandler } from './renew-delegation-token.js'
import { saslAuthenticateHandler } from './sasl-authenticate.js'
import { saslHandshakeHandler } from './sasl-handshake.js'
import { shareAcknowledgeHandler } from './share-acknowledge.js'
import { shareFetchHandler } from './share-fetch.js'
import { shareGroupDescribeHandler } from './share-group-describe.js'
import { shareGroupHeartbeatHandler } from './share-group-heartbeat.js'
import { streamsGroupDescribeHandler } from './streams-group-describe.js'
import { streamsGroupHeartbeatHandler } from './streams-group-heartbeat.js'
import { streamsGroupTopologyDescriptionUpdateHandler } from './streams-group-topology-description-update.js'
import { syncGroupHandler } from './sync-group.js'
import { txnOffsetCommitHandler } from './txn-offset-commit.js'
import { updateFeaturesHandler } from './update-features.js'
import { writeShareGroupStateHandler } from './write-share-group-state.js'
import { writeTxnMarkersHandler } from './write-txn-markers.js'

/** Every API this broker serves; ApiVersions advertises exactly these ranges. */
export const allHandlers: readonly AnyApiHandler[] = [
  produceHandler,
  fetchHandler,
  listOffsetsHandler,
  metadataHandler,
  apiVersionsHandler,
  saslHandshakeHandler,
  saslAuthenticateHandler,
  describeUserScramCredentialsHandler,
  alterUserScramCredentialsHandler,
  describeClientQuotasHandler,
  alterClientQuotasHandler,
  deleteRecordsHandler,
  describeLogDirsHandler,
  electLeadersHandler,
  alterPartitionReassignmentsHandler,
  alterReplicaLogDirsHandler,
  listPartitionReassignmentsHandler,
  offsetForLeaderEpochHandler,
  createTopicsHandler,
  deleteTopicsHandler,
  createPartitionsHandler,
  describeConfigsHandler,
  alterConfigsHandler,
  incrementalAlterConfigsHandler,
  describeClusterHandler,
  describeTopicPartitionsHandler,
  initProducerIdHandler,
  findCoordinatorHandler,
  joinGroupHandler,
  syncGroupHandler,
  heartbeatHandler,
  leaveGroupHandler,
  offsetCommitHandler,
  offsetFetchHandler,
  listGroupsHandler,
  describeGroupsHandler,
  deleteGroupsHandler,
  consumerGroupHeartbeatHandler,
  consumerGroupDescribeHandler,
  shareGroupHeartbeatHandler,
  shareGroupDescribeHandler,
  shareFetchHandler,
  shareAcknowledgeHandler,
  describeShareGroupOffsetsHandler,
  alterShareGroupOffsetsHandler,
  deleteShareGroupOffsetsHandler,
  initializeShareGroupStateHandler,
  deleteShareGroupStateHandler,
  readShareGroupStateSummaryHandler,
  readShareGroupStateHandler,
  writeShareGroupStateHandler,
  streamsGroupHeartbeatHandler,
  streamsGroupDescribeHandler,
  streamsGroupTopologyDescriptionUpdateHandler,
  offsetDeleteHandler,
  writeTxnMarkersHandler,
  describeProducersHandler,
  addPartitionsToTxnHandler,
  addOffsetsToTxnHandler,
  endTxnHandler,
  describeTransactionsHandler,
  listTransactionsHandler,
  txnOffsetCommitHandler,
  describeAclsHandler,
  createAclsHandler,
  deleteAclsHandler,
  getTelemetrySubscriptionsHandler,
  pushTelemetryHandler,
  listClientMetricsResourcesHandler,
  createDelegationTokenHandler,
  renewDelegationTokenHandler,
  expireDelegationTokenHandler,
  describeDelegationTokenHandler,
  updateFeaturesHandler,
]

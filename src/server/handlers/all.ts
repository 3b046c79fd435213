import { alterConfigsHandler } from './alter-configs.js'
import { apiVersionsHandler } from './api-versions.js'
import { createPartitionsHandler } from './create-partitions.js'
import { createTopicsHandler } from './create-topics.js'
import { deleteRecordsHandler } from './delete-records.js'
import { deleteTopicsHandler } from './delete-topics.js'
import { describeClusterHandler } from './describe-cluster.js'
import { describeConfigsHandler } from './describe-configs.js'
import { describeLogDirsHandler } from './describe-log-dirs.js'
import { electLeadersHandler } from './elect-leaders.js'
import { fetchHandler } from './fetch.js'
import { incrementalAlterConfigsHandler } from './incremental-alter-configs.js'
import { initProducerIdHandler } from './init-producer-id.js'
import { listOffsetsHandler } from './list-offsets.js'
import { metadataHandler } from './metadata.js'
import { offsetForLeaderEpochHandler } from './offset-for-leader-epoch.js'
import { produceHandler } from './produce.js'
import type { AnyApiHandler } from './registry.js'

/** Every API this broker serves; ApiVersions advertises exactly these ranges. */
export const allHandlers: readonly AnyApiHandler[] = [
  produceHandler,
  fetchHandler,
  listOffsetsHandler,
  metadataHandler,
  apiVersionsHandler,
  deleteRecordsHandler,
  describeLogDirsHandler,
  electLeadersHandler,
  offsetForLeaderEpochHandler,
  createTopicsHandler,
  deleteTopicsHandler,
  createPartitionsHandler,
  describeConfigsHandler,
  alterConfigsHandler,
  incrementalAlterConfigsHandler,
  describeClusterHandler,
  initProducerIdHandler,
]

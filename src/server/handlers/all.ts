import { apiVersionsHandler } from './api-versions.js'
import { deleteRecordsHandler } from './delete-records.js'
import { describeLogDirsHandler } from './describe-log-dirs.js'
import { fetchHandler } from './fetch.js'
import { listOffsetsHandler } from './list-offsets.js'
import { metadataHandler } from './metadata.js'
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
]

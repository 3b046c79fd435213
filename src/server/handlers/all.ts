import { apiVersionsHandler } from './api-versions.js'
import { metadataHandler } from './metadata.js'
import type { AnyApiHandler } from './registry.js'

/** Every API this broker serves; ApiVersions advertises exactly these ranges. */
export const allHandlers: readonly AnyApiHandler[] = [apiVersionsHandler, metadataHandler]

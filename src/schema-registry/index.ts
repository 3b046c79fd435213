/**
 * A schema registry built into the broker, compatible with Confluent Schema Registry's REST
 * API: registry.ts (operations, single writer), store.ts (state from `_schemas`),
 * schemas-log.ts (the topic), formats/ (Avro, JSON Schema, Protobuf), http.ts (REST).
 * Imported on the first registry request only (src/ops/schema-registry-service.ts).
 */
export type { RegistryCaller, RegistryOperation, RegistryResource, RegistrySecurity } from './auth.js'
export { Errors, RegistryError } from './errors.js'
export { BODY_MAX_BYTES, handleRegistryRequest } from './http.js'
export { addRegistryPeer, findRegistryPeer, type RegistryPeer } from './peers.js'
export { type DecodedRecord, type RegistryHost, SchemaRegistry } from './registry.js'
export { SCHEMAS_TOPIC } from './schemas-log.js'

/**
 * The schema formats, each imported on first use so a broker that never sees an Avro, JSON
 * or Protobuf schema never loads avsc, ajv or protobufjs (docs/startup.md).
 */
import type { SchemaFormat, SchemaType } from '../types.js'

const loading = new Map<SchemaType, Promise<SchemaFormat>>()

export function loadFormat(type: SchemaType): Promise<SchemaFormat> {
  let format = loading.get(type)
  if (!format) {
    format =
      type === 'AVRO'
        ? import('./avro.js').then((m) => m.avroFormat)
        : type === 'JSON'
          ? import('./json-schema.js').then((m) => m.jsonSchemaFormat)
          : import('./protobuf.js').then((m) => m.protobufFormat)
    loading.set(type, format)
  }
  return format
}

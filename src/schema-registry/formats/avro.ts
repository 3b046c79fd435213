/**
 * Avro through avsc. Compatibility is Avro's schema resolution: avsc's `createResolver`
 * throws when a reader cannot read what a writer wrote (a field without a default added, a
 * type changed beyond the promotions int→long→float→double and string↔bytes, a record or
 * enum renamed without an alias, a symbol removed without a default...), which is what
 * Confluent's AvroCompatibilityChecker asks of Avro's own SchemaCompatibility.
 *
 * Referenced schemas (named types registered under other subjects) are parsed first into
 * the same avsc registry, so the schema can name them.
 */
import avro from 'avsc'
import type { ParsedSchema, ResolvedReference, SchemaFormat } from '../types.js'

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new Error(`is not valid JSON: ${(error as Error).message}`)
  }
}

function forSchema(schema: unknown, registry: Record<string, avro.Type>): avro.Type {
  // avsc's default wraps no unions and accepts any logical type name, as Avro's parser does.
  return avro.Type.forSchema(schema as avro.Schema, { registry })
}

export const avroFormat: SchemaFormat = {
  type: 'AVRO',

  parse(schema: string, references: readonly ResolvedReference[], normalize: boolean): ParsedSchema {
    const registry: Record<string, avro.Type> = {}
    for (const reference of references) forSchema(parseJson(reference.schema), registry)
    const json = parseJson(schema)
    const type = forSchema(json, registry)
    // Normal form: avsc's canonical schema with defaults, aliases and order kept (names full).
    // A schema with references keeps its own text: the normal form would inline them.
    const canonical =
      normalize && references.length === 0
        ? JSON.stringify(type.schema({ exportAttrs: true }))
        : JSON.stringify(json)
    return { type: 'AVRO', canonical, parsed: type }
  },

  decode(schema: ParsedSchema, payload: Buffer): unknown {
    return (schema.parsed as avro.Type).fromBuffer(payload)
  },

  readerCanRead(reader: ParsedSchema, writer: ParsedSchema): string[] {
    try {
      ;(reader.parsed as avro.Type).createResolver(writer.parsed as avro.Type)
      return []
    } catch (error) {
      return [`{errorType:'READER_CANNOT_READ_WRITER', description:'${(error as Error).message}'}`]
    }
  },
}

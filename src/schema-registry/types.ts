/** The registry's vocabulary, in Confluent's names. */
import type { SaslOptions, SslOptions } from '../client/security-options.js'
import type { BrokerId } from '../common/types.js'

export type SchemaType = 'AVRO' | 'JSON' | 'PROTOBUF'
export const SCHEMA_TYPES: readonly SchemaType[] = ['JSON', 'PROTOBUF', 'AVRO']

export const COMPATIBILITY_LEVELS = [
  'NONE',
  'BACKWARD',
  'BACKWARD_TRANSITIVE',
  'FORWARD',
  'FORWARD_TRANSITIVE',
  'FULL',
  'FULL_TRANSITIVE',
] as const
export type CompatibilityLevel = (typeof COMPATIBILITY_LEVELS)[number]
export const DEFAULT_COMPATIBILITY: CompatibilityLevel = 'BACKWARD'

export const MODES = ['READWRITE', 'READONLY', 'READONLY_OVERRIDE', 'IMPORT'] as const
export type Mode = (typeof MODES)[number]
export const DEFAULT_MODE: Mode = 'READWRITE'

export function isCompatibilityLevel(value: unknown): value is CompatibilityLevel {
  return typeof value === 'string' && (COMPATIBILITY_LEVELS as readonly string[]).includes(value)
}

export function isMode(value: unknown): value is Mode {
  return typeof value === 'string' && (MODES as readonly string[]).includes(value)
}

/** A reference to a schema registered under another subject (Confluent's SchemaReference). */
export interface SchemaReference {
  /** Avro: the referenced full name; JSON: the `$ref` URL; Protobuf: the import path. */
  readonly name: string
  readonly subject: string
  readonly version: number
}

/** One version of one subject, as the `_schemas` topic holds it (Confluent's SchemaValue). */
export interface SchemaRecord {
  readonly subject: string
  readonly version: number
  readonly id: number
  readonly schemaType: SchemaType
  readonly schema: string
  readonly references: readonly SchemaReference[]
  readonly deleted: boolean
}

/** A schema as a format parsed it, with what its referenced schemas contributed. */
export interface ParsedSchema {
  readonly type: SchemaType
  /** The text stored and compared: the submitted schema in the format's canonical form. */
  readonly canonical: string
  /** The format library's object (an avsc Type, a JSON Schema object, a protobufjs Root). */
  readonly parsed: unknown
}

/** A referenced schema, resolved: the name it is referenced by and its text. */
export interface ResolvedReference {
  readonly name: string
  readonly schema: string
}

/** A schema format: parse (throwing a message on invalid input) and compare two versions. */
export interface SchemaFormat {
  readonly type: SchemaType
  /** Throws an Error whose message says what is wrong; `normalize` asks for the normal form. */
  parse(schema: string, references: readonly ResolvedReference[], normalize: boolean): ParsedSchema
  /**
   * Why a consumer using `reader` cannot read data written with `writer`: empty when it can.
   * Confluent's BACKWARD is `readerCanRead(new, old)`, FORWARD `readerCanRead(old, new)`.
   */
  readerCanRead(reader: ParsedSchema, writer: ParsedSchema): string[]
  /** The schema in the format's `format=serialized` form (Protobuf's base64 descriptor), if it has one. */
  serialize?(schema: ParsedSchema): string
  /**
   * A record's payload (after Confluent's magic byte and schema id) as JSON-able data;
   * throws when it does not decode.
   */
  decode(schema: ParsedSchema, payload: Buffer): unknown
}

/** The connection options of the registry's own Kafka client (tidelog's client's). */
export interface RegistryClientOptions {
  readonly bootstrapServers: string
  readonly ssl?: SslOptions
  readonly sasl?: SaslOptions
}

/** What the registry needs of its broker. */
export interface RegistryHost {
  readonly nodeId: BrokerId
  /**
   * How the registry's client reaches this broker: a listener's host:port and, for a SASL or
   * TLS listener, the broker's own credentials and trusted CAs. Throws when it cannot.
   */
  kafkaClient(): RegistryClientOptions
  clusterId(): string
  /** The broker leading `_schemas` partition 0; -1 when it has none or the topic is missing. */
  schemasLeader(): BrokerId
  /** Creates `_schemas` (one partition, compacted, replicated) unless it exists. */
  ensureSchemasTopic(): Promise<void>
  /** Where broker `nodeId`'s registry answers, as it registered it; null if unknown. */
  registryUrlOf(nodeId: BrokerId): string | null
}

/**
 * The schema registry of one broker: Confluent Schema Registry's operations over the
 * `_schemas` topic (store.ts holds the state, schemas-log.ts the topic).
 *
 * Reads are served by every broker: each first reads `_schemas` up to its current end, so
 * a read after a write on another broker sees it. Writes have one writer in the cluster,
 * the broker leading `_schemas` partition 0 (Confluent elects a leader among its registry
 * instances; tidelog uses the partition's leadership, which the controller already keeps
 * unique): it serialises writes, reads to the end before each, so a new id is above every
 * id in the topic and a new version above every version of the subject. A write sent to
 * another broker goes to the writer's registry directly when it is in the same process
 * (`tidelog start --brokers N`, `tidelog/testing`; peers.ts), else NotWriterError names the
 * URL in the writer's broker registration and http.ts forwards the request there.
 */
import type { Logger } from '../common/logger.js'
import { checkCompatibility } from './compatibility.js'
import { Errors, NotWriterError, RegistryError } from './errors.js'
import { loadFormat } from './formats/index.js'
import { findRegistryPeer } from './peers.js'
import { SCHEMAS_TOPIC, SchemasLog } from './schemas-log.js'
import {
  configKey,
  deleteSubjectRecord,
  GLOBAL,
  modeKey,
  SchemaStore,
  type SchemasRecord,
  type StoredSchema,
  sameSchema,
  schemaKey,
  schemaValue,
} from './store.js'
import {
  type CompatibilityLevel,
  DEFAULT_COMPATIBILITY,
  DEFAULT_MODE,
  isCompatibilityLevel,
  isMode,
  type Mode,
  type ParsedSchema,
  type RegistryHost,
  type ResolvedReference,
  SCHEMA_TYPES,
  type SchemaRecord,
  type SchemaReference,
  type SchemaType,
} from './types.js'

export type { RegistryHost }

/** The body of a register, lookup or compatibility request (Confluent's RegisterSchemaRequest). */
export interface SchemaRequest {
  readonly schema: string
  readonly schemaType: SchemaType
  readonly references: readonly SchemaReference[]
  /** IMPORT mode: the id and version to register under. */
  readonly id?: number
  readonly version?: number
}

export interface VersionResponse {
  subject: string
  id: number
  version: number
  schemaType?: SchemaType
  references?: readonly SchemaReference[]
  schema: string
}

/** How far references may nest before a schema is refused (a cycle, or abuse). */
const REFERENCE_DEPTH_MAX = 32
const LEADER_WAIT_MS = 15_000
const VERSION_MAX = 2 ** 31 - 1

export type VersionSpec = number | 'latest'

/** "latest", -1 or 1..2^31-1; anything else is Confluent's 42202. */
export function parseVersion(text: string): VersionSpec {
  if (text === 'latest' || text === '-1') return 'latest'
  const version = /^\d+$/.test(text) ? Number(text) : Number.NaN
  if (!Number.isInteger(version) || version < 1 || version > VERSION_MAX) throw Errors.invalidVersion(text)
  return version
}

/** decodeRecord's answer: the value as JSON-able data, or why it could not be decoded. */
export interface DecodedRecord {
  schemaId?: number
  schemaType?: SchemaType
  value?: unknown
  error?: string
}

/** Magic byte and schema id before a payload (Confluent's wire format). */
const WIRE_HEADER_BYTES = 5
/** Parsed schemas kept for decoding; an id's schema never changes, so entries never go stale. */
const PARSED_CACHE_MAX = 1000

export class SchemaRegistry {
  private readonly store = new SchemaStore()
  private readonly parsedById = new Map<number, ParsedSchema>()
  private readonly log: SchemasLog
  private writes: Promise<unknown> = Promise.resolve()
  private closed = false

  private constructor(
    private readonly host: RegistryHost,
    private readonly logger: Logger,
  ) {
    this.log = new SchemasLog({ client: host.kafkaClient(), store: this.store, logger })
  }

  /** Creates `_schemas` if needed, waits for its leader and reads it to the end. */
  static async open(host: RegistryHost, logger: Logger): Promise<SchemaRegistry> {
    try {
      host.kafkaClient()
    } catch (error) {
      throw Errors.storeError((error as Error).message, error)
    }
    await host.ensureSchemasTopic()
    const deadline = Date.now() + LEADER_WAIT_MS
    while (host.schemasLeader() < 0) {
      if (Date.now() > deadline) throw Errors.unknownLeader(`${SCHEMAS_TOPIC} has no leader`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const registry = new SchemaRegistry(host, logger)
    try {
      await registry.log.sync()
    } catch (error) {
      await registry.log.close()
      throw error
    }
    logger.info(
      { subjects: registry.store.subjects.size, maxId: registry.store.maxId },
      `schema registry: ${SCHEMAS_TOPIC} loaded`,
    )
    return registry
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.log.close()
  }

  // ---- reads ----------------------------------------------------------------------------

  schemaTypes(): SchemaType[] {
    return [...SCHEMA_TYPES]
  }

  async subjects(options: { deleted?: boolean; prefix?: string } = {}): Promise<string[]> {
    await this.log.sync()
    const prefix = options.prefix ?? ''
    return [...this.store.subjects]
      .filter(
        ([name, versions]) => name.startsWith(prefix) && this.visible(versions, options.deleted).length > 0,
      )
      .map(([name]) => name)
      .sort()
  }

  async versions(subject: string, deleted = false): Promise<number[]> {
    await this.log.sync()
    const visible = this.visible(this.store.subjects.get(subject), deleted)
    if (visible.length === 0) throw Errors.subjectNotFound(subject)
    return visible.map((r) => r.version)
  }

  async version(subject: string, spec: VersionSpec, deleted = false): Promise<VersionResponse> {
    await this.log.sync()
    return this.versionResponse(this.findVersion(subject, spec, deleted))
  }

  async schemaById(
    id: number,
  ): Promise<{ schema: string; schemaType?: SchemaType; references?: SchemaReference[] }> {
    await this.log.sync()
    const stored = this.store.schemaById(id)
    if (!stored) throw Errors.schemaNotFound(id)
    return {
      ...(stored.schemaType === 'AVRO' ? {} : { schemaType: stored.schemaType }),
      ...(stored.references.length === 0 ? {} : { references: [...stored.references] }),
      schema: stored.schema,
    }
  }

  /**
   * `format=` of a schema read: `serialized` gives a Protobuf schema as a base64
   * FileDescriptorProto (what confluent-kafka-python's Protobuf deserializer asks for); any
   * other format, or another schema type, leaves the schema as stored.
   */
  async formatted<
    T extends { schema: string; schemaType?: SchemaType; references?: readonly SchemaReference[] },
  >(result: T, format: string | null): Promise<T> {
    if (format !== 'serialized' || result.schemaType !== 'PROTOBUF') return result
    const parsed = await this.parse(
      { schema: result.schema, schemaType: 'PROTOBUF', references: [...(result.references ?? [])] },
      false,
    )
    const serialize = (await loadFormat('PROTOBUF')).serialize
    return serialize ? { ...result, schema: serialize(parsed) } : result
  }

  async subjectsOfId(id: number, deleted = false): Promise<string[]> {
    const pairs = await this.versionsOfId(id, deleted)
    return [...new Set(pairs.map((p) => p.subject))]
  }

  async versionsOfId(id: number, deleted = false): Promise<{ subject: string; version: number }[]> {
    await this.log.sync()
    if (!this.store.schemaById(id)) throw Errors.schemaNotFound(id)
    return this.store.versionsOfId(id, deleted)
  }

  async referencedBy(subject: string, spec: VersionSpec): Promise<number[]> {
    await this.log.sync()
    const record = this.findVersion(subject, spec, false)
    return this.referrers(record.subject, record.version).map((r) => r.id)
  }

  /** POST /subjects/{subject}: the version holding this schema. */
  async lookup(
    subject: string,
    request: SchemaRequest,
    options: { normalize?: boolean; deleted?: boolean } = {},
  ): Promise<VersionResponse> {
    await this.log.sync()
    const visible = this.visible(this.store.subjects.get(subject), options.deleted)
    if (visible.length === 0) throw Errors.subjectNotFound(subject)
    const candidate = await this.parse(request, options.normalize === true)
    const found = await this.matching(candidate, request, visible, options.normalize === true)
    if (!found) throw Errors.schemaNotFound()
    return this.versionResponse(found)
  }

  async config(
    subject: string | null,
    defaultToGlobal = false,
  ): Promise<{ compatibilityLevel: CompatibilityLevel }> {
    await this.log.sync()
    const level = this.store.configs.get(subject ?? GLOBAL)
    if (level) return { compatibilityLevel: level }
    if (subject !== null && !defaultToGlobal) throw Errors.subjectConfigNotFound(subject)
    return { compatibilityLevel: this.store.configs.get(GLOBAL) ?? DEFAULT_COMPATIBILITY }
  }

  async mode(subject: string | null, defaultToGlobal = false): Promise<{ mode: Mode }> {
    await this.log.sync()
    const mode = this.store.modes.get(subject ?? GLOBAL)
    if (mode) return { mode }
    if (subject !== null && !defaultToGlobal) throw Errors.subjectModeNotFound(subject)
    return { mode: this.store.modes.get(GLOBAL) ?? DEFAULT_MODE }
  }

  /** POST /compatibility/subjects/{s}/versions[/{v}]: `spec` null checks as a registration would. */
  async testCompatibility(
    subject: string,
    spec: VersionSpec | null,
    request: SchemaRequest,
    options: { normalize?: boolean } = {},
  ): Promise<{ is_compatible: boolean; messages: string[] }> {
    await this.log.sync()
    const candidate = await this.parse(request, options.normalize === true)
    const level = this.levelOf(subject)
    let against: SchemaRecord[]
    if (spec === null) against = this.visible(this.store.subjects.get(subject), false)
    else {
      const record = this.findVersion(subject, spec, false)
      const all = this.visible(this.store.subjects.get(subject), false)
      against = spec === 'latest' && level.endsWith('_TRANSITIVE') ? all : [record]
    }
    const messages = await this.incompatibilities(candidate, level, against)
    return { is_compatible: messages.length === 0, messages }
  }

  /**
   * A record in Confluent's wire format (magic byte 0, the schema id as 4 bytes, the
   * payload) decoded with its schema: for the console's message browser. Never throws.
   */
  async decodeRecord(bytes: Buffer): Promise<DecodedRecord> {
    if (bytes.length < WIRE_HEADER_BYTES || bytes[0] !== 0)
      return { error: 'not in the schema registry wire format' }
    const schemaId = bytes.readInt32BE(1)
    try {
      await this.log.sync()
      const stored = this.store.schemaById(schemaId)
      if (!stored) return { schemaId, error: `schema ${schemaId} not found` }
      let parsed = this.parsedById.get(schemaId)
      if (!parsed) {
        parsed = await this.parse({ ...stored }, false)
        if (this.parsedById.size >= PARSED_CACHE_MAX) this.parsedById.clear()
        this.parsedById.set(schemaId, parsed)
      }
      const format = await loadFormat(stored.schemaType)
      const value = format.decode(parsed, bytes.subarray(WIRE_HEADER_BYTES))
      return { schemaId, schemaType: stored.schemaType, value }
    } catch (error) {
      return { schemaId, error: (error as Error).message }
    }
  }

  // ---- writes ---------------------------------------------------------------------------

  /** POST /subjects/{subject}/versions: the schema's id, registering a new version if needed. */
  register(
    subject: string,
    request: SchemaRequest,
    options: { normalize?: boolean } = {},
  ): Promise<{ id: number }> {
    return this.write((writer) => writer.doRegister(subject, request, options.normalize === true))
  }

  deleteSubject(subject: string, permanent: boolean): Promise<number[]> {
    return this.write((writer) => writer.doDeleteSubject(subject, permanent))
  }

  deleteVersion(subject: string, spec: VersionSpec, permanent: boolean): Promise<number> {
    return this.write((writer) => writer.doDeleteVersion(subject, spec, permanent))
  }

  setConfig(subject: string | null, level: unknown): Promise<{ compatibility: CompatibilityLevel }> {
    const upper = typeof level === 'string' ? level.toUpperCase() : level
    if (!isCompatibilityLevel(upper)) return Promise.reject(Errors.invalidCompatibilityLevel(level))
    return this.write(async (writer) => {
      await writer.append([{ key: configKey(subject), value: JSON.stringify({ compatibilityLevel: upper }) }])
      return { compatibility: upper }
    })
  }

  deleteConfig(subject: string | null): Promise<{ compatibilityLevel: CompatibilityLevel }> {
    return this.write(async (writer) => {
      const previous = writer.store.configs.get(subject ?? GLOBAL)
      if (subject !== null && !previous) {
        if (!writer.store.subjects.has(subject)) throw Errors.subjectNotFound(subject)
        throw Errors.subjectConfigNotFound(subject)
      }
      await writer.append([{ key: configKey(subject), value: null }])
      return { compatibilityLevel: previous ?? DEFAULT_COMPATIBILITY }
    })
  }

  setMode(subject: string | null, mode: unknown, force = false): Promise<{ mode: Mode }> {
    const upper = typeof mode === 'string' ? mode.toUpperCase() : mode
    if (!isMode(upper)) return Promise.reject(Errors.invalidMode(mode))
    return this.write(async (writer) => {
      const scope =
        subject === null ? [...writer.store.subjects.values()] : [writer.store.subjects.get(subject)]
      const hasSchemas = scope.some((versions) => versions !== undefined && versions.size > 0)
      if (upper === 'IMPORT' && hasSchemas && !force)
        throw Errors.operationNotPermitted(
          'Cannot import since found existing subjects; set force=true to import into a non-empty registry',
        )
      await writer.append([{ key: modeKey(subject), value: JSON.stringify({ mode: upper }) }])
      return { mode: upper }
    })
  }

  deleteMode(subject: string): Promise<{ mode: Mode }> {
    return this.write(async (writer) => {
      const previous = writer.store.modes.get(subject)
      if (!previous) throw Errors.subjectModeNotFound(subject)
      await writer.append([{ key: modeKey(subject), value: null }])
      return { mode: previous }
    })
  }

  /** Runs `operation` on the writer, one write at a time, after reading `_schemas` to its end. */
  private async write<T>(operation: (writer: SchemaRegistry) => Promise<T>): Promise<T> {
    const leader = this.host.schemasLeader()
    if (leader !== this.host.nodeId) {
      const peer = leader < 0 ? undefined : findRegistryPeer<SchemaRegistry>(this.host.clusterId(), leader)
      const writerUrl = leader < 0 ? null : this.host.registryUrlOf(leader)
      if (!peer && writerUrl !== null) throw new NotWriterError(writerUrl, leader)
      if (!peer)
        throw Errors.unknownLeader(
          leader < 0
            ? `${SCHEMAS_TOPIC} has no leader: no schema registry can write now`
            : `Writes go to the schema registry of broker ${leader} (leader of ${SCHEMAS_TOPIC} partition 0), which serves none`,
        )
      const writer = await peer.open()
      // Leadership may have moved while the writer's registry opened.
      if (writer.host.schemasLeader() !== writer.host.nodeId)
        throw Errors.unknownLeader(`The leader of ${SCHEMAS_TOPIC} partition 0 moved; retry`)
      return writer.writeHere(operation)
    }
    return this.writeHere(operation)
  }

  private writeHere<T>(operation: (writer: SchemaRegistry) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(Errors.unknownLeader('This schema registry is closing'))
    const result = this.writes.then(async () => {
      await this.log.sync()
      return operation(this)
    })
    this.writes = result.catch(() => undefined)
    return result
  }

  private async append(records: readonly SchemasRecord[]): Promise<void> {
    await this.log.append(records)
  }

  private async doRegister(
    subject: string,
    request: SchemaRequest,
    normalize: boolean,
  ): Promise<{ id: number }> {
    const mode = this.modeOf(subject)
    if (mode === 'READONLY' || mode === 'READONLY_OVERRIDE')
      throw Errors.operationNotPermitted(`Subject ${subject} is in read-only mode`)
    const importing = mode === 'IMPORT'
    if (!importing && request.id !== undefined && request.id >= 0)
      throw Errors.operationNotPermitted(`Subject ${subject} is not in import mode`)
    const candidate = await this.parse(request, normalize)
    const versions = this.store.subjects.get(subject)
    const live = this.visible(versions, false)
    const stored: StoredSchema = {
      schemaType: request.schemaType,
      schema: candidate.canonical,
      references: request.references,
    }
    const existing = await this.matching(candidate, request, live, normalize)
    if (existing && (!importing || request.id === undefined || request.id === existing.id))
      return { id: existing.id }
    if (!importing) {
      const messages = await this.incompatibilities(candidate, this.levelOf(subject), live)
      if (messages.length > 0) throw Errors.incompatible(subject, messages)
    }
    const knownId = this.store.idOf(stored)
    let id: number
    if (importing && request.id !== undefined) {
      const holder = this.store.schemaById(request.id)
      if (holder && !sameSchema(holder, stored))
        throw Errors.operationNotPermitted(`Overwrite new schema with id ${request.id} is not permitted.`)
      id = request.id
    } else id = knownId ?? this.store.maxId + 1
    const next = Math.max(0, ...(versions?.keys() ?? [])) + 1
    const version = importing && request.version !== undefined ? request.version : next
    if (importing && versions?.has(version))
      throw Errors.operationNotPermitted(`Version ${version} of subject ${subject} already exists`)
    const record: SchemaRecord = { subject, version, id, ...stored, deleted: false }
    await this.append([{ key: schemaKey(subject, version), value: schemaValue(record) }])
    this.logger.info({ subject, version, id }, 'schema registry: registered a schema')
    return { id }
  }

  private async doDeleteSubject(subject: string, permanent: boolean): Promise<number[]> {
    this.checkWritable(subject)
    const versions = this.store.subjects.get(subject)
    if (!versions || versions.size === 0) throw Errors.subjectNotFound(subject)
    const all = [...versions.values()]
    const live = all.filter((r) => !r.deleted)
    if (!permanent) {
      if (live.length === 0) throw Errors.subjectSoftDeleted(subject)
      for (const record of live) this.checkNotReferenced(record)
      const latest = live[live.length - 1].version
      await this.append([
        ...live.map((r) => ({
          key: schemaKey(subject, r.version),
          value: schemaValue({ ...r, deleted: true }),
        })),
        deleteSubjectRecord(subject, latest),
      ])
      return live.map((r) => r.version)
    }
    if (live.length > 0) throw Errors.subjectNotSoftDeleted(subject)
    const records: SchemasRecord[] = all.map((r) => ({ key: schemaKey(subject, r.version), value: null }))
    if (this.store.configs.has(subject)) records.push({ key: configKey(subject), value: null })
    if (this.store.modes.has(subject)) records.push({ key: modeKey(subject), value: null })
    await this.append(records)
    return all.map((r) => r.version)
  }

  private async doDeleteVersion(subject: string, spec: VersionSpec, permanent: boolean): Promise<number> {
    this.checkWritable(subject)
    // A soft-deleted version named by number is found, to answer 40406 ('latest' is live).
    const record = this.findVersion(subject, spec, permanent || spec !== 'latest')
    if (!permanent) {
      if (record.deleted) throw Errors.versionSoftDeleted(subject, record.version)
      this.checkNotReferenced(record)
      await this.append([
        { key: schemaKey(subject, record.version), value: schemaValue({ ...record, deleted: true }) },
      ])
      return record.version
    }
    if (!record.deleted) throw Errors.versionNotSoftDeleted(subject, record.version)
    await this.append([{ key: schemaKey(subject, record.version), value: null }])
    return record.version
  }

  // ---- helpers --------------------------------------------------------------------------

  private visible(
    versions: ReadonlyMap<number, SchemaRecord> | undefined,
    deleted?: boolean,
  ): SchemaRecord[] {
    return versions ? [...versions.values()].filter((r) => deleted === true || !r.deleted) : []
  }

  private findVersion(subject: string, spec: VersionSpec, deleted: boolean): SchemaRecord {
    const versions = this.store.subjects.get(subject)
    const visible = this.visible(versions, deleted)
    if (this.visible(versions, true).length === 0 || (!deleted && visible.length === 0))
      throw Errors.subjectNotFound(subject)
    const record = spec === 'latest' ? visible[visible.length - 1] : visible.find((r) => r.version === spec)
    if (!record) throw Errors.versionNotFound(spec)
    return record
  }

  private versionResponse(record: SchemaRecord): VersionResponse {
    return {
      subject: record.subject,
      version: record.version,
      id: record.id,
      ...(record.schemaType === 'AVRO' ? {} : { schemaType: record.schemaType }),
      ...(record.references.length === 0 ? {} : { references: record.references }),
      schema: record.schema,
    }
  }

  private levelOf(subject: string): CompatibilityLevel {
    return this.store.configs.get(subject) ?? this.store.configs.get(GLOBAL) ?? DEFAULT_COMPATIBILITY
  }

  private modeOf(subject: string): Mode {
    return this.store.modes.get(subject) ?? this.store.modes.get(GLOBAL) ?? DEFAULT_MODE
  }

  private checkWritable(subject: string): void {
    const mode = this.modeOf(subject)
    if (mode === 'READONLY' || mode === 'READONLY_OVERRIDE')
      throw Errors.operationNotPermitted(`Subject ${subject} is in read-only mode`)
  }

  /** Live schemas that reference this version. */
  private referrers(subject: string, version: number): SchemaRecord[] {
    const found: SchemaRecord[] = []
    for (const versions of this.store.subjects.values())
      for (const record of versions.values())
        if (!record.deleted && record.references.some((r) => r.subject === subject && r.version === version))
          found.push(record)
    return found
  }

  private checkNotReferenced(record: SchemaRecord): void {
    const referrers = this.referrers(record.subject, record.version)
    if (referrers.length > 0)
      throw Errors.referenceExists(
        `One or more references exist to the schema {subject=${record.subject},version=${record.version}}`,
      )
  }

  /** Parses the request's schema with its references resolved; 42201 when it is invalid. */
  private async parse(request: SchemaRequest, normalize: boolean): Promise<ParsedSchema> {
    const references = this.resolveReferences(request.references, 0)
    const format = await loadFormat(request.schemaType)
    try {
      return format.parse(request.schema, references, normalize)
    } catch (error) {
      throw Errors.invalidSchema(`${request.schemaType} schema ${(error as Error).message}`)
    }
  }

  private async parseStored(record: SchemaRecord, normalize: boolean): Promise<ParsedSchema> {
    return this.parse(
      { schema: record.schema, schemaType: record.schemaType, references: record.references },
      normalize,
    )
  }

  /** References with theirs first, each name once; 42201 for one that is not registered. */
  private resolveReferences(references: readonly SchemaReference[], depth: number): ResolvedReference[] {
    if (depth > REFERENCE_DEPTH_MAX) throw Errors.invalidSchema('references nest too deep (a cycle?)')
    const resolved: ResolvedReference[] = []
    const seen = new Set<string>()
    for (const reference of references) {
      const record = this.store.subjects.get(reference.subject)?.get(reference.version)
      if (!record)
        throw Errors.invalidSchema(
          `reference ${reference.name} to subject ${reference.subject} version ${reference.version} not found`,
        )
      for (const inner of [
        ...this.resolveReferences(record.references, depth + 1),
        { name: reference.name, schema: record.schema },
      ]) {
        if (seen.has(inner.name)) continue
        seen.add(inner.name)
        resolved.push(inner)
      }
    }
    return resolved
  }

  /** The live version holding the candidate: same type, text and references (or normal form). */
  private async matching(
    candidate: ParsedSchema,
    request: SchemaRequest,
    versions: readonly SchemaRecord[],
    normalize: boolean,
  ): Promise<SchemaRecord | undefined> {
    const wanted: StoredSchema = {
      schemaType: request.schemaType,
      schema: candidate.canonical,
      references: request.references,
    }
    const direct = versions.find((r) => sameSchema(r, wanted))
    if (direct || !normalize) return direct
    for (const record of versions) {
      if (record.schemaType !== request.schemaType) continue
      const parsed = await this.parseStored(record, true)
      if (sameSchema({ ...record, schema: parsed.canonical }, wanted)) return record
    }
    return undefined
  }

  private async incompatibilities(
    candidate: ParsedSchema,
    level: CompatibilityLevel,
    against: readonly SchemaRecord[],
  ): Promise<string[]> {
    if (level === 'NONE') return []
    const format = await loadFormat(candidate.type)
    const previous: { version: number; schema: ParsedSchema }[] = []
    const messages: string[] = []
    for (const record of level.endsWith('_TRANSITIVE') ? against : against.slice(-1)) {
      if (record.schemaType !== candidate.type) {
        messages.push(
          `{errorType:'SCHEMA_TYPE_CHANGED', description:'Incompatible because of different schema type', oldSchemaVersion: ${record.version}}`,
        )
        continue
      }
      try {
        previous.push({ version: record.version, schema: await this.parseStored(record, false) })
      } catch (error) {
        if (!(error instanceof RegistryError)) throw error
        messages.push(`{errorType:'OLD_SCHEMA_INVALID', oldSchemaVersion: ${record.version}}`)
      }
    }
    return [...messages, ...checkCompatibility(format, level, candidate, previous)]
  }
}

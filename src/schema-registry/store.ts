/**
 * The registry's state, rebuilt by applying the `_schemas` topic in order: Confluent's key
 * and value JSON, so a `_schemas` topic copied from a Confluent deployment loads, and ours
 * loads there. A pure state machine: `apply(key, value)` per record, no I/O.
 *
 * Records (keys are written with Confluent's field order, so compaction sees one key):
 * - `{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}` →
 *   `{"subject","version","id","schemaType"?,"references"?,"schema","deleted"}`; a tombstone
 *   removes the version (a permanent delete).
 * - `{"keytype":"CONFIG","subject":S|null,"magic":0}` → `{"compatibilityLevel":L}`;
 *   `{"keytype":"MODE",...}` → `{"mode":M}`; tombstones remove the setting.
 * - `{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}` → `{"subject":S,"version":V}`:
 *   versions up to V are soft-deleted. `CLEAR_SUBJECT` → `{"subject":S}`: its soft-deleted
 *   versions are gone. `NOOP` and unknown key types are skipped.
 *
 * An id names one schema (type, text and references). A record that gives a known id to
 * another schema is a conflict (two writers raced, or a bad import): the first schema keeps
 * the id and the conflict is counted.
 */
import type { CompatibilityLevel, Mode, SchemaRecord, SchemaReference, SchemaType } from './types.js'
import { isCompatibilityLevel, isMode } from './types.js'

export interface StoredSchema {
  readonly schemaType: SchemaType
  readonly schema: string
  readonly references: readonly SchemaReference[]
}

/** One `_schemas` record as JSON text: value null is a tombstone. */
export interface SchemasRecord {
  readonly key: string
  readonly value: string | null
}

/** The global setting's key in `configs` and `modes`. */
export const GLOBAL = '\0global'

export function schemaKey(subject: string, version: number): string {
  return JSON.stringify({ keytype: 'SCHEMA', subject, version, magic: 1 })
}

export function schemaValue(record: SchemaRecord): string {
  return JSON.stringify({
    subject: record.subject,
    version: record.version,
    id: record.id,
    ...(record.schemaType === 'AVRO' ? {} : { schemaType: record.schemaType }),
    ...(record.references.length === 0 ? {} : { references: record.references }),
    schema: record.schema,
    deleted: record.deleted,
  })
}

export function configKey(subject: string | null): string {
  return JSON.stringify({ keytype: 'CONFIG', subject, magic: 0 })
}

export function modeKey(subject: string | null): string {
  return JSON.stringify({ keytype: 'MODE', subject, magic: 0 })
}

export function deleteSubjectRecord(subject: string, version: number): SchemasRecord {
  return {
    key: JSON.stringify({ keytype: 'DELETE_SUBJECT', subject, magic: 0 }),
    value: JSON.stringify({ subject, version }),
  }
}

export function sameSchema(a: StoredSchema, b: StoredSchema): boolean {
  return (
    a.schemaType === b.schemaType &&
    a.schema === b.schema &&
    JSON.stringify(a.references) === JSON.stringify(b.references)
  )
}

type Json = Record<string, unknown>

function parseObject(text: string): Json | null {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : null
  } catch {
    return null
  }
}

function asReferences(value: unknown): SchemaReference[] {
  if (!Array.isArray(value)) return []
  return value
    .filter((r): r is Json => typeof r === 'object' && r !== null)
    .map((r) => ({ name: String(r.name), subject: String(r.subject), version: Number(r.version) }))
}

export class SchemaStore {
  /** subject → version → record, versions in ascending order of registration. */
  readonly subjects = new Map<string, Map<number, SchemaRecord>>()
  private readonly ids = new Map<number, StoredSchema>()
  /** Highest id any record has named: new ids start above it. */
  maxId = 0
  readonly configs = new Map<string, CompatibilityLevel>()
  readonly modes = new Map<string, Mode>()
  /** Records skipped: unparseable, or an id given to a second schema. */
  skipped = 0
  conflicts = 0

  apply(key: string | null, value: string | null): void {
    const parsedKey = key === null ? null : parseObject(key)
    if (!parsedKey) {
      this.skipped++
      return
    }
    const subject = typeof parsedKey.subject === 'string' ? parsedKey.subject : null
    const body = value === null ? null : parseObject(value)
    if (value !== null && body === null) {
      this.skipped++
      return
    }
    switch (parsedKey.keytype) {
      case 'SCHEMA':
        this.applySchema(subject, Number(parsedKey.version), body)
        return
      case 'CONFIG': {
        const level = body?.compatibilityLevel ?? body?.compatibility
        if (body === null || !isCompatibilityLevel(level)) this.configs.delete(subject ?? GLOBAL)
        else this.configs.set(subject ?? GLOBAL, level)
        return
      }
      case 'MODE': {
        if (body === null || !isMode(body.mode)) this.modes.delete(subject ?? GLOBAL)
        else this.modes.set(subject ?? GLOBAL, body.mode)
        return
      }
      case 'DELETE_SUBJECT':
        this.applyDeleteSubject(subject, Number(body?.version))
        return
      case 'CLEAR_SUBJECT':
        this.applyClearSubject(subject)
        return
      default:
        return
    }
  }

  /** The schema an id names, or undefined when no version holds it any more. */
  schemaById(id: number): StoredSchema | undefined {
    return this.ids.get(id)
  }

  /** The id of a schema already registered under any subject, deleted versions included. */
  idOf(schema: StoredSchema): number | undefined {
    for (const [id, stored] of this.ids) if (sameSchema(stored, schema)) return id
    return undefined
  }

  /** (subject, version) pairs holding `id`. */
  versionsOfId(id: number, includeDeleted: boolean): { subject: string; version: number }[] {
    const found: { subject: string; version: number }[] = []
    for (const [subject, versions] of this.subjects)
      for (const record of versions.values())
        if (record.id === id && (includeDeleted || !record.deleted))
          found.push({ subject, version: record.version })
    return found
  }

  private applySchema(subject: string | null, version: number, body: Json | null): void {
    if (subject === null || !Number.isInteger(version)) {
      this.skipped++
      return
    }
    const versions = this.subjects.get(subject)
    if (body === null) {
      const removed = versions?.get(version)
      versions?.delete(version)
      if (versions?.size === 0) this.subjects.delete(subject)
      if (removed && this.versionsOfId(removed.id, true).length === 0) this.ids.delete(removed.id)
      return
    }
    const id = Number(body.id)
    if (!Number.isInteger(id) || typeof body.schema !== 'string') {
      this.skipped++
      return
    }
    const schemaType = (body.schemaType ?? 'AVRO') as SchemaType
    const record: SchemaRecord = {
      subject,
      version,
      id,
      schemaType,
      schema: body.schema,
      references: asReferences(body.references),
      deleted: body.deleted === true,
    }
    const known = this.ids.get(id)
    if (known && !sameSchema(known, record)) {
      this.conflicts++
      return
    }
    if (!known) this.ids.set(id, { schemaType, schema: record.schema, references: record.references })
    this.maxId = Math.max(this.maxId, id)
    const into = versions ?? new Map<number, SchemaRecord>()
    into.set(version, record)
    if (!versions) this.subjects.set(subject, new Map([...into].sort((a, b) => a[0] - b[0])))
    else if ([...versions.keys()].some((v) => v > version))
      this.subjects.set(subject, new Map([...versions].sort((a, b) => a[0] - b[0])))
  }

  private applyDeleteSubject(subject: string | null, upTo: number): void {
    const versions = subject === null ? undefined : this.subjects.get(subject)
    if (!versions || !Number.isInteger(upTo)) return
    for (const [version, record] of versions)
      if (version <= upTo && !record.deleted) versions.set(version, { ...record, deleted: true })
  }

  private applyClearSubject(subject: string | null): void {
    const versions = subject === null ? undefined : this.subjects.get(subject)
    if (!versions || subject === null) return
    for (const [version, record] of versions) if (record.deleted) this.applySchema(subject, version, null)
  }
}

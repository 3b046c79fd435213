/**
 * JSON Schema. Validity: ajv compiles the schema (draft-07 by default; draft 2019-09 and
 * 2020-12 by their `$schema`, draft-06 by its meta-schema; a `$schema` ajv does not know,
 * such as draft-04, is checked as draft-07), with referenced schemas added under their
 * reference names so a `$ref` to them resolves.
 *
 * Compatibility: the common part of Confluent's JSON Schema rules (its `Difference.Type`
 * names), checked from the reader's side: can every document the writer's schema allows be
 * read with the reader's? Checked, recursively through `properties`, `additionalProperties`,
 * `items` and `anyOf`/`oneOf`:
 * - `type` narrowed or changed (integer → number widens); `enum` narrowed or added; `const`
 *   added or changed; `maxLength`, `maximum`, `exclusiveMaximum`, `maxItems`,
 *   `maxProperties` added or decreased; their `min` forms added or increased; `multipleOf`
 *   and `pattern` added or changed.
 * - A property the writer had, gone from a closed reader (`additionalProperties: false`);
 *   a property added to the reader while the writer's content model was open (the writer
 *   may have written anything under that name: Confluent's
 *   PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL) unless its schema is empty; a property checked
 *   against the other side's `additionalProperties` schema where there is one.
 * - `additionalProperties` closed in the reader while open in the writer; a `required`
 *   property added without a `default`.
 * Not checked (accepted): `allOf`, `not`, `if`/`then`/`else`, `dependencies`,
 * `patternProperties`, tuple `items`, `$ref` targets (two `$ref`s must be equal strings).
 */
import { createRequire } from 'node:module'
import { Ajv } from 'ajv'
import { Ajv2019 } from 'ajv/dist/2019.js'
import { Ajv2020 } from 'ajv/dist/2020.js'
import type { ParsedSchema, ResolvedReference, SchemaFormat } from '../types.js'

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
type JsonObject = { [key: string]: Json }

const DRAFT_2019 = 'https://json-schema.org/draft/2019-09/schema'
const DRAFT_2020 = 'https://json-schema.org/draft/2020-12/schema'
const DRAFT_07 = /^https?:\/\/json-schema\.org\/draft-07\/schema#?$/
const DRAFT_06 = /^https?:\/\/json-schema\.org\/draft-06\/schema#?$/

function parseJson(text: string): Json {
  try {
    return JSON.parse(text) as Json
  } catch (error) {
    throw new Error(`is not valid JSON: ${(error as Error).message}`)
  }
}

function isObject(value: Json | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Keys sorted at every level: two schemas that differ only in key order normalise alike. */
function sortKeys(value: Json): Json {
  if (Array.isArray(value)) return value.map(sortKeys)
  if (!isObject(value)) return value
  const sorted: JsonObject = {}
  for (const key of Object.keys(value).sort()) sorted[key] = sortKeys(value[key])
  return sorted
}

function newAjv(schema: Json): Ajv {
  const $schema =
    isObject(schema) && typeof schema.$schema === 'string' ? schema.$schema.replace(/#$/, '') : ''
  const options = { strict: false, allErrors: false, validateFormats: false } as const
  if ($schema === DRAFT_2020) return new Ajv2020(options) as unknown as Ajv
  if ($schema === DRAFT_2019) return new Ajv2019(options) as unknown as Ajv
  return new Ajv(options)
}

/** A copy without a `$schema` ajv would refuse (draft-04 and older: checked as draft-07). */
function withKnownDraft(schema: Json): Json {
  if (!isObject(schema) || typeof schema.$schema !== 'string') return schema
  const known = [DRAFT_2019, DRAFT_2020].includes(schema.$schema.replace(/#$/, ''))
  if (known || DRAFT_07.test(schema.$schema) || DRAFT_06.test(schema.$schema)) return schema
  const { $schema: _dropped, ...rest } = schema
  return rest
}

export const jsonSchemaFormat: SchemaFormat = {
  type: 'JSON',

  parse(schema: string, references: readonly ResolvedReference[], normalize: boolean): ParsedSchema {
    const json = parseJson(schema)
    if (!isObject(json) && typeof json !== 'boolean')
      throw new Error('is not a JSON Schema (an object or a boolean)')
    const ajv = newAjv(json)
    if (isObject(json) && typeof json.$schema === 'string' && DRAFT_06.test(json.$schema))
      ajv.addMetaSchema(draft06MetaSchema())
    for (const reference of references) {
      const referenced = withKnownDraft(parseJson(reference.schema))
      if (!isObject(referenced)) throw new Error(`reference ${reference.name} is not a JSON Schema object`)
      const { $id: _id, ...rest } = referenced
      ajv.addSchema(rest, reference.name)
    }
    ajv.compile(withKnownDraft(json) as object | boolean as object)
    return { type: 'JSON', canonical: JSON.stringify(normalize ? sortKeys(json) : json), parsed: json }
  },

  decode(_schema: ParsedSchema, payload: Buffer): unknown {
    return JSON.parse(payload.toString('utf8'))
  },

  readerCanRead(reader: ParsedSchema, writer: ParsedSchema): string[] {
    const out: string[] = []
    compare(writer.parsed as Json, reader.parsed as Json, '#', out)
    return out
  },
}

let draft06: object | null = null
function draft06MetaSchema(): object {
  // ajv ships draft-06's meta-schema as JSON, not as a module.
  draft06 ??= createRequire(import.meta.url)('ajv/dist/refs/json-schema-draft-06.json') as object
  return draft06
}

function issue(out: string[], errorType: string, path: string, description: string): void {
  out.push(`{errorType:'${errorType}', description:'${description} at path '${path}'', path:'${path}'}`)
}

function typesOf(schema: JsonObject): Set<string> | null {
  if (typeof schema.type === 'string') return new Set([schema.type])
  if (Array.isArray(schema.type))
    return new Set(schema.type.filter((t): t is string => typeof t === 'string'))
  return null
}

function isEmptySchema(schema: Json | undefined): boolean {
  return schema === undefined || schema === true || (isObject(schema) && Object.keys(schema).length === 0)
}

const UPPER_BOUNDS = ['maxLength', 'maximum', 'exclusiveMaximum', 'maxItems', 'maxProperties'] as const
const LOWER_BOUNDS = ['minLength', 'minimum', 'exclusiveMinimum', 'minItems', 'minProperties'] as const

/** Adds to `out` why data valid against `writer` may be invalid against `reader`. */
function compare(writer: Json, reader: Json, path: string, out: string[]): void {
  if (isEmptySchema(reader) || writer === false) return
  if (reader === false) {
    issue(out, 'TYPE_NARROWED', path, 'The reader accepts nothing')
    return
  }
  if (!isObject(reader)) return
  const w: JsonObject = isObject(writer) ? writer : {}
  if (reader.$ref !== undefined || w.$ref !== undefined) {
    if (reader.$ref !== w.$ref) issue(out, 'TYPE_CHANGED', path, 'A $ref changed')
    return
  }
  compareCombined(w, reader, path, out)
  compareTypes(w, reader, path, out)
  compareValues(w, reader, path, out)
  compareObjects(w, reader, path, out)
  if (reader.items !== undefined && !Array.isArray(reader.items) && !Array.isArray(w.items))
    compare(w.items ?? true, reader.items, `${path}/items`, out)
}

function compareCombined(w: JsonObject, reader: JsonObject, path: string, out: string[]): void {
  const readerAlternatives = reader.oneOf ?? reader.anyOf
  const writerAlternatives = w.oneOf ?? w.anyOf
  if (!Array.isArray(readerAlternatives) && !Array.isArray(writerAlternatives)) return
  const writers = Array.isArray(writerAlternatives) ? writerAlternatives : [w]
  const readers = Array.isArray(readerAlternatives) ? readerAlternatives : [reader]
  for (const [i, alternative] of writers.entries()) {
    const readable = readers.some((r) => {
      const found: string[] = []
      compare(alternative, r, path, found)
      return found.length === 0
    })
    if (!readable)
      issue(
        out,
        'COMBINED_TYPE_SUBSCHEMAS_CHANGED',
        `${path}/${i}`,
        'A writer alternative no reader alternative reads',
      )
  }
}

function compareTypes(w: JsonObject, reader: JsonObject, path: string, out: string[]): void {
  const readerTypes = typesOf(reader)
  if (readerTypes === null) return
  const writerTypes = typesOf(w)
  if (writerTypes === null) {
    issue(out, 'TYPE_NARROWED', path, 'A type was added')
    return
  }
  const accepts = (t: string) => readerTypes.has(t) || (t === 'integer' && readerTypes.has('number'))
  const unread = [...writerTypes].filter((t) => !accepts(t))
  if (unread.length === 0) return
  const overlap = [...writerTypes].some(accepts)
  issue(
    out,
    overlap ? 'TYPE_NARROWED' : 'TYPE_CHANGED',
    path,
    `The type ${unread.join(', ')} is no longer accepted`,
  )
}

function compareValues(w: JsonObject, reader: JsonObject, path: string, out: string[]): void {
  if (Array.isArray(reader.enum)) {
    const readerValues = new Set(reader.enum.map((v) => JSON.stringify(v)))
    if (!Array.isArray(w.enum)) issue(out, 'ENUM_ARRAY_NARROWED', path, 'An enum was added')
    else if (w.enum.some((v) => !readerValues.has(JSON.stringify(v))))
      issue(out, 'ENUM_ARRAY_NARROWED', path, 'An enum value was removed')
  }
  if (reader.const !== undefined && JSON.stringify(reader.const) !== JSON.stringify(w.const))
    issue(out, 'CONST_CHANGED', path, 'A const was added or changed')
  for (const key of UPPER_BOUNDS) {
    const r = reader[key]
    const before = w[key]
    if (typeof r !== 'number') continue
    if (typeof before !== 'number') issue(out, `${key.toUpperCase()}_ADDED`, path, `${key} was added`)
    else if (r < before) issue(out, `${key.toUpperCase()}_DECREASED`, path, `${key} was decreased`)
  }
  for (const key of LOWER_BOUNDS) {
    const r = reader[key]
    const before = w[key]
    if (typeof r !== 'number') continue
    if (typeof before !== 'number') issue(out, `${key.toUpperCase()}_ADDED`, path, `${key} was added`)
    else if (r > before) issue(out, `${key.toUpperCase()}_INCREASED`, path, `${key} was increased`)
  }
  if (typeof reader.multipleOf === 'number') {
    const before = w.multipleOf
    if (typeof before !== 'number' || before % reader.multipleOf !== 0)
      issue(out, 'MULTIPLE_OF_CHANGED', path, 'multipleOf was added or changed')
  }
  if (typeof reader.pattern === 'string' && reader.pattern !== w.pattern)
    issue(out, 'PATTERN_CHANGED', path, 'A pattern was added or changed')
}

function compareObjects(w: JsonObject, reader: JsonObject, path: string, out: string[]): void {
  const readerProperties = isObject(reader.properties) ? reader.properties : {}
  const writerProperties = isObject(w.properties) ? w.properties : {}
  const readerClosed = reader.additionalProperties === false
  const writerClosed = w.additionalProperties === false
  for (const [name, schema] of Object.entries(writerProperties)) {
    const at = `${path}/properties/${name}`
    if (name in readerProperties) compare(schema, readerProperties[name], at, out)
    else if (readerClosed)
      issue(
        out,
        'PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL',
        at,
        'A property was removed from a closed content model',
      )
    else if (isObject(reader.additionalProperties)) compare(schema, reader.additionalProperties, at, out)
  }
  for (const [name, schema] of Object.entries(readerProperties)) {
    if (name in writerProperties || writerClosed || isEmptySchema(schema)) continue
    const at = `${path}/properties/${name}`
    if (isObject(w.additionalProperties)) compare(w.additionalProperties, schema, at, out)
    else
      issue(
        out,
        'PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL',
        at,
        'A property was added to an open content model (the writer may have written anything under its name)',
      )
  }
  if (readerClosed && !writerClosed && !isObject(w.additionalProperties) && isObject(reader.properties))
    issue(out, 'ADDITIONAL_PROPERTIES_REMOVED', path, 'additionalProperties was closed')
  else if (isObject(reader.additionalProperties))
    compare(w.additionalProperties ?? true, reader.additionalProperties, `${path}/additionalProperties`, out)
  const writerRequired = new Set(Array.isArray(w.required) ? w.required : [])
  for (const name of Array.isArray(reader.required) ? reader.required : []) {
    if (typeof name !== 'string' || writerRequired.has(name)) continue
    const property = readerProperties[name]
    if (isObject(property) && property.default !== undefined) continue
    issue(
      out,
      'REQUIRED_ATTRIBUTE_ADDED',
      `${path}/required/${name}`,
      'A required property was added without a default',
    )
  }
}

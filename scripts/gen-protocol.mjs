// Generates TypeScript codecs for Kafka's wire protocol from Apache Kafka's JSON message
// definitions in protocol-schemas/ into src/protocol/generated/. Run by `npm run gen:protocol`
// (which then formats the output with biome). The output is deterministic: no timestamps,
// files and registry entries sorted, fields kept in schema (wire) order.
//
// Layout: each API's request and response codecs are one module, apis/<api>.ts, which the
// bundle makes a file of its own, loaded on the API's first use (loadApiCodec in index.ts); headers
// and data messages are in headers-and-data.ts; index.ts is the API registry and re-exports
// everything; common.ts is the shared runtime. Each message also keeps its own module (e.g.
// fetch-request.ts), a re-export of its names, so imports of a single message still work.
//
// Semantics follow Kafka's MessageDataGenerator: flexible versions use compact strings,
// bytes and arrays plus a tagged-field section at the end of every struct; tagged fields are
// written only when they differ from their default, sorted by tag, with a size prefix; a
// field absent from a version must hold its default unless it is ignorable; unknown tagged
// fields are kept and written back. Any schema key this script does not understand is an
// error, so a new Kafka schema feature cannot be silently ignored.

import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { MergeError, mergedSchemas } from './protocol-schema-merge.mjs'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const SCHEMA_DIR = path.join(ROOT, 'protocol-schemas')
// Kafka 4.4's definitions: the newest versions. The 3.9 files above still define the old
// versions Kafka 4 removed (KIP-896), which tidelog keeps serving; see mergeSchemas.
const NEW_SCHEMA_SUBDIR = '4.4'
const OUT_DIR = path.join(ROOT, 'src', 'protocol', 'generated')
const MAX_VERSION = 0x7fff

const TOP_KEYS = new Set([
  'apiKey',
  'type',
  'listeners',
  'name',
  'validVersions',
  'flexibleVersions',
  'deprecatedVersions',
  'latestVersionUnstable',
  'fields',
  'commonStructs',
])
const FIELD_KEYS = new Set([
  'name',
  'type',
  'versions',
  'nullableVersions',
  'taggedVersions',
  'tag',
  'default',
  'ignorable',
  'entityType',
  'about',
  'mapKey',
  'zeroCopy',
  'flexibleVersions',
  'fields',
])
const COMMON_STRUCT_KEYS = new Set(['name', 'versions', 'fields'])
const MESSAGE_TYPES = new Set(['request', 'response', 'header', 'data'])
const PRIMITIVES = new Set([
  'bool',
  'int8',
  'int16',
  'uint16',
  'int32',
  'uint32',
  'int64',
  'float64',
  'string',
  'bytes',
  'uuid',
  'records',
])
const FIXED_SIZE = {
  bool: 1,
  int8: 1,
  int16: 2,
  uint16: 2,
  int32: 4,
  uint32: 4,
  int64: 8,
  float64: 8,
  uuid: 16,
}
const INT_RANGES = {
  int8: [-128n, 127n],
  int16: [-32768n, 32767n],
  uint16: [0n, 65535n],
  int32: [-2147483648n, 2147483647n],
  uint32: [0n, 4294967295n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
}
const READ_PRIM = {
  bool: 'readBoolean',
  int8: 'readInt8',
  int16: 'readInt16',
  uint16: 'readUInt16',
  int32: 'readInt32',
  uint32: 'readUInt32',
  int64: 'readInt64',
  float64: 'readFloat64',
  uuid: 'readUuid',
}
const WRITE_PRIM = {
  bool: 'writeBoolean',
  int8: 'writeInt8',
  int16: 'writeInt16',
  uint16: 'writeUInt16',
  int32: 'writeInt32',
  uint32: 'writeUInt32',
  int64: 'writeInt64',
  float64: 'writeFloat64',
  uuid: 'writeUuid',
}

// ---------------------------------------------------------------- schema model

class SchemaError extends Error {}

function fail(where, message) {
  throw new SchemaError(`${where}: ${message}`)
}

/** Versions as Kafka writes them: "none", "N", "N+", "A-B". Returns null for none. */
function parseVersions(text, where) {
  if (typeof text !== 'string') fail(where, `versions must be a string, got ${JSON.stringify(text)}`)
  const s = text.trim()
  if (s === 'none') return null
  let m = /^(\d+)\+$/.exec(s)
  if (m) return check({ lo: Number(m[1]), hi: MAX_VERSION })
  m = /^(\d+)-(\d+)$/.exec(s)
  if (m) return check({ lo: Number(m[1]), hi: Number(m[2]) })
  m = /^(\d+)$/.exec(s)
  if (m) return check({ lo: Number(m[1]), hi: Number(m[1]) })
  return fail(where, `bad versions ${JSON.stringify(text)}`)
  function check(v) {
    if (v.lo > v.hi || v.hi > MAX_VERSION) fail(where, `bad versions ${JSON.stringify(text)}`)
    return v
  }
}

const has = (vs, v) => vs !== null && v >= vs.lo && v <= vs.hi
const covers = (outer, inner) =>
  inner === null || (outer !== null && outer.lo <= inner.lo && outer.hi >= inner.hi)
const versionsText = (vs) =>
  vs === null
    ? 'none'
    : vs.hi === MAX_VERSION
      ? `${vs.lo}+`
      : vs.lo === vs.hi
        ? `${vs.lo}`
        : `${vs.lo}-${vs.hi}`

const lowerFirst = (s) => s[0].toLowerCase() + s.slice(1)
const kebab = (s) => s.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase()

function parseType(text, where) {
  if (typeof text !== 'string') fail(where, 'type must be a string')
  if (text.startsWith('[]')) {
    const elem = parseType(text.slice(2), where)
    if (elem.kind === 'array') fail(where, 'nested arrays are not supported')
    if (elem.kind === 'prim' && elem.prim === 'records') fail(where, 'arrays of records are not supported')
    return { kind: 'array', elem }
  }
  if (PRIMITIVES.has(text)) return { kind: 'prim', prim: text }
  if (!/^[A-Z][A-Za-z0-9]*$/.test(text)) fail(where, `unknown type ${text}`)
  return { kind: 'struct', name: text }
}

function parseBool(value, where, key) {
  if (value === undefined) return false
  if (typeof value !== 'boolean') fail(where, `${key} must be a boolean`)
  return value
}

function parseField(json, where, msg) {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) fail(where, 'field must be an object')
  for (const key of Object.keys(json)) {
    if (!FIELD_KEYS.has(key)) fail(where, `unknown field key "${key}"`)
  }
  const name = json.name
  if (typeof name !== 'string' || !/^[A-Za-z][A-Za-z0-9]*$/.test(name)) fail(where, `bad field name ${name}`)
  where = `${where}.${name}`
  const type = parseType(json.type, where)
  const taggedVersions = json.taggedVersions === undefined ? null : parseVersions(json.taggedVersions, where)
  let versions
  if (json.versions !== undefined) versions = parseVersions(json.versions, where)
  else if (taggedVersions !== null) versions = taggedVersions
  else fail(where, 'missing versions')
  const nullableVersions =
    json.nullableVersions === undefined ? null : parseVersions(json.nullableVersions, where)
  if (nullableVersions !== null) {
    const ok =
      type.kind === 'array' || type.kind === 'struct' || ['string', 'bytes', 'records'].includes(type.prim)
    if (!ok) fail(where, `type ${json.type} cannot be nullable`)
  }
  let tag = null
  if (json.tag !== undefined) {
    tag = Number(json.tag)
    if (!Number.isInteger(tag) || tag < 0 || String(tag) !== String(json.tag).trim())
      fail(where, `bad tag ${json.tag}`)
    if (taggedVersions === null) fail(where, 'tag without taggedVersions')
    if (taggedVersions.hi !== MAX_VERSION) fail(where, 'taggedVersions must be open-ended')
    if (!covers(versions, taggedVersions)) fail(where, 'taggedVersions must be a subset of versions')
    const nt = nullableVersions === null ? null : intersect(nullableVersions, taggedVersions)
    if (nt !== null && (nt.lo !== taggedVersions.lo || nt.hi !== taggedVersions.hi)) {
      fail(where, 'either all tagged versions must be nullable, or none')
    }
    if (type.kind === 'prim' && type.prim === 'records') fail(where, 'records cannot be tagged')
  } else if (taggedVersions !== null) {
    fail(where, 'taggedVersions without tag')
  }
  let flexOverride
  if (json.flexibleVersions !== undefined) {
    if (!(type.kind === 'prim' && (type.prim === 'string' || type.prim === 'bytes'))) {
      fail(where, 'flexibleVersions override is only allowed on string and bytes fields')
    }
    flexOverride = parseVersions(json.flexibleVersions, where)
  }
  const zeroCopy = parseBool(json.zeroCopy, where, 'zeroCopy')
  if (zeroCopy && !(type.kind === 'prim' && type.prim === 'bytes')) fail(where, 'zeroCopy is only for bytes')
  const mapKey = parseBool(json.mapKey, where, 'mapKey')
  if (mapKey && tag !== null) fail(where, 'tagged fields cannot be map keys')
  if (json.entityType !== undefined && typeof json.entityType !== 'string')
    fail(where, 'entityType must be a string')
  if (json.about !== undefined && typeof json.about !== 'string') fail(where, 'about must be a string')
  let defaultText = ''
  if (json.default !== undefined) {
    if (typeof json.default === 'string') defaultText = json.default
    else if (typeof json.default === 'number' || typeof json.default === 'boolean')
      defaultText = String(json.default)
    else fail(where, 'bad default')
  }
  const field = {
    name,
    camel: lowerFirst(name),
    where,
    type,
    versions,
    nullableVersions,
    taggedVersions,
    tag,
    defaultText,
    ignorable: parseBool(json.ignorable, where, 'ignorable'),
    flexOverride,
    about: json.about ?? '',
    fields: null,
  }
  if (json.fields !== undefined) {
    if (!Array.isArray(json.fields)) fail(where, 'fields must be an array')
    const structType = type.kind === 'array' ? type.elem : type
    if (structType.kind !== 'struct') fail(where, 'only struct and struct-array fields can have fields')
    field.fields = json.fields.map((f, i) => parseField(f, `${where}[${i}]`, msg))
  }
  return field
}

function intersect(a, b) {
  if (a === null || b === null) return null
  const lo = Math.max(a.lo, b.lo)
  const hi = Math.min(a.hi, b.hi)
  return lo <= hi ? { lo, hi } : null
}

function loadMessage({ file, json, sources }) {
  const where = file
  for (const key of Object.keys(json)) {
    if (!TOP_KEYS.has(key)) fail(where, `unknown top-level key "${key}"`)
  }
  if (!MESSAGE_TYPES.has(json.type)) fail(where, `unknown message type ${json.type}`)
  if (typeof json.name !== 'string' || !/^[A-Z][A-Za-z0-9]*$/.test(json.name)) fail(where, 'bad name')
  const valid = parseVersions(json.validVersions, `${where}.validVersions`)
  if (valid === null || valid.hi === MAX_VERSION) fail(where, 'validVersions must be a closed range')
  const flexible = parseVersions(json.flexibleVersions ?? 'none', `${where}.flexibleVersions`)
  if (flexible !== null && flexible.hi !== MAX_VERSION) fail(where, 'flexibleVersions must be open-ended')
  let apiKey = null
  if (json.apiKey !== undefined) {
    if (!Number.isInteger(json.apiKey) || json.apiKey < 0 || json.apiKey > 0x7fff) fail(where, 'bad apiKey')
    apiKey = json.apiKey
  }
  if ((json.type === 'request' || json.type === 'response') && apiKey === null) fail(where, 'missing apiKey')
  let listeners = []
  if (json.listeners !== undefined) {
    if (!Array.isArray(json.listeners) || json.listeners.some((l) => typeof l !== 'string')) {
      fail(where, 'listeners must be an array of strings')
    }
    listeners = [...json.listeners]
  }
  const deprecated =
    json.deprecatedVersions === undefined
      ? null
      : parseVersions(json.deprecatedVersions, `${where}.deprecatedVersions`)
  if (!Array.isArray(json.fields)) fail(where, 'fields must be an array')
  const msg = {
    file,
    sources,
    module: kebab(json.name),
    name: json.name,
    type: json.type,
    apiKey,
    listeners,
    valid,
    flexible,
    deprecated,
    latestVersionUnstable: parseBool(json.latestVersionUnstable, where, 'latestVersionUnstable'),
    structs: new Map(), // name -> struct
    root: null,
  }
  const commonJson = json.commonStructs ?? []
  if (!Array.isArray(commonJson)) fail(where, 'commonStructs must be an array')
  const commons = new Map()
  for (const [i, cs] of commonJson.entries()) {
    const csWhere = `${where}.commonStructs[${i}]`
    for (const key of Object.keys(cs)) {
      if (!COMMON_STRUCT_KEYS.has(key)) fail(csWhere, `unknown common struct key "${key}"`)
    }
    if (typeof cs.name !== 'string' || !/^[A-Z][A-Za-z0-9]*$/.test(cs.name)) fail(csWhere, 'bad name')
    if (!Array.isArray(cs.fields)) fail(csWhere, 'fields must be an array')
    commons.set(cs.name, {
      name: cs.name,
      versions: parseVersions(cs.versions ?? '0+', csWhere),
      fields: cs.fields.map((f, j) => parseField(f, `${csWhere}.${cs.name}[${j}]`, msg)),
      common: true,
    })
  }
  msg.root = {
    name: json.name,
    tsName: json.name,
    versions: valid,
    fields: json.fields.map((f, i) => parseField(f, `${where}[${i}]`, msg)),
  }
  registerStructs(msg, msg.root.fields, commons)
  for (const cs of commons.values()) {
    if (!msg.structs.has(cs.name)) {
      cs.tsName = json.name + cs.name
      msg.structs.set(cs.name, cs)
      registerStructs(msg, cs.fields, commons)
    }
  }
  validateStruct(msg, msg.root)
  for (const s of msg.structs.values()) validateStruct(msg, s)
  computeReachable(msg)
  return msg
}

function registerStructs(msg, fields, commons) {
  for (const f of fields) {
    const st = f.type.kind === 'array' ? f.type.elem : f.type
    if (st.kind !== 'struct') continue
    if (f.fields !== null) {
      if (msg.structs.has(st.name) || commons.has(st.name) || st.name === msg.name) {
        fail(f.where, `struct ${st.name} is defined twice`)
      }
      const s = {
        name: st.name,
        tsName: msg.name + st.name,
        versions: f.versions,
        fields: f.fields,
        common: false,
      }
      msg.structs.set(st.name, s)
      registerStructs(msg, f.fields, commons)
    } else if (commons.has(st.name)) {
      const cs = commons.get(st.name)
      if (!msg.structs.has(st.name)) {
        cs.tsName = msg.name + cs.name
        msg.structs.set(st.name, cs)
        registerStructs(msg, cs.fields, commons)
      }
    } else {
      fail(f.where, `struct type ${st.name} has no fields and is not a common struct`)
    }
  }
}

function structOf(msg, field) {
  const st = field.type.kind === 'array' ? field.type.elem : field.type
  return st.kind === 'struct' ? msg.structs.get(st.name) : null
}

function validateStruct(msg, struct) {
  const tags = new Set()
  const names = new Set()
  for (const f of struct.fields) {
    if (names.has(f.camel)) fail(f.where, 'duplicate field name')
    names.add(f.camel)
    if (f.tag !== null) {
      if (tags.has(f.tag)) fail(f.where, `duplicate tag ${f.tag}`)
      tags.add(f.tag)
      if (!covers(msg.flexible, f.taggedVersions))
        fail(f.where, 'taggedVersions must be within the flexible versions')
    }
    // Validate the default now, so a bad default fails generation.
    defaultExpr(msg, f)
  }
}

/** For every struct, the versions at which it can be encoded or decoded. */
function computeReachable(msg) {
  for (const s of msg.structs.values()) s.reachable = new Set()
  msg.root.reachable = new Set()
  const visit = (struct, v) => {
    if (struct.reachable.has(v)) return
    struct.reachable.add(v)
    for (const f of struct.fields) {
      const child = structOf(msg, f)
      if (child !== null && has(f.versions, v)) visit(child, v)
    }
  }
  for (let v = msg.valid.lo; v <= msg.valid.hi; v++) visit(msg.root, v)
  for (const s of [msg.root, ...msg.structs.values()]) {
    s.flexible = [...s.reachable].some((v) => has(msg.flexible, v))
  }
}

// ---------------------------------------------------------------- defaults and types

function parseIntDefault(f, text) {
  let s = text.trim()
  let negative = false
  if (s.startsWith('-')) {
    negative = true
    s = s.slice(1)
  }
  let value
  if (/^0x[0-9a-fA-F]+$/.test(s)) value = BigInt(s)
  else if (/^\d+$/.test(s)) value = BigInt(s)
  else fail(f.where, `invalid default ${text}`)
  if (negative) value = -value
  const [lo, hi] = INT_RANGES[f.type.prim]
  if (value < lo || value > hi) fail(f.where, `default ${text} out of range`)
  return value
}

function nullDefaultAllowed(f) {
  if (!covers(f.nullableVersions, f.versions)) fail(f.where, 'null default but not nullable in all versions')
}

/** The field's default as a TypeScript expression (fresh object each evaluation). */
function defaultExpr(msg, f) {
  const d = f.defaultText
  const t = f.type
  if (t.kind === 'array') {
    if (d === 'null') {
      nullDefaultAllowed(f)
      return 'null'
    }
    if (d !== '') fail(f.where, 'an array default can only be empty or null')
    return '[]'
  }
  if (t.kind === 'struct') {
    if (d === 'null') {
      nullDefaultAllowed(f)
      return 'null'
    }
    if (d !== '') fail(f.where, 'a struct default can only be empty or null')
    return `default${msg.structs.get(t.name).tsName}()`
  }
  switch (t.prim) {
    case 'bool':
      if (d === '' || d.toLowerCase() === 'false') return 'false'
      if (d.toLowerCase() === 'true') return 'true'
      return fail(f.where, `invalid bool default ${d}`)
    case 'int8':
    case 'int16':
    case 'uint16':
    case 'int32':
    case 'uint32':
      return d === '' ? '0' : String(parseIntDefault(f, d))
    case 'int64':
      return d === '' ? '0n' : `${parseIntDefault(f, d)}n`
    case 'float64': {
      if (d === '') return '0'
      const n = Number(d)
      if (!Number.isFinite(n)) fail(f.where, `invalid float64 default ${d}`)
      return String(n)
    }
    case 'uuid':
      if (d === '') return 'ZERO_UUID'
      if (
        Buffer.from(d, 'base64url').length !== 16 ||
        Buffer.from(d, 'base64url').toString('base64url') !== d
      ) {
        fail(f.where, `invalid uuid default ${d}`)
      }
      return JSON.stringify(d)
    case 'string':
      if (d === 'null') {
        nullDefaultAllowed(f)
        return 'null'
      }
      return quote(d)
    case 'bytes':
      if (d === 'null') {
        nullDefaultAllowed(f)
        return 'null'
      }
      if (d !== '') fail(f.where, 'a bytes default can only be empty or null')
      return 'Buffer.alloc(0)'
    case 'records':
      if (d !== '' && d !== 'null') fail(f.where, 'records default must be null')
      return 'null'
  }
  return fail(f.where, 'unreachable')
}

const quote = (s) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`

const isNullableAnywhere = (f) =>
  f.nullableVersions !== null && intersect(f.nullableVersions, f.versions) !== null

function tsType(msg, f) {
  const t = f.type
  const base = (tt) => {
    if (tt.kind === 'struct') return msg.structs.get(tt.name).tsName
    switch (tt.prim) {
      case 'bool':
        return 'boolean'
      case 'int64':
        return 'bigint'
      case 'string':
      case 'uuid':
        return 'string'
      case 'bytes':
        return 'Buffer'
      case 'records':
        return 'RecordsData'
      default:
        return 'number'
    }
  }
  if (t.kind === 'prim' && t.prim === 'records') return 'RecordsData'
  const core = t.kind === 'array' ? `${base(t.elem)}[]` : base(t)
  return isNullableAnywhere(f) ? `${core} | null` : core
}

/** An expression that is true when `x` differs from the field's default (Kafka's non-default check). */
function nonDefaultExpr(msg, f, x) {
  const d = defaultExpr(msg, f)
  const nullable = isNullableAnywhere(f)
  const t = f.type
  if (t.kind === 'array' || (t.kind === 'prim' && t.prim === 'bytes')) {
    if (d === 'null') return `${x} !== null`
    return nullable ? `(${x} === null || ${x}.length !== 0)` : `${x}.length !== 0`
  }
  if (t.kind === 'prim' && t.prim === 'records') return `${x} !== null`
  if (t.kind === 'struct') {
    if (d === 'null') return `${x} !== null`
    const fn = `isDefault${msg.structs.get(t.name).tsName}`
    return nullable ? `(${x} === null || !${fn}(${x}))` : `!${fn}(${x})`
  }
  return `${x} !== ${d}`
}

// ---------------------------------------------------------------- code generation

class Ctx {
  constructor(msg) {
    this.msg = msg
    this.isDefaultNeeded = new Set()
  }
}

const fieldFlex = (msg, f, v) =>
  f.flexOverride !== undefined ? has(f.flexOverride, v) : has(msg.flexible, v)
const isTaggedAt = (f, v) => has(f.taggedVersions, v)

/** Statements that write value `x` of field f at version v (untagged form). */
function writeValue(ctx, f, v, x, w, tagged) {
  const msg = ctx.msg
  const flex = tagged || fieldFlex(msg, f, v)
  const nullableNow = has(f.nullableVersions, v)
  const nullableType = isNullableAnywhere(f) || (f.type.kind === 'prim' && f.type.prim === 'records')
  const nn = (e) => {
    if (nullableType && !nullableNow) {
      return `notNull(${e}, '${f.camel}')`
    }
    return e
  }
  const t = f.type
  if (t.kind === 'prim') {
    switch (t.prim) {
      case 'string':
      case 'bytes':
      case 'records': {
        const kind = t.prim === 'string' ? 'String' : 'Bytes'
        if (nullableNow) return `${w}.write${flex ? 'Compact' : ''}Nullable${kind}(${x})\n`
        return `${w}.write${flex ? 'Compact' : ''}${kind}(${nn(x)})\n`
      }
      default:
        return `${w}.${WRITE_PRIM[t.prim]}(${x})\n`
    }
  }
  if (t.kind === 'struct') {
    const s = msg.structs.get(t.name)
    if (nullableNow) {
      const mark = tagged ? `${w}.writeUnsignedVarint` : `${w}.writeInt8`
      return `if (${x} === null) { ${mark}(${tagged ? 0 : -1}) } else { ${mark}(1); encode${s.tsName}(${w}, version, ${x}) }\n`
    }
    return `encode${s.tsName}(${w}, version, ${nn(x)})\n`
  }
  // array
  const lenCall = flex ? 'writeCompactArrayLength' : 'writeArrayLength'
  const e = t.elem
  let elemWrite
  if (e.kind === 'struct') elemWrite = `encode${msg.structs.get(e.name).tsName}(${w}, version, a[i])`
  else if (e.prim === 'string') elemWrite = `${w}.write${flex ? 'Compact' : ''}String(a[i])`
  else if (e.prim === 'bytes') elemWrite = `${w}.write${flex ? 'Compact' : ''}Bytes(a[i])`
  else elemWrite = `${w}.${WRITE_PRIM[e.prim]}(a[i])`
  const loop = `${w}.${lenCall}(a.length)\nfor (let i = 0; i < a.length; i++) ${elemWrite}\n`
  if (nullableNow) {
    return `{\nconst a = ${x}\nif (a === null) { ${w}.${lenCall}(-1) } else {\n${loop}}\n}\n`
  }
  return `{\nconst a = ${nn(x)}\n${loop}}\n`
}

/**
 * How to read field f at version v from reader `r`: `{ expr }` for a single expression, or
 * `{ stmts }` that assign variable `dst` (declared by the caller) for arrays.
 */
function readValue(ctx, f, v, r, dst, tagged) {
  const msg = ctx.msg
  const flex = tagged || fieldFlex(msg, f, v)
  const nullableNow = has(f.nullableVersions, v)
  const t = f.type
  if (t.kind === 'prim') {
    switch (t.prim) {
      case 'string':
      case 'bytes':
      case 'records': {
        const kind = t.prim === 'string' ? 'String' : 'Bytes'
        return { expr: `${r}.read${flex ? 'Compact' : ''}${nullableNow ? 'Nullable' : ''}${kind}()` }
      }
      default:
        return { expr: `${r}.${READ_PRIM[t.prim]}()` }
    }
  }
  if (t.kind === 'struct') {
    const s = msg.structs.get(t.name)
    if (nullableNow) {
      // Kafka marks a nullable struct with an int8 (-1 null, 1 present), or a varint (0 null) when tagged.
      const test = tagged ? `${r}.readUnsignedVarint() === 0` : `${r}.readInt8() < 0`
      return { expr: `${test} ? null : decode${s.tsName}(${r}, version)` }
    }
    return { expr: `decode${s.tsName}(${r}, version)` }
  }
  const e = t.elem
  let elemRead
  if (e.kind === 'struct') elemRead = `decode${msg.structs.get(e.name).tsName}(${r}, version)`
  else if (e.prim === 'string') elemRead = `${r}.read${flex ? 'Compact' : ''}String()`
  else if (e.prim === 'bytes') elemRead = `${r}.read${flex ? 'Compact' : ''}Bytes()`
  else elemRead = `${r}.${READ_PRIM[e.prim]}()`
  const elemType = tsType(msg, { ...f, nullableVersions: null, type: e })
  const len = `${r}.${flex ? 'readCompactArrayLength' : 'readArrayLength'}()`
  const fill = `const a: ${elemType}[] = []\nfor (let i = 0; i < n; i++) a.push(${elemRead})\n${dst} = a\n`
  if (nullableNow) {
    return { stmts: `{\nconst n = ${len}\nif (n < 0) ${dst} = null\nelse {\n${fill}}\n}\n` }
  }
  return {
    stmts:
      `{\nconst n = ${len}\n` +
      `if (n < 0) throw new ProtocolDecodeError('non-nullable field ${f.camel} was serialized as null')\n${fill}}\n`,
  }
}

const localName = (f) => `f${f.name[0].toUpperCase()}${f.name.slice(1)}`

function encodeBody(ctx, struct, v) {
  const msg = ctx.msg
  const flexible = has(msg.flexible, v)
  let out = ''
  const tagged = []
  for (const f of struct.fields) {
    const x = `m.${f.camel}`
    if (!has(f.versions, v)) {
      if (!f.ignorable) {
        out += `if (${nonDefaultExpr(msg, f, x)}) throw new UnsupportedVersionError(\`Attempted to write a non-default ${f.camel} at version \${version}\`)\n`
        markIsDefault(ctx, f)
      }
      continue
    }
    if (isTaggedAt(f, v)) {
      tagged.push(f)
      continue
    }
    out += writeValue(ctx, f, v, x, 'w', false)
  }
  if (!flexible) {
    if (struct.flexible) {
      out +=
        'if (m._unknownTaggedFields !== undefined && m._unknownTaggedFields.length > 0) ' +
        // biome-ignore lint/suspicious/noTemplateCurlyInString: generated template literal
        'throw new UnsupportedVersionError(`Tagged fields were set, but version ${version} of this message does not support them`)\n'
    }
    return out
  }
  if (tagged.length === 0) {
    return `${out}writeTaggedFields(w, m._unknownTaggedFields)\n`
  }
  tagged.sort((a, b) => a.tag - b.tag)
  out += 'const u = m._unknownTaggedFields\nlet count = u === undefined ? 0 : u.length\n'
  for (const f of tagged) {
    // Kafka writes a tagged field only when it differs from its default.
    out += `const t${f.tag} = ${nonDefaultExpr(msg, f, `m.${f.camel}`)}\nif (t${f.tag}) count++\n`
    markIsDefault(ctx, f)
  }
  out += 'w.writeUnsignedVarint(count)\nlet ui = 0\n'
  for (const f of tagged) {
    out += `if (t${f.tag}) {\nif (u !== undefined) ui = writeUnknownTaggedFields(w, u, ui, ${f.tag})\n`
    const t = f.type
    if (t.kind === 'prim' && FIXED_SIZE[t.prim] !== undefined) {
      out += `w.writeUnsignedVarint(${f.tag})\nw.writeUnsignedVarint(${FIXED_SIZE[t.prim]})\n`
      out += writeValue(ctx, f, v, `m.${f.camel}`, 'w', true)
    } else {
      out += `const tw = new Writer(64)\n${writeValue(ctx, f, v, `m.${f.camel}`, 'tw', true)}writeTaggedValue(w, ${f.tag}, tw)\n`
    }
    out += '}\n'
  }
  out += 'if (u !== undefined) writeUnknownTaggedFields(w, u, ui, Number.POSITIVE_INFINITY)\n'
  return out
}

function markIsDefault(ctx, f) {
  if (f.type.kind === 'struct' && f.defaultText !== 'null') {
    const s = ctx.msg.structs.get(f.type.name)
    addIsDefault(ctx, s)
  }
}

function addIsDefault(ctx, s) {
  if (ctx.isDefaultNeeded.has(s)) return
  ctx.isDefaultNeeded.add(s)
  for (const f of s.fields) markIsDefault(ctx, f)
}

function decodeBody(ctx, struct, v) {
  const msg = ctx.msg
  const flexible = has(msg.flexible, v)
  let out = ''
  for (const f of struct.fields) {
    const local = localName(f)
    const type = tsType(msg, f)
    if (has(f.versions, v) && !isTaggedAt(f, v)) {
      const read = readValue(ctx, f, v, 'r', local, false)
      out +=
        read.expr !== undefined
          ? `const ${local}: ${type} = ${read.expr}\n`
          : `let ${local}: ${type}\n${read.stmts}`
    } else {
      const d = defaultExpr(msg, f)
      out += `${has(f.versions, v) && isTaggedAt(f, v) ? 'let' : 'const'} ${local}: ${type} = ${d}\n`
    }
  }
  const literal = `{ ${struct.fields.map((f) => `${f.camel}: ${localName(f)}`).join(', ')} }`
  if (!flexible) return `${out}return ${literal}\n`
  const known = struct.fields.filter((f) => f.tag !== null).sort((a, b) => a.tag - b.tag)
  if (known.length === 0) {
    out += `const m: ${struct.tsName} = ${literal}\nconst u = readUnknownTaggedFields(r)\n`
    return `${out}if (u !== undefined) m._unknownTaggedFields = u\nreturn m\n`
  }
  out +=
    'let u: TaggedField[] | undefined\nconst count = r.readUnsignedVarint()\nfor (let i = 0; i < count; i++) {\n'
  out += 'const tag = r.readUnsignedVarint()\nconst size = r.readUnsignedVarint()\nswitch (tag) {\n'
  for (const f of known) {
    out += `case ${f.tag}: {\n`
    if (has(f.versions, v) && isTaggedAt(f, v)) {
      const read = readValue(ctx, f, v, 'tr', localName(f), true)
      out += `const tr = new Reader(r.readRaw(size))\n${read.expr !== undefined ? `${localName(f)} = ${read.expr}\n` : read.stmts}break\n`
    } else {
      out += `throw new ProtocolDecodeError(\`tag ${f.tag} is not valid for version \${version}\`)\n`
    }
    out += '}\n'
  }
  out += 'default:\nif (u === undefined) u = []\nu.push({ tag, data: r.readRaw(size) })\n}\n}\n'
  out += `const m: ${struct.tsName} = ${literal}\nif (u !== undefined) m._unknownTaggedFields = u\nreturn m\n`
  return out
}

/** A `switch (version)` with one case group per distinct body (versions with the same layout share code). */
function versionSwitch(versions, bodyFor, fallback) {
  const groups = new Map()
  for (const v of versions) {
    const body = bodyFor(v)
    if (!groups.has(body)) groups.set(body, [])
    groups.get(body).push(v)
  }
  let out = 'switch (version) {\n'
  for (const [body, vs] of groups) {
    out += vs.map((v) => `case ${v}:`).join('\n')
    out += ` {\n${body}${/\breturn\b[^\n]*\n$/.test(body) ? '' : 'return\n'}}\n`
  }
  out += `default:\n${fallback}\n}\n`
  return out
}

function docComment(f) {
  const parts = []
  if (f.about) parts.push(f.about.replace(/\*\//g, '*\\/'))
  const notes = [`versions ${versionsText(f.versions)}`]
  if (f.nullableVersions) notes.push(`nullable ${versionsText(f.nullableVersions)}`)
  if (f.tag !== null) notes.push(`tag ${f.tag} in ${versionsText(f.taggedVersions)}`)
  if (f.ignorable) notes.push('ignorable')
  if (f.defaultText !== '') notes.push(`default ${f.defaultText}`)
  parts.push(`(${notes.join(', ')})`)
  return `/** ${parts.join(' ')} */\n`
}

function generateStruct(ctx, struct, isRoot) {
  const msg = ctx.msg
  const name = struct.tsName
  const versions = [...struct.reachable].sort((a, b) => a - b)
  let out = ''
  // interface
  out += isRoot
    ? `/** ${msg.name}: versions ${versionsText(msg.valid)}, flexible ${versionsText(msg.flexible)}. */\n`
    : `/** ${msg.name} struct ${struct.name}. */\n`
  out += `export interface ${name} {\n`
  for (const f of struct.fields) {
    out += docComment(f)
    out += `${f.camel}: ${tsType(msg, f)}\n`
  }
  if (struct.flexible) {
    out += '/** Tagged fields this code does not know, kept so they are written back unchanged. */\n'
    out += '_unknownTaggedFields?: TaggedField[]\n'
  }
  out += '}\n\n'
  // default
  out += `export function default${name}(): ${name} {\nreturn { ${struct.fields
    .map((f) => `${f.camel}: ${defaultExpr(msg, f)}`)
    .join(', ')} }\n}\n\n`
  const exp = isRoot ? 'export ' : ''
  const unsupported = (what) =>
    `throw new UnsupportedVersionError(\`cannot ${what} version \${version} of ${name}\`)`
  out += `${exp}function encode${name}(w: Writer, version: number, m: ${name}): void {\n`
  out += versionSwitch(versions, (v) => encodeBody(ctx, struct, v), unsupported('encode'))
  out += '}\n\n'
  out += `${exp}function decode${name}(r: Reader, version: number): ${name} {\n`
  out += versionSwitch(versions, (v) => decodeBody(ctx, struct, v), unsupported('decode'))
  out += '}\n\n'
  return out
}

function generateIsDefault(ctx, s) {
  const msg = ctx.msg
  const checks = []
  if (s.flexible) checks.push('(m._unknownTaggedFields === undefined || m._unknownTaggedFields.length === 0)')
  for (const f of s.fields) {
    checks.push(`!(${nonDefaultExpr(msg, f, `m.${f.camel}`)})`)
  }
  return `function isDefault${s.tsName}(m: ${s.tsName}): boolean {\nreturn ${checks.length ? checks.join(' &&\n') : 'true'}\n}\n\n`
}

const LICENSE_NOTE = (source) =>
  `// Generated by scripts/gen-protocol.mjs from ${source}. Do not edit: change the generator and run \`npm run gen:protocol\`.\n` +
  '//\n' +
  '// The message definitions come from Apache Kafka (https://kafka.apache.org), licensed under the\n' +
  '// Apache License, Version 2.0; see LICENSE and NOTICE in protocol-schemas/ and protocol-schemas/4.4/.\n\n'

/** The generated code of one message: its structs' interfaces, defaults and codecs. */
function generateMessageBody(msg) {
  const ctx = new Ctx(msg)
  let body = ''
  body += generateStruct(ctx, msg.root, true)
  for (const s of msg.structs.values()) {
    if (s.reachable.size === 0) continue
    body += generateStruct(ctx, s, false)
  }
  for (const s of [...msg.structs.values()].filter((x) => ctx.isDefaultNeeded.has(x))) {
    body += generateIsDefault(ctx, s)
  }
  return body
}

/** The names a message's module exports: one interface and default per struct, root codecs. */
function messageExports(msg) {
  const structs = [msg.root, ...[...msg.structs.values()].filter((s) => s.reachable.size > 0)]
  return {
    types: structs.map((s) => s.tsName),
    values: [
      `decode${msg.root.tsName}`,
      ...structs.map((s) => `default${s.tsName}`),
      `encode${msg.root.tsName}`,
    ],
  }
}

/**
 * Where each message's code lives. One module per API (its request and its response): the
 * bundle (scripts/bundle.mjs) makes each one a file of its own, so `tidelog start` compiles only the
 * codecs it loads eagerly (EAGER_APIS) instead of all ~1.3 MB, and the others load on their
 * API's first request (docs/notes/startup.md). Headers and data messages, which any request or
 * the storage and group code needs, are one module.
 */
const HEADERS_AND_DATA = { module: 'headers-and-data', about: 'headers and data messages' }
const GROUP_SOURCE_CHARS_MAX = 850 * 1024 // biome formatting adds about 15%; its limit is 1 MiB

/**
 * APIs whose codecs load with index.ts: ApiVersions and Metadata start every client session,
 * Produce and Fetch are the data path, so none of them waits for a load on a fresh broker.
 */
const EAGER_APIS = new Set([0, 1, 3, 18])

const isApiMessage = (msg) => msg.type === 'request' || msg.type === 'response'
const apiModuleOf = (msg) => `apis/${msg.module.replace(/-(request|response)$/, '')}`
const moduleOf = (msg) => (isApiMessage(msg) ? apiModuleOf(msg) : HEADERS_AND_DATA.module)
const apiNameOf = (req) => req.name.slice(0, -'Request'.length)
const codecNameOf = (req) => `${apiNameOf(req)[0].toLowerCase()}${apiNameOf(req).slice(1)}Codec`

/**
 * One module holding the code of several messages, in the given order; `up` leads from its
 * folder to src/protocol/generated. `trailer` is appended after the messages' code.
 */
function generateCodeFile(about, messages, up, trailer = '') {
  let body = ''
  for (const msg of messages) {
    body += `// ${'-'.repeat(56)} ${msg.name} (protocol-schemas/${msg.sources})\n\n`
    body += generateMessageBody(msg)
  }
  body += trailer
  // imports
  const prim = []
  if (/\bnew Reader\(/.test(body)) prim.push('Reader')
  else prim.push('type Reader')
  if (/\bnew Writer\(/.test(body)) prim.push('Writer')
  else prim.push('type Writer')
  if (/\bZERO_UUID\b/.test(body)) prim.push('ZERO_UUID')
  const common = []
  for (const name of [
    'notNull',
    'readUnknownTaggedFields',
    'UnsupportedVersionError',
    'writeTaggedFields',
    'writeTaggedValue',
    'writeUnknownTaggedFields',
  ]) {
    if (new RegExp(`\\b${name}\\(`).test(body)) common.push(name)
  }
  if (/\bApiCodec\b/.test(body)) common.push('type ApiCodec')
  if (/\bRecordsData\b/.test(body)) common.push('type RecordsData')
  if (/\bTaggedField\b/.test(body)) common.push('type TaggedField')
  let imports = ''
  if (/\bProtocolDecodeError\(/.test(body))
    imports += `import { ProtocolDecodeError } from '${up}../../common/errors.js'\n`
  imports += importLine(prim, `${up}../primitives.js`)
  imports += importLine(common, `${up}common.js`)
  return `${LICENSE_NOTE(about)}${imports}\n${body}`
}

/** An API's module: its request's and response's code and the untyped codec the registry loads. */
function generateApiFile(req, res) {
  const trailer =
    `/**\n * ${apiNameOf(req)}'s codecs, untyped, for the API registry (loadApiCodec in index.ts). A request\n` +
    ' * body given here may leave out top-level fields (untyped callers written before a newer schema\n' +
    ' * added some): they hold their defaults.\n */\n' +
    `export const ${codecNameOf(req)}: ApiCodec = {\n` +
    `decodeRequest: decode${req.name},\n` +
    `encodeRequest: (w, v, m) => encode${req.name}(w, v, { ...default${req.name}(), ...(m as ${req.name}) }),\n` +
    `decodeResponse: decode${res.name},\nencodeResponse: (w, v, m) => encode${res.name}(w, v, m as ${res.name}),\n` +
    `defaultRequest: default${req.name},\ndefaultResponse: default${res.name},\n}\n`
  return generateCodeFile(`protocol-schemas/${req.sources} and ${res.sources}`, [req, res], '../', trailer)
}

/**
 * A message's own module path, kept so existing imports work: it re-exports the message's
 * names from the module holding its code and loads nothing else. New code imports from index.js.
 */
function generateMessageFile(msg) {
  const { types, values } = messageExports(msg)
  const from = `./${moduleOf(msg)}.js`
  return (
    `${LICENSE_NOTE(`protocol-schemas/${msg.sources}`)}` +
    `// The code is in ${moduleOf(msg)}.ts; this module only re-exports ${msg.name}'s names.\n\n` +
    `export type { ${types.join(', ')} } from '${from}'\n` +
    `export { ${values.join(', ')} } from '${from}'\n`
  )
}

function importLine(names, from) {
  if (names.length === 0) return ''
  if (names.every((n) => n.startsWith('type '))) {
    return `import type { ${names.map((n) => n.slice(5)).join(', ')} } from '${from}'\n`
  }
  return `import { ${names.join(', ')} } from '${from}'\n`
}

const COMMON_FILE = `${LICENSE_NOTE('protocol-schemas/*.json (shared runtime)')}import { ProtocolDecodeError, TidelogError } from '../../common/errors.js'
import type { Reader, Writer } from '../primitives.js'

/**
 * A records field: decoded as a view of the request buffer (or null); on encode it may also be
 * a list of buffers written back to back, so fetched record batches are never copied.
 */
export type RecordsData = Buffer | readonly Buffer[] | null

/** One API's codecs, untyped: what the registry (index.ts) loads for an API key. */
export interface ApiCodec {
  decodeRequest(r: Reader, version: number): unknown
  encodeRequest(w: Writer, version: number, m: unknown): void
  decodeResponse(r: Reader, version: number): unknown
  encodeResponse(w: Writer, version: number, m: unknown): void
  defaultRequest(): unknown
  defaultResponse(): unknown
}

/** A tagged field the generated code does not know: its tag and its raw value bytes. */
export interface TaggedField {
  tag: number
  data: Buffer
}

/**
 * Kafka's UnsupportedVersionException: a message cannot be written at the requested version,
 * e.g. a non-ignorable field holds a non-default value the version cannot carry.
 */
export class UnsupportedVersionError extends TidelogError {
  constructor(message: string) {
    super('ERR_UNSUPPORTED_VERSION', message)
    this.name = 'UnsupportedVersionError'
  }
}

/** A field that is nullable in some versions but not in the one being written. */
export function notNull<T>(value: T | null, field: string): T {
  if (value === null) throw new UnsupportedVersionError(\`non-nullable field \${field} is null\`)
  return value
}

/** Reads the tagged-field section of a struct with no known tagged fields at this version. */
export function readUnknownTaggedFields(r: Reader): TaggedField[] | undefined {
  const count = r.readUnsignedVarint()
  if (count === 0) return undefined
  // Each field takes at least two bytes, so a hostile count runs out of input first.
  if (count > r.remaining) throw new ProtocolDecodeError(\`\${count} tagged fields exceed the frame\`)
  const fields: TaggedField[] = []
  for (let i = 0; i < count; i++) {
    const tag = r.readUnsignedVarint()
    const size = r.readUnsignedVarint()
    fields.push({ tag, data: r.readRaw(size) })
  }
  return fields
}

/** The tagged-field section of a struct that has no known tagged fields at this version. */
export function writeTaggedFields(w: Writer, fields: readonly TaggedField[] | undefined): void {
  if (fields === undefined) {
    w.writeUnsignedVarint(0)
    return
  }
  w.writeUnsignedVarint(fields.length)
  writeUnknownTaggedFields(w, fields, 0, Number.POSITIVE_INFINITY)
}

/**
 * Writes unknown tagged fields from index \`from\` while their tag is below \`belowTag\`, so they
 * interleave with the known ones in tag order (as Kafka's RawTaggedFieldWriter). Returns the
 * index of the first field not written.
 */
export function writeUnknownTaggedFields(
  w: Writer,
  fields: readonly TaggedField[],
  from: number,
  belowTag: number,
): number {
  let i = from
  for (; i < fields.length && fields[i].tag < belowTag; i++) {
    const field = fields[i]
    w.writeUnsignedVarint(field.tag)
    w.writeUnsignedVarint(field.data.length)
    w.writeRaw(field.data)
  }
  return i
}

/** Writes a known tagged field whose value was encoded into its own writer: tag, size, value. */
export function writeTaggedValue(w: Writer, tag: number, value: Writer): void {
  const size = value.length
  w.writeUnsignedVarint(tag)
  w.writeUnsignedVarint(size)
  for (const chunk of value.toChunks()) w.writeRaw(chunk)
}
`

// ---------------------------------------------------------------- index (API registry)

function generateIndex(messages) {
  const byKey = new Map()
  for (const m of messages) {
    if (m.type !== 'request' && m.type !== 'response') continue
    if (!byKey.has(m.apiKey)) byKey.set(m.apiKey, {})
    const entry = byKey.get(m.apiKey)
    if (entry[m.type]) fail(m.file, `second ${m.type} for api key ${m.apiKey}`)
    entry[m.type] = m
  }
  const keys = [...byKey.keys()].sort((a, b) => a - b)
  let eagerImports = ''
  let eagerCodecs = ''
  let loaders = ''
  let exportsAll = "export * from './common.js'\n"
  let apiKeyObj = 'export const ApiKey = {\n'
  let reqMap = 'export interface RequestByApiKey {\n'
  let resMap = 'export interface ResponseByApiKey {\n'
  let entries = ''
  for (const key of keys) {
    const { request: req, response: res } = byKey.get(key)
    if (!req || !res) fail(`api key ${key}`, 'needs both a request and a response schema')
    if (!req.name.endsWith('Request') || !res.name.endsWith('Response'))
      fail(req.file, 'unexpected message names')
    const name = req.name.slice(0, -'Request'.length)
    if (res.name !== `${name}Response`) fail(res.file, `response name does not match ${req.name}`)
    if (req.valid.lo !== res.valid.lo || req.valid.hi !== res.valid.hi)
      fail(res.file, 'request and response validVersions differ')
    const codecImport = EAGER_APIS.has(key) ? [codecNameOf(req)] : []
    eagerImports += importLine(
      [...codecImport, `type ${req.name}`, `type ${res.name}`],
      `./${apiModuleOf(req)}.js`,
    )
    if (EAGER_APIS.has(key)) eagerCodecs += `[${key}, ${codecNameOf(req)}],\n`
    else loaders += `[${key}, () => import('./${apiModuleOf(req)}.js').then((m) => m.${codecNameOf(req)})],\n`
    // Types only: a re-exported value makes esbuild put the API's module in the chunks
    // `tidelog start` loads, whether or not anything imports that value. Code that needs
    // an API's functions imports them from the message's own module (fetch-request.js).
    const named = [req, res].map(messageExports)
    exportsAll += `export type { ${named.flatMap((n) => n.types).join(', ')} } from './${apiModuleOf(req)}.js'\n`
    apiKeyObj += `${name}: ${key},\n`
    reqMap += `${key}: ${req.name}\n`
    resMap += `${key}: ${res.name}\n`
    const flexMin = req.flexible === null ? 'null' : String(req.flexible.lo)
    const resFlexMin = res.flexible === null ? 'null' : String(res.flexible.lo)
    const dep =
      req.deprecated === null
        ? 'null'
        : `{ min: ${req.deprecated.lo}, max: ${Math.min(req.deprecated.hi, req.valid.hi)} }`
    const listeners = [...req.listeners].sort()
    let reqHeader
    if (req.flexible === null) reqHeader = key === 7 ? '(v) => (v === 0 ? 0 : 1)' : '() => 1'
    else
      reqHeader =
        key === 7
          ? `(v) => (v === 0 ? 0 : v >= ${req.flexible.lo} ? 2 : 1)`
          : `(v) => (v >= ${req.flexible.lo} ? 2 : 1)`
    let resHeader
    if (key === 18 || res.flexible === null) resHeader = '() => 0'
    else resHeader = `(v) => (v >= ${res.flexible.lo} ? 1 : 0)`
    entries +=
      `[${key}, {\napiKey: ${key},\nname: '${name}',\nminVersion: ${req.valid.lo},\nmaxVersion: ${req.valid.hi},\n` +
      `latestVersionUnstable: ${req.latestVersionUnstable},\nflexibleMinVersion: ${flexMin},\n` +
      `deprecatedVersions: ${dep},\nlisteners: [${listeners.map(quote).join(', ')}],\n` +
      `decodeRequest: (r, v) => requireApiCodec(${key}).decodeRequest(r, v),\n` +
      `encodeRequest: (w, v, m) => requireApiCodec(${key}).encodeRequest(w, v, m),\n` +
      `decodeResponse: (r, v) => requireApiCodec(${key}).decodeResponse(r, v),\n` +
      `encodeResponse: (w, v, m) => requireApiCodec(${key}).encodeResponse(w, v, m),\n` +
      `defaultRequest: () => requireApiCodec(${key}).defaultRequest(),\n` +
      `defaultResponse: () => requireApiCodec(${key}).defaultResponse(),\n` +
      `requestHeaderVersion: ${reqHeader},\nresponseHeaderVersion: ${resHeader},\n}],\n`
    if (resFlexMin !== flexMin) {
      // Header versions follow each side's own flexible versions; they agree for every 3.9 API.
      fail(res.file, 'request and response flexibleVersions differ')
    }
  }
  apiKeyObj += '} as const\n\nexport type ApiKey = (typeof ApiKey)[keyof typeof ApiKey]\n\n'
  reqMap += '}\n\n'
  resMap += '}\n\n'
  exportsAll += `export * from './${HEADERS_AND_DATA.module}.js'\n`
  return `${LICENSE_NOTE('protocol-schemas/*.json (API registry)')}import { assert } from '../../common/assert.js'
import type { Reader, Writer } from '../primitives.js'
import type { ApiCodec } from './common.js'
${eagerImports}
${exportsAll}
/** What tidelog knows about one API key: version ranges and untyped codecs for its messages. */
export interface ApiDescriptor {
  readonly apiKey: number
  /** Kafka's name without the Request/Response suffix, e.g. 'Produce'. */
  readonly name: string
  readonly minVersion: number
  readonly maxVersion: number
  /** True when Kafka marks the highest version as unstable (latestVersionUnstable). */
  readonly latestVersionUnstable: boolean
  /** The first flexible version (compact encodings, tagged fields), or null if none is. */
  readonly flexibleMinVersion: number | null
  /** Deprecated versions as an inclusive range, or null. */
  readonly deprecatedVersions: { readonly min: number; readonly max: number } | null
  /** Kafka's listener types that serve the API: zkBroker, broker, controller. */
  readonly listeners: readonly string[]
  /**
   * The API's codecs, which need it loaded first (loadApiCodec; the EAGER_APIS of
   * scripts/gen-protocol.mjs always are): on an API not loaded yet they throw InvariantError.
   */
  decodeRequest(r: Reader, version: number): unknown
  encodeRequest(w: Writer, version: number, m: unknown): void
  decodeResponse(r: Reader, version: number): unknown
  encodeResponse(w: Writer, version: number, m: unknown): void
  defaultRequest(): unknown
  defaultResponse(): unknown
  /** RequestHeader version for this API version: 2 if flexible else 1 (ControlledShutdown v0: 0). */
  requestHeaderVersion(version: number): number
  /** ResponseHeader version: 1 if flexible else 0 (ApiVersions: always 0). */
  responseHeaderVersion(version: number): number
}

${apiKeyObj}/** The request message type for each API key. */
${reqMap}/** The response message type for each API key. */
${resMap}export const apis: ReadonlyMap<number, ApiDescriptor> = new Map<number, ApiDescriptor>([
${entries}])

/** Codecs loaded so far, by API key; the hot APIs' load with this module. */
const loadedCodecs = new Map<number, ApiCodec>([
${eagerCodecs}])

/** The other APIs' codecs: each is a file of the bundle of its own, compiled on its first use. */
const codecLoaders: ReadonlyMap<number, () => Promise<ApiCodec>> = new Map<number, () => Promise<ApiCodec>>([
${loaders}])

const loadingCodecs = new Map<number, Promise<ApiCodec>>()

/** The API's codec if it is loaded, else undefined (then loadApiCodec). */
export function apiCodec(apiKey: number): ApiCodec | undefined {
  return loadedCodecs.get(apiKey)
}

/** The API's codec, which the caller loaded before: a missing one is a bug. */
export function requireApiCodec(apiKey: number): ApiCodec {
  const codec = loadedCodecs.get(apiKey)
  assert(codec, () => \`codec of api key \${apiKey} used before loadApiCodec(\${apiKey})\`)
  return codec
}

/** Loads the API's codec (once; later calls get the same promise or the loaded codec). */
export function loadApiCodec(apiKey: number): Promise<ApiCodec> {
  const loaded = loadedCodecs.get(apiKey)
  if (loaded !== undefined) return Promise.resolve(loaded)
  let loading = loadingCodecs.get(apiKey)
  if (loading === undefined) {
    const loader = codecLoaders.get(apiKey)
    assert(loader, () => \`no codec for api key \${apiKey}\`)
    loading = loader().then((codec) => {
      loadedCodecs.set(apiKey, codec)
      return codec
    })
    // A failed load (a missing file) is tried again by the next caller, not cached.
    loading.catch(() => loadingCodecs.delete(apiKey))
    loadingCodecs.set(apiKey, loading)
  }
  return loading
}

/** Loads the codecs of the given APIs. */
export async function loadApiCodecs(apiKeys: Iterable<number>): Promise<void> {
  await Promise.all([...apiKeys].map(loadApiCodec))
}

/** Loads every API's codec: for clients, tools and tests that use many APIs. */
export function loadAllApiCodecs(): Promise<void> {
  return loadApiCodecs(apis.keys())
}
`
}

// ---------------------------------------------------------------- main

function main() {
  const messages = mergedSchemas(SCHEMA_DIR, NEW_SCHEMA_SUBDIR).map(loadMessage)
  const tsNames = new Map()
  for (const m of messages) {
    for (const s of [m.root, ...m.structs.values()]) {
      if (tsNames.has(s.tsName))
        fail(m.file, `type name ${s.tsName} also generated by ${tsNames.get(s.tsName)}`)
      tsNames.set(s.tsName, m.file)
    }
  }
  const outputs = new Map()
  outputs.set('common.ts', COMMON_FILE)
  const byApi = new Map()
  for (const m of messages.filter(isApiMessage)) {
    if (!byApi.has(m.apiKey)) byApi.set(m.apiKey, {})
    byApi.get(m.apiKey)[m.type] = m
  }
  for (const { request, response } of byApi.values()) {
    if (!request || !response)
      fail(`api key ${(request ?? response).apiKey}`, 'needs a request and a response')
    if (apiModuleOf(request) !== apiModuleOf(response)) fail(response.file, 'names its API differently')
    outputs.set(`${apiModuleOf(request)}.ts`, generateApiFile(request, response))
  }
  if (messages.some((m) => m.module === HEADERS_AND_DATA.module))
    fail(HEADERS_AND_DATA.module, 'a message module has this name')
  const headersAndData = generateCodeFile(
    `protocol-schemas/*.json (${HEADERS_AND_DATA.about})`,
    messages.filter((m) => !isApiMessage(m)),
    './',
  )
  // biome formats (and lints) no file over 1 MiB.
  if (headersAndData.length > GROUP_SOURCE_CHARS_MAX)
    fail(
      `${HEADERS_AND_DATA.module}.ts`,
      `${headersAndData.length} characters: split it (biome's limit is 1 MiB)`,
    )
  outputs.set(`${HEADERS_AND_DATA.module}.ts`, headersAndData)
  for (const m of messages) outputs.set(`${m.module}.ts`, generateMessageFile(m))
  outputs.set('index.ts', generateIndex(messages))
  outputs.set(
    'all.ts',
    `${LICENSE_NOTE('protocol-schemas/*.json (every name)')}` +
      '// Every generated name in one module, for tests and tools. tidelog itself imports the\n' +
      "// registry from index.js and an API's functions from the message's module, so that the\n" +
      '// bundle loads each API on first use.\n\n' +
      "export * from './index.js'\n" +
      [...new Set(messages.filter(isApiMessage).map(apiModuleOf))]
        .map((m) => `export * from './${m}.js'\n`)
        .join(''),
  )
  fs.mkdirSync(path.join(OUT_DIR, 'apis'), { recursive: true })
  for (const existing of fs.readdirSync(OUT_DIR, { recursive: true })) {
    const name = existing.split(path.sep).join('/')
    if (name.endsWith('.ts') && !outputs.has(name)) fs.rmSync(path.join(OUT_DIR, existing))
  }
  for (const [name, text] of outputs) fs.writeFileSync(path.join(OUT_DIR, name), text)
  console.log(
    `gen-protocol: ${messages.length} schemas, ${outputs.size} files in ${path.relative(ROOT, OUT_DIR)}`,
  )
}

try {
  main()
} catch (err) {
  if (err instanceof SchemaError || err instanceof MergeError) {
    console.error(`gen-protocol: ${err.message}`)
    process.exit(1)
  }
  throw err
}

// Merges two generations of Kafka's JSON message definitions into one per message, for
// scripts/gen-protocol.mjs: the newer files (Kafka 4.4, protocol-schemas/4.4/) define every
// version they list; the older files (Kafka 3.9, protocol-schemas/) add the lower versions
// that Kafka 4 removed (KIP-896) and tidelog still serves to old clients.
//
// For a message in both, the merged definition is the newer JSON with validVersions widened
// down to the older file's lowest version, and each field's version ranges (versions,
// nullableVersions, taggedVersions, flexibleVersions) taken from the older file below the
// newer file's lowest version ("the cut") and from the newer file at and above it. Fields
// only the older file has (they existed only in removed versions) are put back at their old
// position. Whatever the merge does, it then proves itself: at every version below the cut
// the merged message must have exactly the older file's wire layout, and at every version
// from the cut on exactly the newer file's. A merge that cannot keep both layouts fails
// generation instead of producing a codec that reads old versions wrongly.

import fs from 'node:fs'
import path from 'node:path'

const MAX_VERSION = 0x7fff

class MergeError extends Error {}

function fail(where, message) {
  throw new MergeError(`${where}: ${message}`)
}

function stripComments(text) {
  return text
    .split('\n')
    .filter((line) => !/^\s*\/\//.test(line))
    .join('\n')
}

function readJson(dir, file) {
  try {
    return JSON.parse(stripComments(fs.readFileSync(path.join(dir, file), 'utf8')))
  } catch (err) {
    return fail(file, `cannot parse: ${err.message}`)
  }
}

/** "none", "N", "N+", "A-B" -> {lo, hi} or null. */
function range(text, where) {
  if (text === undefined) return undefined
  const s = String(text).trim()
  if (s === 'none') return null
  let m = /^(\d+)\+$/.exec(s)
  if (m) return { lo: Number(m[1]), hi: MAX_VERSION }
  m = /^(\d+)-(\d+)$/.exec(s)
  if (m) return { lo: Number(m[1]), hi: Number(m[2]) }
  m = /^(\d+)$/.exec(s)
  if (m) return { lo: Number(m[1]), hi: Number(m[1]) }
  return fail(where, `bad versions ${JSON.stringify(text)}`)
}

function text(r) {
  if (r === null) return 'none'
  if (r.hi === MAX_VERSION) return `${r.lo}+`
  return r.lo === r.hi ? `${r.lo}` : `${r.lo}-${r.hi}`
}

const has = (r, v) => r !== null && r !== undefined && v >= r.lo && v <= r.hi

function clip(r, lo, hi) {
  if (r === null || r === undefined) return null
  const a = Math.max(r.lo, lo)
  const b = Math.min(r.hi, hi)
  return a <= b ? { lo: a, hi: b } : null
}

/**
 * A field attribute's versions: the older file's below `cut`, the newer file's from `cut`.
 * The generator takes one contiguous range, so the two parts must meet.
 */
function joinRanges(oldText, newText, cut, where, key) {
  if (oldText === undefined && newText === undefined) return undefined
  const low = clip(range(oldText ?? 'none', where), 0, cut - 1)
  const high = clip(range(newText ?? 'none', where), cut, MAX_VERSION)
  if (low === null) return high === null && newText === undefined ? undefined : text(high)
  if (high === null) return text(low)
  if (low.hi !== cut - 1 || high.lo !== cut)
    fail(where, `${key}: ${oldText} and ${newText} do not meet at ${cut}`)
  return text({ lo: low.lo, hi: high.hi })
}

function mergeField(oldF, newF, cut, where) {
  where = `${where}.${newF.name}`
  const merged = { ...newF }
  merged.versions = joinRanges(oldF.versions, newF.versions, cut, where, 'versions')
  for (const key of ['nullableVersions', 'taggedVersions', 'flexibleVersions']) {
    const v = joinRanges(oldF[key], newF[key], cut, where, key)
    // "none" matters for flexibleVersions (absent means the message's); not for the others.
    if (v === undefined || (v === 'none' && key !== 'flexibleVersions')) delete merged[key]
    else merged[key] = v
  }
  if (merged.taggedVersions !== undefined && merged.tag === undefined) merged.tag = oldF.tag
  // Kafka 4 dropped "ignorable" where the versions that needed it went (RequestHeader's
  // ClientId, absent only from v0); the old versions still need it.
  if (oldF.ignorable === true) merged.ignorable = true
  if (oldF.fields !== undefined || newF.fields !== undefined) {
    merged.fields = mergeFields(oldF.fields ?? [], newF.fields ?? [], cut, where)
  }
  return merged
}

/** The newer fields in their order, with the older-only fields put back where they were. */
function mergeFields(oldFields, newFields, cut, where) {
  const newNames = new Set(newFields.map((f) => f.name))
  const out = []
  let next = 0
  const flushOldOnly = (until) => {
    for (; next < until; next++) {
      const f = oldFields[next]
      if (!newNames.has(f.name)) out.push(oldOnly(f, cut, `${where}.${f.name}`))
    }
  }
  for (const nf of newFields) {
    const oi = oldFields.findIndex((f) => f.name === nf.name)
    if (oi < 0) {
      out.push(nf)
      continue
    }
    if (oi >= next) {
      flushOldOnly(oi)
      next = oi + 1
    }
    out.push(mergeField(oldFields[oi], nf, cut, where))
  }
  flushOldOnly(oldFields.length)
  return out
}

/** A field only the older file has: it must live only in the versions below the cut. */
function oldOnly(f, cut, where) {
  const versions = range(f.versions ?? f.taggedVersions, where)
  if (versions !== null && versions.hi >= cut) {
    const clipped = clip(versions, 0, cut - 1)
    if (clipped === null) return { ...f, versions: 'none' }
    return { ...f, versions: text(clipped) }
  }
  return f
}

function mergeCommonStructs(oldStructs, newStructs, cut, where) {
  const out = []
  const newNames = new Set(newStructs.map((s) => s.name))
  for (const ns of newStructs) {
    const os = oldStructs.find((s) => s.name === ns.name)
    out.push(os ? { ...ns, fields: mergeFields(os.fields, ns.fields, cut, `${where}.${ns.name}`) } : ns)
  }
  for (const os of oldStructs) if (!newNames.has(os.name)) out.push(os)
  return out
}

// ---------------------------------------------------------------- proof

/** What goes on the wire at version v: every field present, its type, nullability, tag. */
function layout(json, v) {
  const commons = new Map((json.commonStructs ?? []).map((s) => [s.name, s]))
  const flexible = has(range(json.flexibleVersions ?? 'none', json.name), v)
  const walk = (fields, depth) => {
    if (depth > 20) return 'recursive'
    const out = []
    for (const f of fields) {
      const versions = range(f.versions ?? f.taggedVersions, f.name)
      if (!has(versions, v)) continue
      const elem = f.type.replace(/^\[\]/, '')
      let children = null
      if (/^[A-Z]/.test(elem)) {
        const fs2 = f.fields ?? commons.get(elem)?.fields
        children = fs2 ? walk(fs2, depth + 1) : 'missing'
      }
      out.push({
        name: f.name,
        type: f.type,
        nullable: has(range(f.nullableVersions ?? 'none', f.name), v),
        tag: has(range(f.taggedVersions ?? 'none', f.name), v) ? Number(f.tag) : null,
        compact: flexible && has(range(f.flexibleVersions ?? '0+', f.name), v),
        default: f.default ?? '',
        children,
      })
    }
    return out
  }
  return JSON.stringify({ flexible, fields: walk(json.fields, 0) })
}

function prove(merged, oldJson, newJson, cut, where) {
  const valid = range(merged.validVersions, where)
  for (let v = valid.lo; v <= valid.hi; v++) {
    const source = v >= cut ? newJson : oldJson
    if (layout(merged, v) !== layout(source, v)) {
      fail(where, `merged layout at version ${v} differs from ${v >= cut ? 'the newer' : 'the older'} file's`)
    }
  }
}

// ---------------------------------------------------------------- messages

function merge(oldJson, newJson, oldUnstable, where) {
  const oldValid = range(oldJson.validVersions, where)
  const newValid = range(newJson.validVersions, where)
  // An unstable latest version (Kafka's early-access share-group v0) is not kept.
  const oldHi = oldUnstable ? oldValid.hi - 1 : oldValid.hi
  const cut = newValid.lo
  const carried = clip(oldValid, 0, Math.min(oldHi, cut - 1))
  if (carried === null) return { json: newJson, carried: null }
  if (carried.hi !== cut - 1) fail(where, `versions ${text(carried)} and ${text(newValid)} leave a gap`)
  const merged = {
    ...newJson,
    validVersions: text({ lo: carried.lo, hi: newValid.hi }),
    fields: mergeFields(oldJson.fields, newJson.fields, cut, where),
  }
  if (oldJson.commonStructs || newJson.commonStructs) {
    merged.commonStructs = mergeCommonStructs(
      oldJson.commonStructs ?? [],
      newJson.commonStructs ?? [],
      cut,
      where,
    )
  }
  // The versions Kafka removed are the deprecated ones: tidelog serves them for old clients.
  const newDeprecated = range(newJson.deprecatedVersions ?? 'none', where)
  merged.deprecatedVersions = text({ lo: carried.lo, hi: newDeprecated ? newDeprecated.hi : cut - 1 })
  if (newDeprecated && newDeprecated.lo !== cut) fail(where, 'deprecated versions do not meet')
  prove(merged, oldJson, newJson, cut, where)
  return { json: merged, carried }
}

const identity = (json) =>
  json.type === 'request' || json.type === 'response' ? `${json.type}:${json.apiKey}` : json.name

/**
 * Every message, merged: [{ file, json, sources }] where file names the newer file when
 * there is one (e.g. "4.4/FetchRequest.json"), and sources says where each version range
 * comes from, for the generated files' headers.
 */
export function mergedSchemas(schemaDir, newSubdir) {
  const newDir = path.join(schemaDir, newSubdir)
  const jsonFiles = (dir) =>
    fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.json'))
      .sort()
  const olds = new Map(jsonFiles(schemaDir).map((f) => [f, readJson(schemaDir, f)]))
  const oldById = new Map([...olds].map(([f, j]) => [identity(j), f]))
  const out = []
  const used = new Set()
  for (const file of jsonFiles(newDir)) {
    const newJson = readJson(newDir, file)
    const oldFile = oldById.get(identity(newJson))
    const newFile = `${newSubdir}/${file}`
    if (range(newJson.validVersions, newFile) === null) continue // removed: the older file stays
    if (oldFile === undefined) {
      out.push({ file: newFile, json: newJson, sources: newFile })
      continue
    }
    used.add(oldFile)
    // Only requests carry latestVersionUnstable; a response follows its request.
    const oldRequest = olds.get(oldById.get(`request:${newJson.apiKey}`) ?? oldFile)
    const oldUnstable = oldRequest?.latestVersionUnstable === true
    const { json, carried } = merge(olds.get(oldFile), newJson, oldUnstable, newFile)
    const sources = carried === null ? newFile : `${newFile}, versions ${text(carried)} from ${oldFile}`
    out.push({ file: newFile, json, sources })
  }
  for (const [file, json] of olds) {
    if (!used.has(file)) out.push({ file, json, sources: file })
  }
  return out.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0))
}

export { MergeError }

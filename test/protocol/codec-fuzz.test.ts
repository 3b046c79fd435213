/**
 * Hostile input for every generated decoder at every version: random bytes, and single-byte
 * mutations and truncations of valid encodings. A decoder either returns a message or throws
 * ProtocolDecodeError (which closes only that connection); never a RangeError or TypeError, and
 * never an allocation sized by an unchecked length.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import fc from 'fast-check'
import { ProtocolDecodeError } from '../../src/common/errors.js'
import * as gen from '../../src/protocol/generated/all.js'
import { loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { Reader, Writer } from '../../src/protocol/primitives.js'
import { loadMergedSchemas } from '../helpers/protocol-schemas.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

interface FieldJson {
  name: string
  type: string
  versions?: string
  taggedVersions?: string
  nullableVersions?: string
  fields?: FieldJson[]
}
interface MessageJson {
  name: string
  validVersions: string
  flexibleVersions: string
  fields: FieldJson[]
  commonStructs?: { name: string; fields: FieldJson[] }[]
}
interface Target {
  name: string
  json: MessageJson
  structs: Map<string, FieldJson[]>
  versions: number[]
  flexible: number
}

type Fn = (...args: unknown[]) => unknown
const genFns = gen as unknown as Record<string, Fn>

const MERGED_SCHEMAS = await loadMergedSchemas()

function loadTargets(): Target[] {
  return MERGED_SCHEMAS.map(({ json: merged }) => {
    const json = merged as MessageJson
    const structs = new Map<string, FieldJson[]>()
    const walk = (fields: FieldJson[]): void => {
      for (const f of fields) {
        if (f.fields) {
          structs.set(f.type.replace(/^\[\]/, ''), f.fields)
          walk(f.fields)
        }
      }
    }
    walk(json.fields)
    for (const cs of json.commonStructs ?? []) {
      structs.set(cs.name, cs.fields)
      walk(cs.fields)
    }
    const [lo, hi] = json.validVersions.split('-').map(Number)
    const versions: number[] = []
    for (let v = lo; v <= (hi ?? lo); v++) versions.push(v)
    const flexible =
      json.flexibleVersions === 'none' ? Number.POSITIVE_INFINITY : Number.parseInt(json.flexibleVersions, 10)
    return { name: json.name, json, structs, versions, flexible }
  })
}

const inVersions = (text: string | undefined, v: number): boolean => {
  if (text === undefined || text === 'none') return false
  if (text.endsWith('+')) return v >= Number(text.slice(0, -1))
  const [lo, hi] = text.split('-').map(Number)
  return v >= lo && v <= (hi ?? lo)
}

/** A populated valid message (arrays of one or two elements so nested decoders are reached). */
function populated(
  t: Target,
  structName: string | null,
  v: number,
  rand: () => number,
): Record<string, unknown> {
  const fields = structName === null ? t.json.fields : t.structs.get(structName)
  assert.ok(fields)
  const m = genFns[`default${t.name}${structName ?? ''}`]() as Record<string, unknown>
  const prim = (type: string): unknown => {
    const n = Math.floor(rand() * 1000)
    switch (type) {
      case 'bool':
        return n % 2 === 0
      case 'int64':
        return BigInt(n) - 500n
      case 'float64':
        return n / 7
      case 'uuid':
        return Buffer.alloc(16, n & 0xff).toString('base64url')
      case 'string':
        return 'x'.repeat(n % 5)
      case 'bytes':
      case 'records':
        return Buffer.alloc(n % 9, n & 0xff)
      case 'int8':
      case 'int16':
      case 'int32':
        return (n % 200) - 100
      default:
        return n % 200
    }
  }
  for (const f of fields) {
    if (!inVersions(f.versions ?? f.taggedVersions, v)) continue
    const key = f.name[0].toLowerCase() + f.name.slice(1)
    if (f.type.startsWith('[]')) {
      const elem = f.type.slice(2)
      const count = 1 + Math.floor(rand() * 2)
      m[key] = Array.from({ length: count }, () =>
        t.structs.has(elem) ? populated(t, elem, v, rand) : prim(elem),
      )
    } else if (t.structs.has(f.type)) {
      m[key] = populated(t, f.type, v, rand)
    } else {
      m[key] = prim(f.type)
    }
  }
  if (v >= t.flexible && rand() < 0.5)
    m._unknownTaggedFields = [{ tag: 100 + Math.floor(rand() * 50), data: Buffer.from([1, 2]) }]
  return m
}

function seeded(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (Math.imul(a, 1664525) + 1013904223) >>> 0
    return a / 4294967296
  }
}

/** Decodes and accepts only a result or a ProtocolDecodeError. */
function decodeSafely(t: Target, v: number, bytes: Buffer): void {
  const decode = genFns[`decode${t.name}`]
  try {
    decode(new Reader(bytes), v)
  } catch (err) {
    if (err instanceof ProtocolDecodeError) return
    assert.fail(
      `decode${t.name} v${v} threw ${(err as Error)?.name}: ${(err as Error)?.message} on ${bytes.toString('hex')}`,
    )
  }
}

const targets = loadTargets()

describe('decoders on hostile input', () => {
  test('random bytes: every message, every version', () => {
    for (const t of targets) {
      for (const v of t.versions) {
        fc.assert(
          fc.property(fc.uint8Array({ maxLength: 48 }), (bytes) => decodeSafely(t, v, Buffer.from(bytes))),
          { numRuns: 60, seed: 42 + v },
        )
      }
    }
  })

  test('single-byte mutations and truncations of valid encodings', () => {
    let cases = 0
    for (const t of targets) {
      for (const v of t.versions) {
        const w = new Writer()
        genFns[`encode${t.name}`](w, v, populated(t, null, v, seeded(v * 31 + t.name.length)))
        const valid = w.toBuffer()
        decodeSafely(t, v, valid)
        fc.assert(
          fc.property(fc.nat(), fc.integer({ min: 0, max: 255 }), fc.boolean(), (at, byte, truncate) => {
            if (valid.length === 0) return
            const i = at % valid.length
            const bytes = truncate ? valid.subarray(0, i) : Buffer.from(valid)
            if (!truncate) bytes[i] = byte
            cases++
            decodeSafely(t, v, bytes)
          }),
          { numRuns: 200, seed: 7 + v },
        )
        // Every truncation of a small encoding, exhaustively.
        if (valid.length <= 64)
          for (let i = 0; i < valid.length; i++) decodeSafely(t, v, valid.subarray(0, i))
      }
    }
    assert.ok(cases > 10000, `only ${cases} mutation cases ran`)
  })

  test('huge declared lengths are refused before any allocation', () => {
    // Metadata v1: topics array claiming 2^31-1 entries in a 4-byte frame.
    assert.throws(
      () => gen.decodeMetadataRequest(new Reader(Buffer.from('7fffffff', 'hex')), 1),
      ProtocolDecodeError,
    )
    // Metadata v9 (compact): varint 0xffffffff as the array length.
    assert.throws(
      () => gen.decodeMetadataRequest(new Reader(Buffer.from('ffffffff0f', 'hex')), 9),
      ProtocolDecodeError,
    )
    // ResponseHeader v1: 2^32-1 tagged fields declared.
    assert.throws(
      () => gen.decodeResponseHeader(new Reader(Buffer.from('00000001ffffffff0f', 'hex')), 1),
      ProtocolDecodeError,
    )
    // A string of 32767 bytes declared in a 2-byte frame.
    assert.throws(
      () => gen.decodeFindCoordinatorRequest(new Reader(Buffer.from('7fff', 'hex')), 0),
      ProtocolDecodeError,
    )
  })
})

/**
 * Generated Kafka codecs: a seeded round trip of every message at every version (driven by the
 * JSON schemas themselves, read here independently of the generator), hand-checked byte vectors,
 * golden bytes from kafkajs's own encoders, and the API registry.
 */
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { describe, test } from 'node:test'
import { ProtocolDecodeError } from '../../src/common/errors.js'
import { encodeRequestFrame } from '../../src/protocol/frame-encoder.js'
import * as gen from '../../src/protocol/generated/all.js'
import { Reader, Writer, ZERO_UUID } from '../../src/protocol/primitives.js'
import { loadMergedSchemas } from '../helpers/protocol-schemas.js'

// The tests below call the registry's codecs directly, which need them loaded.
await gen.loadAllApiCodecs()

// ---------------------------------------------------------------- schema reading (test side)

interface Versions {
  lo: number
  hi: number
}
interface FieldJson {
  name: string
  type: string
  versions?: string
  nullableVersions?: string
  taggedVersions?: string
  tag?: number | string
  fields?: FieldJson[]
}
interface MessageJson {
  name: string
  type: string
  apiKey?: number
  validVersions: string
  flexibleVersions: string
  fields: FieldJson[]
  commonStructs?: { name: string; fields: FieldJson[] }[]
}
interface Schema {
  file: string
  json: MessageJson
  valid: Versions
  flexible: Versions | null
  structs: Map<string, FieldJson[]>
}

const MERGED_SCHEMAS = await loadMergedSchemas()

function parseVersions(text: string | undefined): Versions | null {
  if (text === undefined || text === 'none') return null
  if (text.endsWith('+')) return { lo: Number(text.slice(0, -1)), hi: 0x7fff }
  const [lo, hi] = text.split('-')
  return { lo: Number(lo), hi: Number(hi ?? lo) }
}
const has = (vs: Versions | null, v: number): boolean => vs !== null && v >= vs.lo && v <= vs.hi

function loadSchemas(): Schema[] {
  return MERGED_SCHEMAS.map(({ file, json: merged }) => {
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
    const valid = parseVersions(json.validVersions)
    assert.ok(valid)
    return { file, json, valid, flexible: parseVersions(json.flexibleVersions), structs }
  })
}

// ---------------------------------------------------------------- seeded random messages

/** mulberry32: small, seeded, reproducible. */
function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

type Fn = (...args: unknown[]) => unknown
const genFns = gen as unknown as Record<string, Fn>
function fn(name: string): Fn {
  const f = genFns[name]
  assert.equal(typeof f, 'function', `generated function ${name} is missing`)
  return f
}

const camel = (s: string): string => s[0].toLowerCase() + s.slice(1)
const CHARS = ['a', 'b', 'Z', '0', '-', '.', '_', ' ', 'é', '日', '😀']

class Builder {
  constructor(
    readonly schema: Schema,
    readonly rand: () => number,
  ) {}

  int(n: number): number {
    return Math.floor(this.rand() * n)
  }
  bytes(max: number): Buffer {
    const b = Buffer.alloc(this.int(max + 1))
    for (let i = 0; i < b.length; i++) b[i] = this.int(256)
    return b
  }
  string(): string {
    let s = ''
    const n = this.int(7)
    for (let i = 0; i < n; i++) s += CHARS[this.int(CHARS.length)]
    return s
  }

  primitive(type: string): unknown {
    switch (type) {
      case 'bool':
        return this.rand() < 0.5
      case 'int8':
        return this.int(256) - 128
      case 'int16':
        return this.int(65536) - 32768
      case 'uint16':
        return this.int(65536)
      case 'int32':
        return this.int(2 ** 32) - 2 ** 31
      case 'uint32':
        return this.int(2 ** 32)
      case 'int64':
        return BigInt.asIntN(64, (BigInt(this.int(2 ** 32)) << 32n) | BigInt(this.int(2 ** 32)))
      case 'float64':
        return (this.rand() - 0.5) * 10 ** this.int(12) + 0.25
      case 'uuid':
        return this.rand() < 0.1 ? ZERO_UUID : randomUuid(this)
      case 'string':
        return this.string()
      case 'bytes':
      case 'records':
        return this.bytes(24)
      default:
        throw new Error(`not a primitive: ${type}`)
    }
  }

  value(f: FieldJson, v: number): unknown {
    const nullable = has(parseVersions(f.nullableVersions), v)
    if (nullable && this.rand() < 0.2) return null
    if (f.type.startsWith('[]')) {
      const elem = f.type.slice(2)
      const n = this.int(4)
      const out: unknown[] = []
      for (let i = 0; i < n; i++)
        out.push(this.schema.structs.has(elem) ? this.struct(elem, v) : this.primitive(elem))
      return out
    }
    if (this.schema.structs.has(f.type)) return this.struct(f.type, v)
    return this.primitive(f.type)
  }

  /** A struct (or the message when name is null) with random values for the fields present at v. */
  struct(name: string | null, v: number): Record<string, unknown> {
    const msgName = this.schema.json.name
    const fields = name === null ? this.schema.json.fields : this.schema.structs.get(name)
    assert.ok(fields)
    const m = fn(`default${msgName}${name ?? ''}`)() as Record<string, unknown>
    for (const f of fields) {
      if (has(parseVersions(f.versions ?? f.taggedVersions), v)) m[camel(f.name)] = this.value(f, v)
    }
    if (has(this.schema.flexible, v) && this.rand() < 0.4) {
      const known = new Set(fields.filter((f) => f.tag !== undefined).map((f) => Number(f.tag)))
      const unknown: { tag: number; data: Buffer }[] = []
      for (let tag = this.int(3); unknown.length < 2; tag += 1 + this.int(200)) {
        if (!known.has(tag)) unknown.push({ tag, data: this.bytes(5) })
      }
      m._unknownTaggedFields = unknown
    }
    return m
  }
}

function randomUuid(b: Builder): string {
  const bytes = Buffer.alloc(16)
  for (let i = 0; i < 16; i++) bytes[i] = b.int(256)
  return bytes.toString('base64url')
}

function encode(name: string, v: number, m: unknown): Buffer {
  const w = new Writer(16)
  fn(`encode${name}`)(w, v, m)
  return w.toBuffer()
}

function decode(name: string, v: number, bytes: Buffer): unknown {
  const r = new Reader(bytes)
  const m = fn(`decode${name}`)(r, v)
  assert.equal(r.remaining, 0, `${name} v${v} left ${r.remaining} bytes unread`)
  return m
}

const schemas = loadSchemas()
const ROUNDS_PER_VERSION = 4

// ---------------------------------------------------------------- round trips

describe('every message round-trips at every version', () => {
  for (const schema of schemas) {
    const name = schema.json.name
    test(`${name} v${schema.valid.lo}-${schema.valid.hi}`, () => {
      for (let v = schema.valid.lo; v <= schema.valid.hi; v++) {
        // The default message must encode at every version, too.
        const d = fn(`default${name}`)()
        assert.deepStrictEqual(decode(name, v, encode(name, v, d)), d, `${name} v${v} default`)
        for (let round = 0; round < ROUNDS_PER_VERSION; round++) {
          const seed = (schema.file.length * 7919 + v * 104729 + round * 15485863) >>> 0
          const m = new Builder(schema, prng(seed)).struct(null, v)
          const bytes = encode(name, v, m)
          const back = decode(name, v, bytes)
          assert.deepStrictEqual(back, m, `${name} v${v} seed ${seed}`)
          assert.deepStrictEqual(
            encode(name, v, back),
            bytes,
            `${name} v${v} seed ${seed}: re-encode differs`,
          )
        }
      }
    })
  }
})

// ---------------------------------------------------------------- hand-checked bytes

const hex = (b: Buffer): string => b.toString('hex')

describe('hand-checked byte vectors', () => {
  test('ApiVersions v0 request has an empty body', () => {
    assert.equal(hex(encode('ApiVersionsRequest', 0, gen.defaultApiVersionsRequest())), '')
  })

  test('ApiVersions v3 request uses compact strings and a tag section', () => {
    // clusterId and nodeId (v5, KIP-1242) hold their defaults below v5.
    const m = { clientSoftwareName: 'ab', clientSoftwareVersion: '', clusterId: null, nodeId: -1 }
    assert.equal(hex(encode('ApiVersionsRequest', 3, m)), '03616201' + '00')
    assert.deepStrictEqual(gen.decodeApiVersionsRequest(new Reader(Buffer.from('0361620100', 'hex')), 3), m)
  })

  test('Metadata v0 request with one topic', () => {
    const m = {
      ...gen.defaultMetadataRequest(),
      topics: [{ ...gen.defaultMetadataRequestMetadataRequestTopic(), name: 'foo' }],
    }
    assert.equal(hex(encode('MetadataRequest', 0, m)), '00000001' + '0003666f6f')
  })

  test('Metadata v1 request with null topics (all topics) and v0 rejecting null', () => {
    const m = { ...gen.defaultMetadataRequest(), topics: null }
    assert.equal(hex(encode('MetadataRequest', 1, m)), 'ffffffff')
    assert.deepStrictEqual(
      gen.decodeMetadataRequest(new Reader(Buffer.from('ffffffff', 'hex')), 1).topics,
      null,
    )
    assert.throws(
      () => gen.decodeMetadataRequest(new Reader(Buffer.from('ffffffff', 'hex')), 0),
      ProtocolDecodeError,
    )
  })

  test('RequestHeader v0, v1 and v2 layouts', () => {
    const h = { requestApiKey: 3, requestApiVersion: 1, correlationId: 7, clientId: 'ab' as string | null }
    assert.equal(hex(encode('RequestHeader', 1, h)), '0003' + '0001' + '00000007' + '00026162')
    // v2 keeps the classic (non-compact) client id, then adds the tag section.
    assert.equal(hex(encode('RequestHeader', 2, h)), '0003000100000007000261620' + '0')
    assert.equal(hex(encode('RequestHeader', 1, { ...h, clientId: null })), '0003000100000007ffff')
    // v0 has no client id; it is ignorable, so a set one is dropped and decodes as the default ''.
    assert.equal(hex(encode('RequestHeader', 0, h)), '0003000100000007')
    assert.deepStrictEqual(gen.decodeRequestHeader(new Reader(Buffer.from('0003000100000007', 'hex')), 0), {
      ...h,
      clientId: '',
    })
  })

  test('ResponseHeader v1 keeps an unknown tagged field and writes it back', () => {
    const bytes = Buffer.from('00000001' + '01' + '05' + '02aabb', 'hex')
    const h = gen.decodeResponseHeader(new Reader(bytes), 1)
    assert.deepStrictEqual(h, {
      correlationId: 1,
      _unknownTaggedFields: [{ tag: 5, data: Buffer.from('aabb', 'hex') }],
    })
    assert.equal(hex(encode('ResponseHeader', 1, h)), hex(bytes))
    assert.equal(hex(encode('ResponseHeader', 0, { correlationId: 1 })), '00000001')
    assert.throws(() => encode('ResponseHeader', 0, h), gen.UnsupportedVersionError)
  })

  test('known tagged fields are written only when not default, in tag order with unknown ones', () => {
    const m = {
      ...gen.defaultApiVersionsResponse(),
      finalizedFeaturesEpoch: 5n,
      zkMigrationReady: true,
      // Tag 2 is known (FinalizedFeatures), so an unknown field uses 9.
      _unknownTaggedFields: [{ tag: 9, data: Buffer.from('ff', 'hex') }],
    }
    const expected =
      '0000' + // error code
      '01' + // compact array: no api keys
      '00000000' + // throttle time
      '03' + // three tagged fields
      '0108' +
      '0000000000000005' + // tag 1 FinalizedFeaturesEpoch, 8 bytes
      '0301' +
      '01' + // tag 3 ZkMigrationReady
      '0901' +
      'ff' // unknown tag 9
    assert.equal(hex(encode('ApiVersionsResponse', 3, m)), expected)
    assert.deepStrictEqual(gen.decodeApiVersionsResponse(new Reader(Buffer.from(expected, 'hex')), 3), m)
    assert.equal(
      hex(encode('ApiVersionsResponse', 3, gen.defaultApiVersionsResponse())),
      '00000100000000' + '00',
    )
  })

  test('a known tagged field is read from its own size-bounded slice', () => {
    // Fetch v12 request: ClusterId (tag 0, compact nullable string) = 'x'.
    const m = { ...gen.defaultFetchRequest(), clusterId: 'x' }
    const bytes = encode('FetchRequest', 12, m)
    assert.equal(hex(bytes.subarray(bytes.length - 5)), '01' + '0002' + '0278')
    assert.deepStrictEqual(decode('FetchRequest', 12, bytes), m)
  })

  test('writing a non-default non-ignorable field at a version without it throws', () => {
    const m = { ...gen.defaultProduceRequest(), transactionalId: 'tx' }
    assert.throws(
      () => encode('ProduceRequest', 2, m),
      (err: Error) =>
        err instanceof gen.UnsupportedVersionError &&
        err.message === 'Attempted to write a non-default transactionalId at version 2',
    )
    assert.doesNotThrow(() => encode('ProduceRequest', 3, m))
    // MaxBytes is ignorable: silently dropped at v2.
    assert.doesNotThrow(() => encode('FetchRequest', 2, { ...gen.defaultFetchRequest(), maxBytes: 1 }))
  })

  test('records given as a list of buffers encode like one buffer', () => {
    const part = (n: number) => Buffer.alloc(n, n)
    const one = Buffer.concat([part(3), part(5000), part(7)])
    const withRecords = (records: gen.RecordsData) => ({
      ...gen.defaultProduceRequest(),
      topicData: [{ name: 't', partitionData: [{ index: 0, records }] }],
    })
    for (const v of [7, 9]) {
      const a = encode('ProduceRequest', v, withRecords(one))
      const b = encode('ProduceRequest', v, withRecords([part(3), part(5000), part(7)]))
      assert.deepStrictEqual(a, b)
    }
  })

  test('decoded bytes are views of the input, not copies', () => {
    const m = { ...gen.defaultSaslAuthenticateRequest(), authBytes: Buffer.from('hello') }
    const bytes = encode('SaslAuthenticateRequest', 1, m)
    const back = gen.decodeSaslAuthenticateRequest(new Reader(bytes), 1)
    assert.equal(back.authBytes.buffer, bytes.buffer)
  })
})

// ---------------------------------------------------------------- kafkajs golden bytes

describe('golden bytes from kafkajs 2.2.4 encoders', () => {
  const require = createRequire(import.meta.url)
  // biome-ignore lint/suspicious/noExplicitAny: kafkajs internals are untyped CommonJS
  const kjs = (p: string): any => require(`kafkajs/src/protocol/${p}`)
  const frame = async (request: unknown): Promise<Buffer> =>
    (await kjs('request')({ correlationId: 42, clientId: 'tidelog-test', request })).buffer

  /** Our frame (int32 size, RequestHeader, body), as every tidelog client writes it. */
  function ours(apiKey: number, version: number, body: unknown): Buffer {
    return Buffer.concat(encodeRequestFrame(apiKey, version, 42, 'tidelog-test', body))
  }

  test('Metadata v4', async () => {
    const expected = await frame(
      kjs('requests/metadata/v4/request')({ topics: ['a', 'bc'], allowAutoTopicCreation: false }),
    )
    const body = {
      ...gen.defaultMetadataRequest(),
      topics: ['a', 'bc'].map((name) => ({ ...gen.defaultMetadataRequestMetadataRequestTopic(), name })),
      allowAutoTopicCreation: false,
    }
    assert.equal(hex(ours(gen.ApiKey.Metadata, 4, body)), hex(expected))
  })

  test('JoinGroup v5', async () => {
    const args = {
      groupId: 'g',
      sessionTimeout: 30000,
      rebalanceTimeout: 60000,
      memberId: '',
      groupInstanceId: null,
      protocolType: 'consumer',
      groupProtocols: [{ name: 'range', metadata: Buffer.from('0001', 'hex') }],
    }
    const expected = await frame(kjs('requests/joinGroup/v5/request')(args))
    const body = {
      ...gen.defaultJoinGroupRequest(),
      groupId: 'g',
      sessionTimeoutMs: 30000,
      rebalanceTimeoutMs: 60000,
      memberId: '',
      groupInstanceId: null,
      protocolType: 'consumer',
      protocols: [{ name: 'range', metadata: Buffer.from('0001', 'hex') }],
    }
    assert.equal(hex(ours(gen.ApiKey.JoinGroup, 5, body)), hex(expected))
  })

  test('AlterPartitionReassignments v0 (flexible: header v2 + compact body)', async () => {
    const topics = [{ topic: 'tp', partitionAssignment: [{ partition: 1, replicas: [1, 2, 3] }] }]
    const expected = await frame(
      kjs('requests/alterPartitionReassignments/v0/request')({ topics, timeout: 5000 }),
    )
    const body = {
      ...gen.defaultAlterPartitionReassignmentsRequest(),
      timeoutMs: 5000,
      topics: [{ name: 'tp', partitions: [{ partitionIndex: 1, replicas: [1, 2, 3] }] }],
    }
    assert.equal(hex(ours(gen.ApiKey.AlterPartitionReassignments, 0, body)), hex(expected))
  })
})

// ---------------------------------------------------------------- registry

describe('API registry', () => {
  test('covers every request schema with matching ranges', () => {
    const requests = schemas.filter((s) => s.json.type === 'request')
    assert.equal(gen.apis.size, requests.length)
    for (const s of requests) {
      const api = gen.apis.get(s.json.apiKey ?? -1)
      assert.ok(api, s.file)
      assert.equal(`${api.name}Request`, s.json.name)
      assert.equal(api.minVersion, s.valid.lo)
      assert.equal(api.maxVersion, s.valid.hi)
      assert.equal(api.flexibleMinVersion, s.flexible?.lo ?? null)
      assert.equal((gen.ApiKey as Record<string, number>)[api.name], api.apiKey)
    }
  })

  test('Produce descriptor and header versions', () => {
    const produce = gen.apis.get(gen.ApiKey.Produce)
    assert.ok(produce)
    assert.equal(gen.ApiKey.Produce, 0)
    assert.deepStrictEqual(
      [produce.name, produce.minVersion, produce.maxVersion, produce.flexibleMinVersion],
      ['Produce', 0, 13, 9],
    )
    // v0-2: the versions Kafka 4 removed (KIP-896), generated from the 3.9 definitions.
    assert.deepStrictEqual(produce.deprecatedVersions, { min: 0, max: 2 })
    assert.equal(produce.requestHeaderVersion(8), 1)
    assert.equal(produce.requestHeaderVersion(9), 2)
    assert.equal(produce.responseHeaderVersion(8), 0)
    assert.equal(produce.responseHeaderVersion(9), 1)
    assert.deepStrictEqual(produce.defaultRequest(), gen.defaultProduceRequest())
  })

  test("Kafka's header exceptions: ControlledShutdown v0 and ApiVersions responses", () => {
    const cs = gen.apis.get(gen.ApiKey.ControlledShutdown)
    assert.ok(cs)
    assert.deepStrictEqual(
      [0, 1, 2, 3].map((v) => cs.requestHeaderVersion(v)),
      [0, 1, 1, 2],
    )
    const av = gen.apis.get(gen.ApiKey.ApiVersions)
    assert.ok(av)
    assert.deepStrictEqual(
      [0, 3, 4].map((v) => av.requestHeaderVersion(v)),
      [1, 2, 2],
    )
    assert.deepStrictEqual(
      [0, 3, 4].map((v) => av.responseHeaderVersion(v)),
      [0, 0, 0],
    )
  })

  test('untyped codecs round-trip through the descriptor', () => {
    const api = gen.apis.get(gen.ApiKey.Fetch)
    assert.ok(api)
    const w = new Writer()
    const m = api.defaultResponse()
    api.encodeResponse(w, 16, m)
    assert.deepStrictEqual(api.decodeResponse(new Reader(w.toBuffer()), 16), m)
  })
})

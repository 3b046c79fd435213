/**
 * Compatibility levels per schema format, each with schemas that pass and fail it: Avro by
 * its resolution rules (avsc), JSON Schema and Protobuf by the subset of Confluent's rules
 * documented in src/schema-registry/formats/.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { checkCompatibility } from '../../src/schema-registry/compatibility.js'
import { avroFormat } from '../../src/schema-registry/formats/avro.js'
import { jsonSchemaFormat } from '../../src/schema-registry/formats/json-schema.js'
import { protobufFormat } from '../../src/schema-registry/formats/protobuf.js'
import type { CompatibilityLevel, SchemaFormat } from '../../src/schema-registry/types.js'

function compatible(
  format: SchemaFormat,
  level: CompatibilityLevel,
  previous: unknown[],
  candidate: unknown,
): boolean {
  const text = (s: unknown) => (typeof s === 'string' ? s : JSON.stringify(s))
  const parsed = previous.map((s, i) => ({ version: i + 1, schema: format.parse(text(s), [], false) }))
  return checkCompatibility(format, level, format.parse(text(candidate), [], false), parsed).length === 0
}

const record = (...fields: object[]) => ({ type: 'record', name: 'User', namespace: 'acme', fields })
const name = { name: 'name', type: 'string' }
const ageWithDefault = { name: 'age', type: 'int', default: 0 }
const ageNoDefault = { name: 'age', type: 'int' }
const email = { name: 'email', type: 'string' }

describe('Avro', () => {
  test('BACKWARD: a field added with a default passes, without one fails', () => {
    assert.ok(compatible(avroFormat, 'BACKWARD', [record(name)], record(name, ageWithDefault)))
    assert.ok(!compatible(avroFormat, 'BACKWARD', [record(name)], record(name, ageNoDefault)))
  })

  test('BACKWARD: removing a field passes (the reader ignores it), FORWARD fails without a default', () => {
    assert.ok(compatible(avroFormat, 'BACKWARD', [record(name, ageNoDefault)], record(name)))
    assert.ok(!compatible(avroFormat, 'FORWARD', [record(name, ageNoDefault)], record(name)))
    assert.ok(compatible(avroFormat, 'FORWARD', [record(name, ageWithDefault)], record(name)))
  })

  test('FORWARD: adding a field without a default passes (old readers skip it)', () => {
    assert.ok(compatible(avroFormat, 'FORWARD', [record(name)], record(name, ageNoDefault)))
  })

  test('FULL: only fields with defaults may come and go', () => {
    assert.ok(compatible(avroFormat, 'FULL', [record(name)], record(name, ageWithDefault)))
    assert.ok(!compatible(avroFormat, 'FULL', [record(name)], record(name, ageNoDefault)))
  })

  test('type promotion int → long is backward but not forward compatible', () => {
    const asInt = record({ name: 'n', type: 'int' })
    const asLong = record({ name: 'n', type: 'long' })
    assert.ok(compatible(avroFormat, 'BACKWARD', [asInt], asLong))
    assert.ok(!compatible(avroFormat, 'FORWARD', [asInt], asLong))
    assert.ok(!compatible(avroFormat, 'BACKWARD', [record({ name: 'n', type: 'string' })], asInt))
  })

  test('_TRANSITIVE levels check every version, plain levels only the latest', () => {
    // v1 name; v2 name+age(default); v3 name+email (no default): v3 reads v2's data, not v1's.
    const history = [record(name, email), record(name, ageWithDefault)]
    const candidate = record(name, email)
    assert.ok(!compatible(avroFormat, 'BACKWARD', history, candidate))
    const history2 = [record(name), record(name, email)]
    const candidate2 = record(name, email, ageWithDefault)
    assert.ok(compatible(avroFormat, 'BACKWARD', history2, record(name, email)))
    assert.ok(compatible(avroFormat, 'BACKWARD', history2, candidate2))
    assert.ok(!compatible(avroFormat, 'BACKWARD_TRANSITIVE', history2, candidate2))
    assert.ok(compatible(avroFormat, 'FORWARD', history2, candidate2))
    assert.ok(compatible(avroFormat, 'FORWARD_TRANSITIVE', history2, candidate2))
    assert.ok(!compatible(avroFormat, 'FULL_TRANSITIVE', history2, candidate2))
  })

  test('NONE accepts anything parseable', () => {
    assert.ok(compatible(avroFormat, 'NONE', [record(name)], '"string"'))
  })

  test('enum symbols: adding one is backward compatible only with a default', () => {
    const e = (symbols: string[], extra = {}) => ({ type: 'enum', name: 'Color', symbols, ...extra })
    assert.ok(compatible(avroFormat, 'BACKWARD', [e(['RED', 'BLUE'])], e(['RED', 'BLUE', 'GREEN'])))
    assert.ok(!compatible(avroFormat, 'BACKWARD', [e(['RED', 'BLUE'])], e(['RED'])))
    assert.ok(compatible(avroFormat, 'BACKWARD', [e(['RED', 'BLUE'])], e(['RED', 'X'], { default: 'X' })))
  })

  test('a malformed schema is refused with what is wrong', () => {
    assert.throws(() => avroFormat.parse('{"type": "record", "name": "X"}', [], false), /fields/)
    assert.throws(() => avroFormat.parse('{not json', [], false), /not valid JSON/)
  })
})

describe('JSON Schema', () => {
  const obj = (properties: object, extra: object = {}) => ({ type: 'object', properties, ...extra })
  const closed = (properties: object, extra: object = {}) =>
    obj(properties, { additionalProperties: false, ...extra })

  test('BACKWARD: a property added to a closed model passes, to an open model fails', () => {
    assert.ok(
      compatible(
        jsonSchemaFormat,
        'BACKWARD',
        [closed({ a: { type: 'string' } })],
        closed({ a: { type: 'string' }, b: { type: 'number' } }),
      ),
    )
    assert.ok(
      !compatible(
        jsonSchemaFormat,
        'BACKWARD',
        [obj({ a: { type: 'string' } })],
        obj({ a: { type: 'string' }, b: { type: 'number' } }),
      ),
    )
  })

  test('BACKWARD: a property removed from an open model passes, from a closed model fails', () => {
    assert.ok(
      compatible(
        jsonSchemaFormat,
        'BACKWARD',
        [obj({ a: { type: 'string' }, b: {} })],
        obj({ a: { type: 'string' } }),
      ),
    )
    assert.ok(
      !compatible(
        jsonSchemaFormat,
        'BACKWARD',
        [closed({ a: { type: 'string' }, b: {} })],
        closed({ a: { type: 'string' } }),
      ),
    )
  })

  test('types: integer → number widens (BACKWARD), number → integer narrows', () => {
    assert.ok(compatible(jsonSchemaFormat, 'BACKWARD', [{ type: 'integer' }], { type: 'number' }))
    assert.ok(!compatible(jsonSchemaFormat, 'BACKWARD', [{ type: 'number' }], { type: 'integer' }))
    assert.ok(!compatible(jsonSchemaFormat, 'FORWARD', [{ type: 'integer' }], { type: 'number' }))
    assert.ok(!compatible(jsonSchemaFormat, 'BACKWARD', [{ type: 'string' }], { type: 'number' }))
  })

  test('required: added without a default fails BACKWARD, with a default passes', () => {
    const before = closed({ a: { type: 'string' }, b: { type: 'string' } })
    assert.ok(!compatible(jsonSchemaFormat, 'BACKWARD', [before], { ...before, required: ['b'] }))
    const withDefault = closed(
      { a: { type: 'string' }, b: { type: 'string', default: 'x' } },
      { required: ['b'] },
    )
    assert.ok(compatible(jsonSchemaFormat, 'BACKWARD', [before], withDefault))
  })

  test('FULL: bounds, enums and closing the model', () => {
    const s = (extra: object) => ({ type: 'string', ...extra })
    assert.ok(compatible(jsonSchemaFormat, 'FULL', [s({ maxLength: 5 })], s({ maxLength: 5 })))
    assert.ok(!compatible(jsonSchemaFormat, 'BACKWARD', [s({ maxLength: 10 })], s({ maxLength: 5 })))
    assert.ok(compatible(jsonSchemaFormat, 'BACKWARD', [s({ maxLength: 5 })], s({ maxLength: 10 })))
    assert.ok(!compatible(jsonSchemaFormat, 'FULL', [s({ maxLength: 5 })], s({ maxLength: 10 })))
    assert.ok(compatible(jsonSchemaFormat, 'BACKWARD', [s({ enum: ['a'] })], s({ enum: ['a', 'b'] })))
    assert.ok(!compatible(jsonSchemaFormat, 'BACKWARD', [s({ enum: ['a', 'b'] })], s({ enum: ['a'] })))
    assert.ok(!compatible(jsonSchemaFormat, 'BACKWARD', [obj({ a: {} })], closed({ a: {} })))
  })

  test('_TRANSITIVE: nested property types are checked against every version', () => {
    const v = (t: string) => closed({ n: { type: t } })
    assert.ok(compatible(jsonSchemaFormat, 'FORWARD', [v('number'), v('integer')], v('integer')))
    assert.ok(compatible(jsonSchemaFormat, 'BACKWARD', [v('string'), v('integer')], v('number')))
    assert.ok(!compatible(jsonSchemaFormat, 'BACKWARD_TRANSITIVE', [v('string'), v('integer')], v('number')))
    assert.ok(!compatible(jsonSchemaFormat, 'FORWARD_TRANSITIVE', [v('string'), v('integer')], v('integer')))
    assert.ok(!compatible(jsonSchemaFormat, 'FULL_TRANSITIVE', [v('integer'), v('integer')], v('number')))
  })

  test('a schema ajv does not compile is refused', () => {
    assert.throws(() => jsonSchemaFormat.parse('{"type": 12}', [], false))
    assert.throws(() => jsonSchemaFormat.parse('"just a string"', [], false), /not a JSON Schema/)
  })

  test('normalize sorts keys so key order does not make a new schema', () => {
    const a = jsonSchemaFormat.parse('{"type":"object","properties":{"b":{},"a":{}}}', [], true)
    const b = jsonSchemaFormat.parse('{"properties":{"a":{},"b":{}},"type":"object"}', [], true)
    assert.equal(a.canonical, b.canonical)
  })
})

describe('Protobuf', () => {
  const proto = (body: string, pkg = 'acme') => `syntax = "proto3";\npackage ${pkg};\n${body}`
  const v1 = proto('message User { string name = 1; int32 age = 2; }')

  test('BACKWARD and FORWARD: adding and removing plain fields passes', () => {
    const added = proto('message User { string name = 1; int32 age = 2; string email = 3; }')
    const removed = proto('message User { string name = 1; }')
    for (const level of ['BACKWARD', 'FORWARD', 'FULL_TRANSITIVE'] as const) {
      assert.ok(compatible(protobufFormat, level, [v1], added), level)
      assert.ok(compatible(protobufFormat, level, [v1], removed), level)
    }
  })

  test('a field type changed across scalar groups fails; within a group passes', () => {
    assert.ok(
      !compatible(
        protobufFormat,
        'BACKWARD',
        [v1],
        proto('message User { string name = 1; string age = 2; }'),
      ),
    )
    assert.ok(
      compatible(protobufFormat, 'BACKWARD', [v1], proto('message User { string name = 1; int64 age = 2; }')),
    )
    assert.ok(
      !compatible(
        protobufFormat,
        'FORWARD',
        [v1],
        proto('message User { bytes name = 1; Other age = 2; } message Other {}'),
      ),
    )
  })

  test('removing a message or changing the package fails BACKWARD', () => {
    const two = proto('message User { string name = 1; } message Order { int64 id = 1; }')
    assert.ok(!compatible(protobufFormat, 'BACKWARD', [two], proto('message User { string name = 1; }')))
    assert.ok(compatible(protobufFormat, 'BACKWARD', [proto('message User { string name = 1; }')], two))
    assert.ok(
      !compatible(
        protobufFormat,
        'BACKWARD',
        [v1],
        proto('message User { string name = 1; int32 age = 2; }', 'other'),
      ),
    )
  })

  test('moving several existing fields into a oneof fails; NONE accepts it', () => {
    const oneof = proto('message User { oneof who { string name = 1; int32 age = 2; } }')
    assert.ok(!compatible(protobufFormat, 'BACKWARD', [v1], oneof))
    assert.ok(compatible(protobufFormat, 'NONE', [v1], oneof))
  })

  test('an unresolvable type or a missing import is refused; well-known imports resolve', () => {
    assert.throws(() => protobufFormat.parse(proto('message A { Missing m = 1; }'), [], false))
    assert.throws(
      () => protobufFormat.parse(`syntax = "proto3"; import "other.proto"; message A {}`, [], false),
      /other\.proto/,
    )
    const ts = `syntax = "proto3"; import "google/protobuf/timestamp.proto"; message A { google.protobuf.Timestamp at = 1; }`
    assert.doesNotThrow(() => protobufFormat.parse(ts, [], false))
  })

  test('references provide imported files', () => {
    const other = {
      name: 'other.proto',
      schema: 'syntax = "proto3"; package o; message Other { int32 x = 1; }',
    }
    const main = 'syntax = "proto3"; package m; import "other.proto"; message A { o.Other other = 1; }'
    assert.doesNotThrow(() => protobufFormat.parse(main, [other], false))
  })
})

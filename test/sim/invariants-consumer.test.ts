/**
 * The simulator's checks on what tidelog's Consumer returns (src/sim/invariants-consumer.ts)
 * on hand-made records, apart from any seed's schedule: records in offset order, skipping
 * control records only, each equal to the record committed there (seen committed before or
 * after it was returned), and every acknowledged record read back at its offset. Each case
 * is a bug the checks must name: a record read twice, one skipped, one that differs from the
 * committed one, one never seen committed, an acknowledged record not read back.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import { ConsumerInvariants } from '../../src/sim/invariants-consumer.js'
import { Violation } from '../../src/sim/world-view.js'

const P = 0

function batch(baseOffset: number, values: string[], isControl = false): Buffer {
  return encodeRecordBatchSync({
    baseOffset,
    records: values.map((value) => ({ value: Buffer.from(value) })),
    defaultTimestamp: 0,
    isControl,
  })
}

function checks(): ConsumerInvariants {
  return new ConsumerInvariants(true)
}

describe('simulator consumer record checks', () => {
  it('records returned in order, before or after their batch is seen committed, across a control batch, pass', () => {
    const c = checks()
    c.onCommitted(P, batch(0, ['a', 'b']))
    c.onRecord(P, 0, 'a')
    c.onRecord(P, 1, 'b')
    // Offset 2 is a transaction marker the consumer skips; 3 is returned before it is seen committed.
    c.onRecord(P, 3, 'c')
    c.onCommitted(P, batch(2, ['marker'], true))
    c.onCommitted(P, batch(3, ['c']))
    c.onFinalPosition(P, 4)
    c.checkConsumedCommitted()
    c.checkAckedReadBack(P, 0, ['a', 'b'])
    c.checkAckedReadBack(P, 3, ['c'])
    assert.equal(c.recordsConsumed, 3)
  })

  it('a record returned again is a violation', () => {
    const c = checks()
    c.onRecord(P, 0, 'a')
    assert.throws(() => c.onRecord(P, 0, 'a'), Violation)
  })

  it('a skipped offset that holds a data record is a violation, whichever comes first', () => {
    const early = checks()
    early.onCommitted(P, batch(0, ['a', 'b']))
    assert.throws(() => early.onRecord(P, 1, 'b'), /skipped offset 0, which holds the committed record a/)
    const late = checks()
    late.onRecord(P, 1, 'b')
    assert.throws(() => late.onCommitted(P, batch(0, ['a', 'b'])), /skipped offset 0/)
  })

  it('a record that differs from the committed one, or a control record returned, is a violation', () => {
    const c = checks()
    c.onRecord(P, 0, 'x')
    assert.throws(() => c.onCommitted(P, batch(0, ['a'])), /returned x at offset 0, where a is committed/)
    const control = checks()
    control.onCommitted(P, batch(0, ['marker'], true))
    assert.throws(() => control.onRecord(P, 0, 'marker'), /returned the control record at offset 0/)
  })

  it('a record never seen committed, or an offset skipped up to the final position, fails the end check', () => {
    const c = checks()
    c.onRecord(P, 0, 'a')
    assert.throws(() => c.checkConsumedCommitted(), /returned a at offset 0, which was never seen committed/)
    const tail = checks()
    tail.onFinalPosition(P, 1)
    assert.throws(() => tail.checkConsumedCommitted(), /skipped offset 0, which was never seen committed/)
  })

  it('an acknowledged record the consumer did not return at its offset is a violation', () => {
    const c = checks()
    c.onRecord(P, 0, 'a')
    assert.throws(() => c.checkAckedReadBack(P, 0, ['a', 'b']), /acknowledged b \(p0 @1\) not read back/)
    assert.throws(() => c.checkAckedReadBack(P, 0, ['z']), /acknowledged z \(p0 @0\) not read back/)
  })
})

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { TidelogError } from '../../src/common/errors.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { KafkaError, toErrorCode } from '../../src/replication/kafka-error.js'

describe('KafkaError', () => {
  it('captures no stack trace (an outcome for a response, raised per partition) and leaves the limit as it was', () => {
    const limitBefore = Error.stackTraceLimit
    const error = new KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, 'not the leader of t-0')
    assert.equal(Error.stackTraceLimit, limitBefore)
    assert.doesNotMatch(error.stack ?? '', /\n\s+at /, 'no stack frames')
    assert.match(error.stack ?? '', /KafkaError: not the leader of t-0/)
    assert.ok(error instanceof TidelogError)
    assert.equal(error.code, `KAFKA_${ErrorCode.NOT_LEADER_OR_FOLLOWER}`)
    assert.equal(toErrorCode(error), ErrorCode.NOT_LEADER_OR_FOLLOWER)
    // Other errors keep theirs.
    assert.match(new TidelogError('X', 'y').stack ?? '', /\n\s+at /)
  })
})

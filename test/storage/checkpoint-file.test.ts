/**
 * Checkpoint lines are checked where they are read: an offset below Kafka's -1 or an epoch
 * past int32 is a malformed line (CheckpointFormatError for the file), never a cast value.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { epochEntryFormat, topicPartitionOffsetFormat } from '../../src/storage/checkpoint-file.js'

describe('checkpoint lines', () => {
  it('topic partition offset: -1 and up are offsets, below -1 the line is malformed', () => {
    assert.deepEqual(topicPartitionOffsetFormat.fromLine('t 0 42'), { topic: 't', partition: 0, offset: 42 })
    assert.deepEqual(topicPartitionOffsetFormat.fromLine('t 1 -1'), { topic: 't', partition: 1, offset: -1 })
    assert.equal(topicPartitionOffsetFormat.fromLine('t 0 -2'), undefined)
    assert.equal(topicPartitionOffsetFormat.fromLine('t 0 9007199254740993'), undefined, 'past 2^53')
  })

  it('epoch start offset: a negative value or an epoch past int32 is malformed', () => {
    assert.deepEqual(epochEntryFormat.fromLine('3 100'), { epoch: 3, startOffset: 100 })
    assert.equal(epochEntryFormat.fromLine('-1 100'), undefined)
    assert.equal(epochEntryFormat.fromLine('3 -1'), undefined)
    assert.equal(epochEntryFormat.fromLine('2147483648 0'), undefined)
    assert.deepEqual(epochEntryFormat.fromLine('2147483647 0'), { epoch: 2147483647, startOffset: 0 })
  })
})

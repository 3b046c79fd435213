import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ConfigError } from '../../src/common/errors.js'
import { TimestampType } from '../../src/protocol/batch-header.js'
import { DEFAULT_LOG_CONFIG, fromProperties, toProperties } from '../../src/storage/log-config.js'

describe('LogConfig', () => {
  it("has Kafka's defaults", () => {
    assert.equal(DEFAULT_LOG_CONFIG.segmentBytes, 1073741824)
    assert.equal(DEFAULT_LOG_CONFIG.segmentMs, 604800000)
    assert.equal(DEFAULT_LOG_CONFIG.segmentIndexBytes, 10485760)
    assert.equal(DEFAULT_LOG_CONFIG.indexIntervalBytes, 4096)
    assert.equal(DEFAULT_LOG_CONFIG.retentionMs, 604800000)
    assert.equal(DEFAULT_LOG_CONFIG.retentionBytes, Infinity)
    assert.equal(DEFAULT_LOG_CONFIG.flushMessages, Infinity)
    assert.equal(DEFAULT_LOG_CONFIG.flushMs, Infinity)
    assert.equal(DEFAULT_LOG_CONFIG.messageTimestampType, TimestampType.CreateTime)
    assert.equal(DEFAULT_LOG_CONFIG.maxMessageBytes, 1048588)
    assert.deepEqual(DEFAULT_LOG_CONFIG.cleanupPolicy, ['delete'])
  })

  it('maps Kafka property names, -1 and Long.MAX_VALUE', () => {
    const config = fromProperties({
      'segment.bytes': '1024',
      'retention.ms': '-1',
      'retention.bytes': 5000,
      'flush.messages': '9223372036854775807',
      'flush.ms': '1000',
      'message.timestamp.type': 'LogAppendTime',
      'cleanup.policy': 'compact,delete',
      'min.insync.replicas': '2',
    })
    assert.equal(config.segmentBytes, 1024)
    assert.equal(config.retentionMs, Infinity)
    assert.equal(config.retentionBytes, 5000)
    assert.equal(config.flushMessages, Infinity)
    assert.equal(config.flushMs, 1000)
    assert.equal(config.messageTimestampType, TimestampType.LogAppendTime)
    assert.deepEqual(config.cleanupPolicy, ['compact', 'delete'])
    assert.deepEqual(fromProperties(toProperties(config)), config)
  })

  it('throws ConfigError naming the key for bad values', () => {
    const bad: [string, string][] = [
      ['segment.bytes', '10'],
      ['segment.bytes', 'big'],
      ['segment.bytes', '4294967296'],
      ['retention.ms', '-2'],
      ['flush.messages', '0'],
      ['message.timestamp.type', 'Now'],
      ['cleanup.policy', 'shred'],
      ['index.interval.bytes', '1.5'],
    ]
    for (const [k, v] of bad) {
      assert.throws(
        () => fromProperties({ [k]: v }),
        (e) => e instanceof ConfigError && e.message.startsWith(k),
        `${k}=${v}`,
      )
    }
  })
})

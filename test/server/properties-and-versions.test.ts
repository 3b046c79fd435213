/**
 * Issue 18 item 6: server.properties is read with Java's Properties rules (escapes, line
 * continuations, `!` comments), and message.format.version takes Kafka 3.9's legal values,
 * the four-part legacy ones included.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { validateTopicConfigs } from '../../src/metadata/topic-config.js'
import { brokerConfigFromProperties, parseProperties } from '../../src/server/broker-config.js'

test('server.properties follows Java escaping: \\= \\: \\uXXXX, continuations, ! and # comments', () => {
  const text = [
    '# a comment',
    '! another comment',
    'listeners=PLAINTEXT\\://127.0.0.1\\:19092',
    'key\\=with\\:separators = value=with:separators',
    'unicode=caf\\u00e9',
    'log.dirs=/tmp/a,\\',
    '         /tmp/b',
    'spaced\\ key value with spaces',
    'colon.separated: 3',
    'lone.key',
    'crlf=1\r',
    'num.partitions=2',
    'num.partitions=4',
  ].join('\n')
  const properties = parseProperties(text)
  assert.deepEqual(Object.fromEntries(properties), {
    listeners: 'PLAINTEXT://127.0.0.1:19092',
    'key=with:separators': 'value=with:separators',
    unicode: 'café',
    'log.dirs': '/tmp/a,/tmp/b',
    'spaced key': 'value with spaces',
    'colon.separated': '3',
    'lone.key': '',
    crlf: '1',
    'num.partitions': '4',
  })
  const config = brokerConfigFromProperties(
    new Map([...properties].filter(([key]) => ['listeners', 'log.dirs', 'num.partitions'].includes(key))),
  )
  assert.equal(config.values.get('num.partitions'), 4)
  assert.deepEqual(config.values.get('log.dirs'), ['/tmp/a', '/tmp/b'])
  assert.equal(config.advertisedPort, 19092)
})

test('message.format.version takes Kafka 3.9 legal values, four-part legacy forms included', () => {
  for (const version of [
    '0.8.0',
    '0.9.0.1',
    '0.10.0',
    '0.10.0.0',
    '0.10.0-IV1',
    '0.11.0.2',
    '1.0',
    '2.8.1',
    '3.0-IV1',
    '3.9',
  ])
    assert.doesNotThrow(() => validateTopicConfigs({ 'message.format.version': version }), version)
  for (const version of ['0.7.0', '0.10.3', '3.0-IV9', '10.0', 'latest', ''])
    assert.throws(
      () => validateTopicConfigs({ 'message.format.version': version }),
      /is not a valid version/,
      JSON.stringify(version),
    )
})

/**
 * Listener and security properties: Kafka's validation of listener names, the protocol map
 * and the inter-broker listener; per-listener overrides; principal mapping rules; JAAS text.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ConfigError } from '../../src/common/errors.js'
import { parseJaasConfig } from '../../src/security/jaas.js'
import { NoMatchingRuleError, SslPrincipalMapper } from '../../src/security/principal.js'
import { listenerValue } from '../../src/security/security-config.js'
import { rfc2253 } from '../../src/security/tls.js'
import { brokerConfigFromProperties } from '../../src/server/broker-config.js'

const config = (props: Record<string, string>) => brokerConfigFromProperties(new Map(Object.entries(props)))

test('named listeners map to security protocols, advertised per name, inter-broker by name or protocol', () => {
  const c = config({
    listeners: 'CLIENT://0.0.0.0:9093,INTERNAL://127.0.0.1:9094',
    'advertised.listeners': 'CLIENT://kafka.example:9093,INTERNAL://127.0.0.1:9094',
    'listener.security.protocol.map': 'CLIENT:SASL_SSL,INTERNAL:SSL',
    'inter.broker.listener.name': 'internal',
    'listener.name.client.ssl.client.auth': 'required',
  })
  assert.deepEqual(
    c.listeners.advertised.map((e) => [e.listener, e.securityProtocol, e.host, e.port]),
    [
      ['CLIENT', 'SASL_SSL', 'kafka.example', 9093],
      ['INTERNAL', 'SSL', '127.0.0.1', 9094],
    ],
  )
  assert.equal(c.listeners.interBrokerListener, 'INTERNAL')
  assert.equal(listenerValue(c, 'CLIENT', 'ssl.client.auth'), 'required')
  assert.equal(listenerValue(c, 'INTERNAL', 'ssl.client.auth'), 'none')
  const byProtocol = config({ listeners: 'PLAINTEXT://:0,SSL://:0', 'security.inter.broker.protocol': 'SSL' })
  assert.equal(byProtocol.listeners.interBrokerListener, 'SSL')
})

test('bad listener configs fail with Kafka-like messages', () => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ listeners: 'CLIENT://:9092' }, /No security protocol defined for listener CLIENT/],
    [{ listeners: 'PLAINTEXT://:9092,PLAINTEXT://:9093' }, /different name/],
    [{ listeners: 'PLAINTEXT://:9092,SSL://:9092' }, /different port/],
    [
      { listeners: 'SSL://:9092' },
      /inter.broker.listener.name must be a listener name defined in advertised.listeners/,
    ],
    [
      {
        listeners: 'PLAINTEXT://:9092',
        'inter.broker.listener.name': 'PLAINTEXT',
        'security.inter.broker.protocol': 'PLAINTEXT',
      },
      /Only one of inter.broker.listener.name and security.inter.broker.protocol/,
    ],
    [
      { listeners: 'PLAINTEXT://:9092', 'advertised.listeners': 'SSL://h:9093' },
      /subset of the ones defined in listeners/,
    ],
    [
      { listeners: 'PLAINTEXT://:9092', 'listener.name.other.ssl.client.auth': 'none' },
      /no listener of that name/,
    ],
    [
      { listeners: 'PLAINTEXT://:9092', 'listener.name.plaintext.log.dirs': '/x' },
      /cannot be set per listener/,
    ],
    [
      { listeners: 'PLAINTEXT://:9092', 'listener.security.protocol.map': 'PLAINTEXT:TLS' },
      /unknown security protocol TLS/,
    ],
    [{ 'connections.max.reauth.ms': '-1' }, /connections.max.reauth.ms/],
  ]
  for (const [props, message] of cases)
    assert.throws(
      () => config(props),
      (e: Error) => e instanceof ConfigError && message.test(e.message),
    )
})

test('ssl.principal.mapping.rules: DEFAULT keeps the DN, RULE rewrites a whole match, no match refuses', () => {
  assert.equal(new SslPrincipalMapper('DEFAULT').nameOf('CN=alice,O=Org'), 'CN=alice,O=Org')
  const mapper = new SslPrincipalMapper('RULE:^CN=([a-zA-Z]+),OU=(.*),O=.*$/$1@$2/L, RULE:^CN=(.*?)$/$1/U')
  assert.equal(mapper.nameOf('CN=Alice,OU=Ops,O=Tide'), 'alice@ops')
  assert.equal(mapper.nameOf('CN=bob'), 'BOB')
  assert.throws(() => mapper.nameOf('O=nobody,C=NO'), NoMatchingRuleError)
  assert.throws(() => new SslPrincipalMapper('RULE:broken'), ConfigError)
  // node prints the subject first RDN first; RFC 2253 (Java's getName()) is last RDN first, escaped.
  assert.equal(rfc2253('C=NO\nO=Tide, Inc\nCN=alice'), 'CN=alice,O=Tide\\, Inc,C=NO')
})

test('JAAS text: module, flag and quoted or bare options; malformed text is a ConfigError', () => {
  const entry = parseJaasConfig(
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a b;c" user_x=y;',
    'p',
  )
  assert.equal(entry.loginModule, 'org.apache.kafka.common.security.plain.PlainLoginModule')
  assert.deepEqual(
    [...entry.options],
    [
      ['username', 'admin'],
      ['password', 'a b;c'],
      ['user_x', 'y'],
    ],
  )
  assert.throws(() => parseJaasConfig('Module required user="x"', 'p'), /must end with ';'/)
  assert.throws(() => parseJaasConfig('Module maybe;', 'p'), ConfigError)
})

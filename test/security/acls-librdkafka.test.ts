/**
 * ACLs seen by the Python clients and kcat over SASL_PLAINTEXT: kafka-python's
 * KafkaAdminClient (PLAIN, the super user) creates, describes and deletes ACLs (PREFIXED,
 * LITERAL DENY, a group); confluent-kafka (librdkafka) as a SCRAM-SHA-512 user produces and
 * consumes where allowed and meets TOPIC_AUTHORIZATION_FAILED / GROUP_AUTHORIZATION_FAILED
 * where not; kcat's metadata listing hides the topic the user may not describe. (The
 * Debian confluent-kafka 1.7 has no ACL admin calls, so kafka-python makes the ACLs.)
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { Cluster } from '../../src/server/cluster.js'
import { run } from '../helpers/cluster.js'
import { PYTHON } from '../helpers/compat-clients.js'
import { createTopic } from '../helpers/topics.js'
import { startAclBroker } from './acls-helpers.js'
import { createScramUser } from './helpers.js'

let cluster: Cluster
let bootstrap: string

before(async () => {
  // The PLAINTEXT listener's User:ANONYMOUS is a super user only so the test can add the
  // SCRAM user the way helpers.ts does; the clients under test use SASL_PLAINTEXT.
  cluster = await startAclBroker({
    listeners: 'SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0',
    'super.users': 'User:admin;User:ANONYMOUS',
  })
  bootstrap = cluster.brokers[0].listenerAddress('SASL_PLAINTEXT')
  await createScramUser(cluster, 'carol', 'carol-secret', ['SCRAM-SHA-512'])
  for (const topic of ['rd-allowed', 'rd-denied', 'other']) await createTopic(cluster, topic)
})

after(async () => {
  await cluster?.stop()
})

const KAFKA_PYTHON_ADMIN = `
import json, sys
from kafka.admin import (KafkaAdminClient, ACL, ACLFilter, ACLOperation, ACLPermissionType,
                         ACLResourcePatternType, ResourcePattern, ResourcePatternFilter, ResourceType)
spec = json.loads(sys.argv[1])
a = KafkaAdminClient(bootstrap_servers=spec['bootstrap'], security_protocol='SASL_PLAINTEXT',
                     sasl_mechanism='PLAIN', sasl_plain_username='admin', sasl_plain_password='admin-secret',
                     request_timeout_ms=10000)
def acl(op, perm, rtype, name, pattern):
    return ACL('User:carol', '*', op, perm, ResourcePattern(rtype, name, pattern))
out = {}
created = a.create_acls([
    acl(ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TOPIC, 'rd-', ACLResourcePatternType.PREFIXED),
    acl(ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.TOPIC, 'rd-', ACLResourcePatternType.PREFIXED),
    acl(ACLOperation.WRITE, ACLPermissionType.DENY, ResourceType.TOPIC, 'rd-denied', ACLResourcePatternType.LITERAL),
    acl(ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.GROUP, 'rd-group', ACLResourcePatternType.LITERAL),
    acl(ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.TOPIC, 'doomed', ACLResourcePatternType.LITERAL),
])
out['created'] = len(created['succeeded'])
out['createFailed'] = [str(e) for _, e in created['failed']]
found, error = a.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
    ResourcePatternFilter(ResourceType.TOPIC, 'rd-denied', ACLResourcePatternType.MATCH)))
out['describeError'] = getattr(error, '__name__', type(error).__name__)
out['matched'] = sorted('%s:%s:%s:%s' % (b.resource_pattern.pattern_type.name, b.resource_pattern.resource_name,
    b.operation.name, b.permission_type.name) for b in found)
deleted = a.delete_acls([ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
    ResourcePatternFilter(ResourceType.TOPIC, 'doomed', ACLResourcePatternType.LITERAL))])
out['deleted'] = [[b.resource_pattern.resource_name for b, _ in matches] for _, matches, _ in deleted]
a.close()
print(json.dumps(out))
`

const CONFLUENT_CLIENT = `
import json, sys, time
from confluent_kafka import Producer, Consumer
spec = json.loads(sys.argv[1])
conf = {'bootstrap.servers': spec['bootstrap'], 'security.protocol': 'SASL_PLAINTEXT',
        'sasl.mechanism': 'SCRAM-SHA-512', 'sasl.username': 'carol', 'sasl.password': 'carol-secret'}
def produce(topic):
    results = []
    p = Producer(dict(conf, **{'message.timeout.ms': 10000}))
    p.produce(topic, b'from carol', on_delivery=lambda err, msg: results.append(err.name() if err else 'OK'))
    p.flush(15)
    return results
def consume(group):
    c = Consumer(dict(conf, **{'group.id': group, 'auto.offset.reset': 'earliest'}))
    c.subscribe(['rd-allowed'])
    deadline = time.time() + 20
    try:
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                return m.error().name()
            return m.value().decode()
        return 'timeout'
    finally:
        c.close()
out = {'allowed': produce('rd-allowed'), 'denied': produce('rd-denied'), 'unlisted': produce('other')}
out['consumed'] = consume('rd-group')
out['otherGroup'] = consume('not-carols')
print(json.dumps(out))
`

test('kafka-python creates, describes (MATCH) and deletes ACLs', async () => {
  const result = await run(PYTHON, ['-c', KAFKA_PYTHON_ADMIN, JSON.stringify({ bootstrap })], {
    timeoutMs: 60_000,
  })
  assert.equal(result.code, 0, result.stderr)
  const out = JSON.parse(result.stdout.trim().split('\n').pop()!)
  assert.equal(out.created, 5, JSON.stringify(out))
  assert.deepEqual(out.createFailed, [])
  assert.equal(out.describeError, 'NoError')
  assert.deepEqual(out.matched, [
    'LITERAL:rd-denied:WRITE:DENY',
    'PREFIXED:rd-:READ:ALLOW',
    'PREFIXED:rd-:WRITE:ALLOW',
  ])
  assert.deepEqual(out.deleted, [['doomed']])
})

test('confluent-kafka with SCRAM: allowed produce and consume, DENY and missing ACLs refused', async () => {
  const result = await run(PYTHON, ['-c', CONFLUENT_CLIENT, JSON.stringify({ bootstrap })], {
    timeoutMs: 90_000,
  })
  assert.equal(result.code, 0, result.stderr)
  const out = JSON.parse(result.stdout.trim().split('\n').pop()!)
  assert.deepEqual(out.allowed, ['OK'])
  assert.deepEqual(out.denied, ['TOPIC_AUTHORIZATION_FAILED'])
  assert.deepEqual(out.unlisted, ['TOPIC_AUTHORIZATION_FAILED'])
  assert.equal(out.consumed, 'from carol')
  assert.equal(out.otherGroup, 'GROUP_AUTHORIZATION_FAILED')
})

test('kcat: metadata hides the topic carol may not describe; a denied produce fails', async () => {
  const common = [
    '-b',
    bootstrap,
    '-X',
    'security.protocol=SASL_PLAINTEXT',
    '-X',
    'sasl.mechanisms=SCRAM-SHA-512',
    '-X',
    'sasl.username=carol',
    '-X',
    'sasl.password=carol-secret',
  ]
  const listed = await run('kcat', [...common, '-L', '-J'], { timeoutMs: 20_000 })
  assert.equal(listed.code, 0, listed.stderr)
  const topics = (JSON.parse(listed.stdout) as { topics: { topic: string }[] }).topics
    .map((t) => t.topic)
    .sort()
  assert.deepEqual(topics, ['rd-allowed', 'rd-denied'])
  const denied = await run('kcat', [...common, '-P', '-t', 'rd-denied', '-X', 'message.timeout.ms=5000'], {
    input: 'refused\n',
    timeoutMs: 20_000,
  })
  assert.notEqual(denied.code, 0)
  assert.match(denied.stderr, /[Aa]uthoriz/)
})

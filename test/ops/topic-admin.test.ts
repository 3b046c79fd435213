/**
 * With tidelog.console.topic.admin.enable=true the console API creates and deletes topics
 * (through the Kafka protocol, like `tidelog topics`), and rejects bad bodies with a 4xx;
 * tidelog.request.log.slow.ms logs slow requests with their time split, rate-limited.
 */
import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { after, before, test } from 'node:test'
import { pino } from 'pino'
import { type Cluster, startCluster } from '../helpers/cluster.js'
import { recordErrorLine } from '../helpers/log-guard.js'
import { waitUntil } from '../replication/in-process-cluster.js'

const logLines: Record<string, unknown>[] = []
let cluster: Cluster
let base: string

before(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line) continue
        logLines.push(JSON.parse(line))
        // The test reads the slow-request lines itself; its error lines still go to the guard.
        recordErrorLine('topic-admin broker', line)
      }
      done()
    },
  })
  cluster = await startCluster({
    brokers: 1,
    port: 0,
    logger: pino({ level: 'warn' }, sink),
    properties: {
      'tidelog.http.listener': '127.0.0.1:0',
      'tidelog.console.topic.admin.enable': true,
      'tidelog.request.log.slow.ms': 0,
    },
  })
  base = cluster.brokers[0].httpUrl!
})

after(async () => {
  await cluster?.stop()
})

const post = (body: string, type = 'application/json') =>
  fetch(`${base}api/topics`, { method: 'POST', body, headers: { 'content-type': type } })

test('the console API creates and deletes a topic when topic admin is enabled', async () => {
  const created = await post(JSON.stringify({ name: 'console-made', partitions: 2, replicationFactor: 1 }))
  assert.equal(created.status, 200, await created.clone().text())
  const topics = (await (await fetch(`${base}api/topics`)).json()) as {
    name: string
    partitions: unknown[]
  }[]
  assert.equal(topics.find((t) => t.name === 'console-made')?.partitions.length, 2)
  const again = await post(JSON.stringify({ name: 'console-made' }))
  assert.equal(again.status, 400, 'TOPIC_ALREADY_EXISTS is the client’s error')
  assert.equal((await fetch(`${base}api/topics/console-made`, { method: 'DELETE' })).status, 200)
  await waitUntil('topic gone', 10000, async () => {
    const list = (await (await fetch(`${base}api/topics`)).json()) as { name: string }[]
    return !list.some((t) => t.name === 'console-made')
  })
})

test('bad topic bodies get 4xx', async () => {
  assert.equal((await post('{not json')).status, 400)
  assert.equal((await post('{}')).status, 400)
  assert.equal((await post('name=x', 'application/x-www-form-urlencoded')).status, 415)
  assert.equal((await post(JSON.stringify({ name: 'x'.repeat(70 * 1024) }))).status, 413)
  assert.equal((await post(JSON.stringify({ name: 'bad/name' }))).status, 400)
})

test('slow requests are logged with their time split, at most one line a second', async () => {
  await waitUntil('a slow-request line', 10000, () => logLines.some((l) => l.msg === 'slow request'))
  const slow = logLines.filter((l) => l.msg === 'slow request')
  const line = slow[0]
  for (const field of [
    'api',
    'apiVersion',
    'clientId',
    'remoteAddress',
    'totalMs',
    'queueMs',
    'localMs',
    'remoteMs',
    'sendMs',
  ])
    assert.ok(field in line, `${field} in the slow-request line`)
  const times = slow.map((l) => Number(l.time))
  for (let i = 1; i < times.length; i++)
    assert.ok(times[i] - times[i - 1] >= 990, 'rate-limited to one a second')
})

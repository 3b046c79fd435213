/**
 * The web console in headless Chromium (Debian's chromium driven by playwright-core)
 * against a running 3-broker cluster: the pages show its topics, partitions, a group's lag
 * and a partition's records; a stopped broker shows as offline within 5 s; any error in
 * the page's console or an uncaught exception fails the test. Screenshots are written to
 * $TIDELOG_TEST_ARTIFACTS (default: a tidelog-test-artifacts dir under the temp dir).
 */
import assert from 'node:assert/strict'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import type { Consumer } from 'kafkajs'
import { type BrowserContext, chromium, type Page } from 'playwright-core'
import { kafka } from '../helpers/cluster-clients.js'
import { ReplicationCluster, waitUntil } from '../replication/in-process-cluster.js'

const TOPIC = 'console-orders'
const PARTITIONS = 3
const GROUP = 'console-group'
const OFFLINE_WITHIN_MS = 5000
const ARTIFACTS = process.env['TIDELOG_TEST_ARTIFACTS'] ?? join(tmpdir(), 'tidelog-test-artifacts')

let cluster: ReplicationCluster
let context: BrowserContext
let page: Page
let userDataDir: string
const pageErrors: string[] = []
/** A member of GROUP, kept in the group but paused, so the group has a member and a lag. */
let member: Consumer | null = null
/** Lag per partition as kafkajs's admin computes it, once the group has committed. */
const expectedLag = new Map<number, number>()

before(async () => {
  await mkdir(ARTIFACTS, { recursive: true })
  cluster = await ReplicationCluster.start(3, {
    'tidelog.http.listener': '127.0.0.1:0',
    'offsets.topic.replication.factor': 3,
    'offsets.topic.num.partitions': 3,
    'group.initial.rebalance.delay.ms': 0,
    'auto.leader.rebalance.enable': false,
    'broker.session.timeout.ms': 3000,
  })
  await cluster.createTopic(TOPIC, PARTITIONS, 3)
  await seedRecordsAndGroup()
  userDataDir = await mkdtemp(join(tmpdir(), 'tidelog-chromium-'))
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
  page = context.pages()[0] ?? (await context.newPage())
  page.on('console', (message) => {
    if (message.type() === 'error') pageErrors.push(`console error: ${message.text()}`)
  })
  page.on('pageerror', (error) => pageErrors.push(`uncaught: ${error.message}`))
  page.on('requestfailed', (request) => pageErrors.push(`request failed: ${request.url()}`))
})

after(async () => {
  await member?.disconnect()
  await context?.close()
  await cluster?.close()
  if (userDataDir) await rm(userDataDir, { recursive: true, force: true })
})

async function seedRecordsAndGroup(): Promise<void> {
  const client = kafka(cluster.bootstrap)
  const producer = client.producer({ allowAutoTopicCreation: false })
  const admin = client.admin()
  await producer.connect()
  await admin.connect()
  try {
    const send = (count: number, from: number) =>
      producer.send({
        topic: TOPIC,
        acks: -1,
        messages: Array.from({ length: count }, (_, i) => ({
          partition: (from + i) % PARTITIONS,
          key: `order-${from + i}`,
          value: JSON.stringify({ order: from + i, item: 'tea' }),
          headers: { source: 'console-test' },
        })),
      })
    await send(30, 0)
    const consumer = client.consumer({ groupId: GROUP, maxWaitTimeInMs: 200 })
    member = consumer
    await consumer.connect()
    await consumer.subscribe({ topic: TOPIC, fromBeginning: true })
    let consumed = 0
    await consumer.run({
      autoCommitInterval: 100,
      eachMessage: async () => {
        consumed++
      },
    })
    await waitUntil('30 records consumed', 30000, () => consumed >= 30)
    await waitUntil('30 offsets committed', 30000, async () => {
      const [offsets] = await admin.fetchOffsets({ groupId: GROUP, topics: [TOPIC] })
      return offsets.partitions.reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0) === 30
    })
    consumer.pause([{ topic: TOPIC }])
    await send(12, 30)
    const [committed] = await admin.fetchOffsets({ groupId: GROUP, topics: [TOPIC] })
    const ends = await admin.fetchTopicOffsets(TOPIC)
    for (const c of committed.partitions) {
      const end = ends.find((e) => e.partition === c.partition)!
      expectedLag.set(c.partition, Math.max(0, Number(end.high) - Number(c.offset)))
    }
  } finally {
    await producer.disconnect()
    await admin.disconnect()
  }
}

async function screenshot(name: string): Promise<void> {
  const path = join(ARTIFACTS, `console-${name}.png`)
  await page.screenshot({ path, fullPage: true })
  process.stdout.write(`# screenshot: ${path}\n`)
}

function assertNoPageErrors(): void {
  assert.deepEqual(pageErrors, [], 'the page logged errors')
}

test('the overview shows the three brokers online, the controller and healthy partitions', async () => {
  await page.goto(`${cluster.broker(0).httpUrl}#overview`)
  for (let id = 0; id < 3; id++)
    await page.waitForSelector(`[data-broker="${id}"][data-status="online"]`, { timeout: 10000 })
  const partitions = await page.textContent('[data-card="partitions"] b')
  assert.ok(Number(partitions) >= PARTITIONS, `partitions card: ${partitions}`)
  assert.equal(await page.textContent('[data-card="offline-partitions"] b'), '0')
  // The rate charts draw once two samples exist.
  await page.waitForSelector('#chart-in polyline', { state: 'attached', timeout: 10000 })
  await screenshot('overview')
  assertNoPageErrors()
})

test('the topics page shows the topic, its partitions with leader, ISR and offsets', async () => {
  await page.goto(`${cluster.broker(0).httpUrl}#topics`)
  await page.waitForSelector(`[data-topic="${TOPIC}"] [data-partition="${PARTITIONS - 1}"]`, {
    timeout: 10000,
  })
  const rows = await page.$$eval(`[data-topic="${TOPIC}"] tbody tr`, (trs) =>
    trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')),
  )
  assert.equal(rows.length, PARTITIONS)
  let highWatermarks = 0
  for (const [partition, leader, replicas, isr, logStart, highWatermark] of rows) {
    const state = cluster.state(TOPIC, Number(partition))
    assert.equal(Number(leader), state.leader)
    assert.deepEqual(replicas.split(', ').map(Number).sort(), [...state.replicas].sort())
    assert.deepEqual(isr.split(', ').map(Number).sort(), [...state.isr].sort())
    assert.equal(logStart, '0')
    highWatermarks += Number(highWatermark)
  }
  assert.equal(highWatermarks, 42, 'every record produced is below a high watermark')
  await screenshot('topics')
  assertNoPageErrors()
})

test("the groups page shows the group's members and the lag kafkajs computes", async () => {
  await page.goto(`${cluster.broker(0).httpUrl}#groups`)
  await page.waitForSelector(`[data-group="${GROUP}"]`, { timeout: 10000 })
  for (const [partition, lag] of expectedLag) {
    const shown = await page.getAttribute(
      `[data-group="${GROUP}"] [data-lag-partition="${TOPIC}-${partition}"] [data-lag]`,
      'data-lag',
    )
    assert.equal(Number(shown), lag, `partition ${partition}`)
  }
  const members = await page.$$eval(`[data-group="${GROUP}"] [data-member]`, (rows) =>
    rows.map((row) => row.getAttribute('data-member')),
  )
  assert.equal(members.length, 1, 'the paused member is listed')
  const total = [...expectedLag.values()].reduce((a, b) => a + b, 0)
  assert.ok(total > 0)
  assert.equal(
    await page.getAttribute(`[data-group="${GROUP}"] [data-total-lag]`, 'data-total-lag'),
    String(total),
  )
  await screenshot('groups')
  assertNoPageErrors()
})

test('the message browser shows a partition from an offset as text, JSON and hex', async () => {
  await page.goto(`${cluster.broker(0).httpUrl}#messages`)
  await page.waitForSelector(`#browse-topic option[value="${TOPIC}"]`, { state: 'attached', timeout: 10000 })
  await page.selectOption('#browse-topic', TOPIC)
  await page.fill('#browse input[name="partition"]', '1')
  await page.fill('#browse input[name="from"]', '2')
  await page.click('#browse button[type="submit"]')
  await page
    .waitForSelector('#records [data-offset="2"]', { timeout: 10000 })
    .catch(async (error: Error) =>
      assert.fail(`${error.message}; page says: ${await page.textContent('#browse-info')}`),
    )
  const offsets = await page.$$eval('#records tbody tr', (trs) =>
    trs.map((tr) => tr.getAttribute('data-offset')),
  )
  assert.equal(offsets[0], '2', 'starts at the offset asked for')
  const firstValue = () => page.textContent('#records [data-offset="2"] td:nth-child(4)')
  const text = await firstValue()
  assert.match(text ?? '', /^\{"order":\d+,"item":"tea"\}$/)
  assert.match(
    (await page.textContent('#records [data-offset="2"] td:nth-child(5)')) ?? '',
    /^source=console-test$/,
  )
  await page.selectOption('#browse-format', 'json')
  assert.match((await firstValue()) ?? '', /^\{\n {2}"order": \d+,\n {2}"item": "tea"\n\}$/)
  await page.selectOption('#browse-format', 'hex')
  assert.match((await firstValue()) ?? '', /^7b 22 6f 72 64 65 72 22/)
  await screenshot('messages')
  assertNoPageErrors()
})

test('a stopped broker shows as offline within 5 s', async () => {
  await page.goto(`${cluster.broker(0).httpUrl}#overview`)
  await page.waitForSelector('[data-broker="2"][data-status="online"]', { timeout: 10000 })
  const startedMs = Date.now()
  const stopping = cluster.stopBroker(2)
  await page.waitForSelector('[data-broker="2"][data-status="offline"]', { timeout: OFFLINE_WITHIN_MS })
  const tookMs = Date.now() - startedMs
  await stopping
  assert.ok(tookMs <= OFFLINE_WITHIN_MS, `offline after ${tookMs} ms`)
  process.stdout.write(`# broker 2 shown offline ${tookMs} ms after its stop began\n`)
  await page.waitForSelector('[data-card="brokers"].bad', { timeout: 5000 })
  await screenshot('broker-offline')
  assertNoPageErrors()
})

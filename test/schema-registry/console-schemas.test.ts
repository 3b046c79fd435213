/**
 * The console's Schemas tab in headless Chromium: subjects with their versions, latest id
 * and type, and a subject's schema shown when picked; nothing logged as an error in the
 * page. The tab reads the registry only while shown. The message browser decodes records
 * in Confluent's wire format (Avro, JSON Schema, Protobuf, encoded by a real client).
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry'
import { Kafka, logLevel } from 'kafkajs'
import { chromium } from 'playwright-core'
import protobuf from 'protobufjs'
import { startCluster } from '../../src/testing/index.js'
import { guardedLogger } from '../helpers/log-guard.js'

const HEADERS = { 'Content-Type': 'application/vnd.schemaregistry.v1+json' }

test('the Schemas tab lists subjects and shows a schema', async () => {
  const cluster = await startCluster({
    brokers: 1,
    schemaRegistry: true,
    logger: guardedLogger('console-schemas'),
    properties: { 'tidelog.http.listener': '127.0.0.1:0' },
  })
  const userDataDir = await mkdtemp(join(tmpdir(), 'tidelog-chromium-'))
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
    ],
  })
  try {
    const register = async (subject: string, body: object) => {
      const response = await fetch(`${cluster.schemaRegistryUrl}/subjects/${subject}/versions`, {
        method: 'POST',
        headers: HEADERS,
        body: JSON.stringify(body),
      })
      assert.equal(response.status, 200)
    }
    const user = { type: 'record', name: 'User', fields: [{ name: 'name', type: 'string' }] }
    await register('users-value', { schema: JSON.stringify(user) })
    await register('users-value', {
      schema: JSON.stringify({ ...user, fields: [...user.fields, { name: 'age', type: 'int', default: 0 }] }),
    })
    await register('orders-value', { schemaType: 'JSON', schema: '{"type":"object"}' })
    const page = context.pages()[0] ?? (await context.newPage())
    const errors: string[] = []
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text())
    })
    page.on('pageerror', (e) => errors.push(e.message))
    await page.goto(`${cluster.broker(0).httpUrl}#schemas`)
    await page.locator('[data-subject-row="users-value"]').waitFor({ timeout: 15_000 })
    const row = (await page.locator('[data-subject-row="users-value"]').textContent()) ?? ''
    assert.match(row, /users-value/)
    assert.match(row, /AVRO/)
    assert.match((await page.locator('[data-subject-row="orders-value"]').textContent()) ?? '', /JSON/)
    await page.locator('[data-subject="users-value"]').click()
    await page.locator('#schema-title', { hasText: 'users-value v2' }).waitFor({ timeout: 5000 })
    assert.match((await page.locator('#schema-text').textContent()) ?? '', /"age"/)
    await page.locator('[aria-label="versions of users-value"]').selectOption('1')
    await page.locator('#schema-title', { hasText: 'users-value v1' }).waitFor({ timeout: 5000 })
    assert.doesNotMatch((await page.locator('#schema-text').textContent()) ?? '', /"age"/)

    // Records encoded by a real client, decoded by the broker for the message browser.
    const client = new SchemaRegistry({ host: cluster.schemaRegistryUrl })
    const avro = await client.getLatestSchemaId('users-value')
    const json = await client.getLatestSchemaId('orders-value')
    // Protobuf in Confluent's framing, made here: kafkajs's client writes no message indexes.
    const protoText =
      'syntax = "proto3";\npackage p;\nmessage A { int32 x = 1; }\nmessage B { string s = 1; }\n'
    const proto = await client.register(
      { type: SchemaType.PROTOBUF, schema: protoText },
      { subject: 'proto-value' },
    )
    const root = protobuf.parse(protoText).root
    const header = Buffer.alloc(5)
    header.writeInt32BE(proto.id, 1)
    const second = root.lookupType('p.B')
    // Message indexes [1] as zigzag varints: count 1 (2), index 1 (2).
    const protoRecord = Buffer.concat([
      header,
      Buffer.from([2, 2]),
      second.encode({ s: 'second message type' }).finish(),
    ])
    const firstRecord = Buffer.concat([
      header,
      Buffer.from([0]),
      root.lookupType('p.A').encode({ x: 7 }).finish(),
    ])
    await cluster.createTopic({ name: 'decoded', partitions: 1 })
    const producer = new Kafka({ brokers: [cluster.bootstrapServers], logLevel: logLevel.NOTHING }).producer()
    await producer.connect()
    await producer.send({
      topic: 'decoded',
      messages: [
        { value: await client.encode(avro, { name: 'ada', age: 36 }) },
        { value: await client.encode(json, { sku: 'a-1' }) },
        { value: protoRecord },
        { value: firstRecord },
        { value: 'plain text' },
      ],
    })
    await producer.disconnect()
    const page1 = (await (
      await fetch(`${cluster.broker(0).httpUrl}api/messages?topic=decoded&partition=0&decode=registry`)
    ).json()) as {
      records: { decoded: { schemaId?: number; schemaType?: string; value?: unknown; error?: string } }[]
    }
    const decoded = page1.records.map((r) => r.decoded)
    assert.deepEqual(decoded[0], { schemaId: avro, schemaType: 'AVRO', value: { name: 'ada', age: 36 } })
    assert.deepEqual(decoded[1], { schemaId: json, schemaType: 'JSON', value: { sku: 'a-1' } })
    assert.deepEqual(decoded[2], {
      schemaId: proto.id,
      schemaType: 'PROTOBUF',
      value: { s: 'second message type' },
    })
    assert.deepEqual(decoded[3], { schemaId: proto.id, schemaType: 'PROTOBUF', value: { x: 7 } })
    assert.match(decoded[4].error ?? '', /not in the schema registry wire format/)

    await page.goto(`${cluster.broker(0).httpUrl}#messages`)
    await page
      .locator('#browse-topic option[value="decoded"]')
      .waitFor({ state: 'attached', timeout: 15_000 })
    await page.locator('#browse-topic').selectOption('decoded')
    await page.locator('#browse-format').selectOption('registry')
    await page.locator('#browse button[type="submit"]').click()
    await page.locator('#records [data-offset="0"]', { hasText: '"ada"' }).waitFor({ timeout: 10_000 })
    assert.match(
      (await page.locator('#records [data-offset="0"]').textContent()) ?? '',
      /schema \d+ \(AVRO\)/,
    )
    assert.deepEqual(errors, [])
  } finally {
    await context.close()
    await cluster.stop()
    await rm(userDataDir, { recursive: true, force: true })
  }
})

/**
 * The console's Schemas tab in headless Chromium: subjects with their versions, latest id
 * and type, and a subject's schema shown when picked; nothing logged as an error in the
 * page. The tab reads the registry only while shown.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { chromium } from 'playwright-core'
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
    assert.deepEqual(errors, [])
  } finally {
    await context.close()
    await cluster.stop()
    await rm(userDataDir, { recursive: true, force: true })
  }
})

/**
 * `tidelog start` serves the schema registry on 8081, or on a free port when 8081 is taken
 * and the user did not choose it; `--schema-registry-port -1` turns it off. A broker process
 * killed with SIGKILL right after a registration and started again on its data keeps every
 * schema and hands out no id twice.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { freePort, spawnTidelog } from '../helpers/broker-process.js'

const HEADERS = { 'Content-Type': 'application/vnd.schemaregistry.v1+json' }

function listenOn(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve(server))
  })
}

async function register(url: string, subject: string, schema: string): Promise<number> {
  const response = await fetch(`${url}/subjects/${subject}/versions`, {
    method: 'POST',
    headers: HEADERS,
    body: JSON.stringify({ schema }),
  })
  const body = (await response.json()) as { id: number }
  assert.equal(response.status, 200, JSON.stringify(body))
  return body.id
}

test('tidelog start: the registry on a free port when 8081 is taken, kept across kill -9', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-registry-cli-'))
  // 8081 taken (here by the test, unless something else holds it already).
  const blocker = await listenOn(8081).catch(() => null)
  const args = ['start', '--port', String(await freePort()), '--http-port', '0', '--data-dir', dataDir]
  try {
    const first = spawnTidelog(args)
    let url: string
    let ids: number[]
    try {
      const { line } = await first.waitForLine(/schema registry: http:/, 20_000)
      url = /(http:\/\/\S+)/.exec(line)![1]
      assert.doesNotMatch(url, /:8081$/)
      ids = [await register(url, 'a-value', '"string"'), await register(url, 'b-value', '"int"')]
    } finally {
      first.child.kill('SIGKILL')
      await first.exited
    }
    const second = spawnTidelog(args)
    try {
      const { line } = await second.waitForLine(/schema registry: http:/, 20_000)
      const again = /(http:\/\/\S+)/.exec(line)![1]
      const subjects = await (await fetch(`${again}/subjects`)).json()
      assert.deepEqual(subjects, ['a-value', 'b-value'])
      const byId = (await (await fetch(`${again}/schemas/ids/${ids[1]}`)).json()) as { schema: string }
      assert.equal(byId.schema, '"int"')
      const next = await register(again, 'c-value', '"long"')
      assert.ok(next > Math.max(...ids), `id ${next} after ${ids}`)
    } finally {
      await second.terminate()
    }
    const off = spawnTidelog([...args, '--schema-registry-port', '-1'])
    try {
      await off.waitForLine(/bootstrap servers:/, 20_000)
      assert.ok(!off.lines.some((l) => l.includes('schema registry:')), off.lines.join('\n'))
    } finally {
      await off.terminate()
    }
  } finally {
    if (blocker) await new Promise((resolve) => blocker.close(resolve))
    await rm(dataDir, { recursive: true, force: true })
  }
})

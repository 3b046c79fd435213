/**
 * Two `tidelog broker` processes on etcd: a registry write sent to the broker that does not
 * lead `_schemas` partition 0 is forwarded over HTTP to the writer's registry (its URL is in
 * the writer's broker registration), so every broker accepts writes, ids stay unique and
 * both serve every schema.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { withEtcdCluster } from '../helpers/broker-process.js'

const HEADERS = { 'Content-Type': 'application/vnd.schemaregistry.v1+json' }

test('writes sent to either broker process land once, through the one writer', async () => {
  await withEtcdCluster(
    { brokers: 2, properties: { 'tidelog.http.listener': '127.0.0.1:0' } },
    async (cluster) => {
      const urls = cluster.brokers.map((broker) => {
        const line = broker.current.lines.find((l) => l.includes('console and metrics: http'))
        assert.ok(line, broker.current.lines.join('\n'))
        return `${/(http:\/\/\S+)/.exec(line)![1]}schema-registry`
      })
      const register = async (url: string, subject: string, schema: string) => {
        const response = await fetch(`${url}/subjects/${subject}/versions`, {
          method: 'POST',
          headers: HEADERS,
          body: JSON.stringify({ schema }),
        })
        const body = (await response.json()) as { id: number }
        assert.equal(response.status, 200, JSON.stringify(body))
        return body.id
      }
      const ids: number[] = []
      for (let i = 0; i < 6; i++)
        ids.push(
          await register(
            urls[i % 2],
            `s-${i}`,
            JSON.stringify({ type: 'fixed', name: `F${i}`, size: i + 1 }),
          ),
        )
      assert.equal(new Set(ids).size, ids.length, `unique ids: ${ids}`)
      for (const url of urls) {
        const subjects = (await (await fetch(`${url}/subjects`)).json()) as string[]
        assert.deepEqual(subjects, ['s-0', 's-1', 's-2', 's-3', 's-4', 's-5'])
      }
      // A config write through each broker too (PUT is forwarded as well).
      for (const [i, url] of urls.entries()) {
        const response = await fetch(`${url}/config/s-${i}`, {
          method: 'PUT',
          headers: HEADERS,
          body: JSON.stringify({ compatibility: 'FULL' }),
        })
        assert.deepEqual(await response.json(), { compatibility: 'FULL' })
      }
    },
  )
})

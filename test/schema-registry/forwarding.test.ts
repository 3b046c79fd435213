/**
 * Two `tidelog broker` processes on etcd: a registry write sent to the broker that does not
 * lead `_schemas` partition 0 is forwarded over HTTP to the writer's registry (its URL is in
 * the writer's broker registration), so every broker accepts writes, ids stay unique and
 * both serve every schema. Then the same over HTTPS listeners of their own with basic auth:
 * the forward trusts the listener's CAs and carries the caller's credentials.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { request } from 'node:https'
import { test } from 'node:test'
import { ApiKey } from '../../src/protocol/generated/index.js'
import { saltedPassword } from '../../src/security/scram.js'
import { withEtcdCluster } from '../helpers/broker-process.js'
import { makeTestCerts } from '../helpers/certs.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

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

/** A SCRAM-SHA-256 user through AlterUserScramCredentials on a PLAINTEXT port. */
async function addScramUser(port: number, user: string, password: string): Promise<void> {
  const client = await RawClient.connect(port)
  try {
    const salt = randomBytes(16)
    const response = await rawCall<{ results: { errorCode: number }[] }>(
      client,
      ApiKey.AlterUserScramCredentials,
      0,
      {
        deletions: [],
        upsertions: [
          {
            name: user,
            mechanism: 1,
            iterations: 4096,
            salt,
            saltedPassword: saltedPassword('SCRAM-SHA-256', password, salt, 4096),
          },
        ],
      },
    )
    assert.deepEqual(
      response.results.map((r) => r.errorCode),
      [0],
    )
  } finally {
    client.socket.destroy()
  }
}

/** A POST over HTTPS trusting `ca`: the status and JSON body. */
function post(
  url: string,
  body: unknown,
  ca: string,
  auth: string,
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        ca,
        headers: { ...HEADERS, Authorization: `Basic ${Buffer.from(auth).toString('base64')}` },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) }),
        )
      },
    )
    req.on('error', reject)
    req.end(JSON.stringify(body))
  })
}

test('over HTTPS with basic auth: a write forwarded to the writer keeps TLS and credentials', async () => {
  const certs = await makeTestCerts()
  try {
    await withEtcdCluster(
      {
        brokers: 2,
        properties: {
          'tidelog.schema.registry.listener': 'https://127.0.0.1:0',
          'tidelog.schema.registry.authentication.method': 'BASIC',
          'ssl.keystore.type': 'PEM',
          'ssl.keystore.location': certs.brokerKeystore,
          'ssl.truststore.type': 'PEM',
          'ssl.truststore.location': certs.caFile,
        },
      },
      async (cluster) => {
        const urls = cluster.brokers.map((broker) => {
          const line = broker.current.lines.find((l) => l.includes('"schema registry listener"'))
          assert.ok(line, broker.current.lines.join('\n'))
          return (JSON.parse(line) as { url: string }).url
        })
        assert.ok(
          urls.every((u) => u.startsWith('https://')),
          urls.join(' '),
        )
        // alice: a SCRAM user, made as kafka-configs does (the brokers have no SASL listener;
        // BASIC is set explicitly and checks the cluster's SCRAM credentials).
        await addScramUser(Number(cluster.brokers[0].spec.port), 'alice', 'alice-secret')
        const ids: number[] = []
        for (let i = 0; i < 4; i++) {
          const reply = await post(
            `${urls[i % 2]}/subjects/tls-${i}/versions`,
            { schema: JSON.stringify({ type: 'fixed', name: `T${i}`, size: i + 1 }) },
            certs.caPem,
            'alice:alice-secret',
          )
          assert.equal(reply.status, 200, JSON.stringify(reply.body))
          ids.push((reply.body as { id: number }).id)
        }
        assert.equal(new Set(ids).size, 4, `unique ids: ${ids}`)
        // A wrong password is refused by whichever broker gets it, forwarded or not.
        for (const url of urls) {
          const refused = await post(
            `${url}/subjects/tls-x/versions`,
            { schema: '"int"' },
            certs.caPem,
            'alice:no',
          )
          assert.equal(refused.status, 401)
        }
      },
    )
  } finally {
    await certs.cleanup()
  }
})

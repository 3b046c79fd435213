/**
 * The etcd store: the shared contract against a private etcd (one process for the file, a
 * fresh key prefix per test), then what only etcd has: namespaces, and an etcd that is not
 * there or goes away.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { after, before, describe, test } from 'node:test'
import { EtcdStore } from '../../../src/metadata/store/etcd-store.js'
import { MetadataStoreError } from '../../../src/metadata/store/metadata-store.js'
import { nodeNetwork } from '../../../src/runtime/node-network.js'
import { type EtcdProcess, startEtcd } from '../../helpers/etcd.js'
import { metadataStoreContract } from './contract.js'

let etcd: EtcdProcess
let nextPrefix = 0
const uniquePrefix = () => `/tidelog-test-${process.pid}-${nextPrefix++}`

before(async () => {
  etcd = await startEtcd()
})

after(async () => {
  await etcd.stop()
})

metadataStoreContract(
  'etcd store',
  async () => {
    const store = await EtcdStore.connect({ endpoints: [etcd.endpoint], prefix: uniquePrefix() })
    return {
      store,
      suspendKeepAlive: (lease) => store.suspendKeepAlive(lease.id),
      elapse: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      close: () => store.close(),
    }
  },
  // etcd's lease TTL has a floor of about two seconds and expiry is checked every 500 ms.
  { waitMs: 5000 },
)

const isStoreError = (code: string) => (err: unknown) =>
  err instanceof MetadataStoreError && err.code === code

describe('etcd store: etcd specifics', () => {
  test('stores with different prefixes do not see each other', async () => {
    const [a, b] = await Promise.all([
      EtcdStore.connect({ endpoints: [etcd.endpoint], prefix: uniquePrefix() }),
      EtcdStore.connect({ endpoints: [etcd.endpoint], prefix: uniquePrefix() }),
    ])
    await a.txn([], [{ type: 'put', key: '/k', value: 'a' }])
    assert.equal(await b.get('/k'), null)
    assert.deepEqual(
      (await a.range('')).kvs.map((kv) => kv.key),
      ['/k'],
    )
    await Promise.all([a.close(), b.close()])
  })

  test('an empty prefix (no namespace) still runs transactions without compares', async () => {
    const store = await EtcdStore.connect({ endpoints: [etcd.endpoint], prefix: '' })
    const key = `${uniquePrefix()}/k`
    const put = await store.txn([], [{ type: 'put', key, value: 'x' }])
    assert.deepEqual(await store.txn([], []), { succeeded: true, revision: put.revision })
    assert.equal((await store.get(key))?.value, 'x')
    await store.close()
  })

  test('connecting to an etcd that is not there fails with STORE_UNAVAILABLE', async () => {
    const dead = await startEtcd()
    await dead.stop()
    await assert.rejects(
      EtcdStore.connect({ endpoints: [dead.endpoint], callTimeoutMs: 500 }),
      isStoreError('STORE_UNAVAILABLE'),
    )
  })

  test('when etcd dies, calls fail with STORE_UNAVAILABLE; leases go on unconfirmed and are confirmed when it returns', async () => {
    // A stopped etcd expires nothing, and renews every lease for a full TTL when it starts.
    // The TTL covers etcd's start: it accepts connections a second or two before it answers,
    // and the session cannot tell that from a cut.
    const doomed = await startEtcd()
    try {
      const store = await EtcdStore.connect({
        endpoints: [doomed.endpoint],
        callTimeoutMs: 500,
        network: nodeNetwork,
      })
      const lease = await store.grantLease(3000)
      await store.txn([], [{ type: 'put', key: '/held', value: 'x', lease: lease.id }])
      let lost = false
      void lease.lost.then(() => {
        lost = true
      })
      doomed.kill()
      await new Promise((resolve) => setTimeout(resolve, 7000))
      assert.equal(lost, false, 'lease lost while etcd refused connections')
      await assert.rejects(store.get('/a'), isStoreError('STORE_UNAVAILABLE'))
      await doomed.restart()
      // Over a TTL after it returned: kept alive again, its key still there.
      await new Promise((resolve) => setTimeout(resolve, 4000))
      assert.equal(lost, false, 'lease lost after etcd returned')
      assert.equal((await store.get('/held'))?.value, 'x')
      await store.close()
    } finally {
      await doomed.stop()
    }
  })

  test('when etcd freezes (keep-alives unanswered, not refused), leases are lost within their TTL', async () => {
    const frozen = await startEtcd()
    try {
      const store = await EtcdStore.connect({
        endpoints: [frozen.endpoint],
        callTimeoutMs: 500,
        network: nodeNetwork,
      })
      const lease = await store.grantLease(1000)
      frozen.signal('SIGSTOP')
      const started = Date.now()
      await lease.lost
      assert.ok(Date.now() - started < 2000, `lease lost only after ${Date.now() - started} ms`)
      frozen.signal('SIGCONT')
      await store.close()
    } finally {
      await frozen.stop()
    }
  })

  test('a watch from a compacted revision ends with REVISION_COMPACTED through onError', async () => {
    const store = await EtcdStore.connect({ endpoints: [etcd.endpoint], prefix: uniquePrefix() })
    const first = await store.txn([], [{ type: 'put', key: '/a', value: '1' }])
    const last = await store.txn([], [{ type: 'put', key: '/a', value: '2' }])
    const response = await fetch(`${etcd.endpoint}/v3/kv/compaction`, {
      method: 'POST',
      body: JSON.stringify({ revision: String(last.revision), physical: true }),
    })
    assert.equal(response.status, 200)
    const errors: MetadataStoreError[] = []
    store.watch(
      '',
      first.revision,
      () => assert.fail('no events expected from a compacted revision'),
      (err) => errors.push(err),
    )
    const deadline = Date.now() + 5000
    while (errors.length === 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20))
    assert.equal(errors[0]?.code, 'REVISION_COMPACTED')
    await store.close()
  })
})

/**
 * Writes `count` puts of `valueBytes` under `prefix`, then compacts etcd's history up to the
 * last, from another process: run with spawnSync, this process's event loop stays blocked
 * meanwhile, as a paused or CPU-starved broker's is.
 */
const WRITER = `
const [endpoint, prefix, count, valueBytes] = process.argv.slice(1)
const b64 = (s) => Buffer.from(s).toString('base64')
const value = b64('x'.repeat(Number(valueBytes)))
let revision = '0'
for (let i = 0; i < Number(count); i++) {
  const response = await fetch(endpoint + '/v3/kv/put', {
    method: 'POST',
    body: JSON.stringify({ key: b64(prefix + '/bulk/' + i), value }),
  })
  revision = (await response.json()).header.revision
}
const compaction = await fetch(endpoint + '/v3/kv/compaction', {
  method: 'POST',
  body: JSON.stringify({ revision, physical: true }),
})
if (compaction.status !== 200) throw new Error('compaction ' + compaction.status)
`

describe('etcd store: a watch etcd cancels', () => {
  test('a live watch whose client stopped reading while etcd compacted what it had not sent ends with REVISION_COMPACTED, and the process goes on', {
    timeout: 60_000,
  }, async () => {
    const prefix = uniquePrefix()
    const store = await EtcdStore.connect({ endpoints: [etcd.endpoint], prefix })
    try {
      const first = await store.txn([], [{ type: 'put', key: '/a', value: '0' }])
      const errors: MetadataStoreError[] = []
      let delivered = 0
      store.watch(
        '',
        first.revision,
        () => {
          delivered++
        },
        (err) => errors.push(err),
      )
      const until = async (what: string, done: () => boolean) => {
        const deadline = Date.now() + 20_000
        while (!done() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
        assert.ok(done(), what)
      }
      // A second watch, as a broker has (its controller election's), that goes on.
      const quiet = store.watch(
        '/quiet',
        first.revision,
        () => {},
        (err) => errors.push(err),
      )
      await until('the watch delivers', () => delivered > 0)
      // More bytes than the sockets hold and more revisions than etcd buffers for a stream
      // that does not drain: etcd sets the watcher aside and, once this process reads again,
      // finds its next revision compacted and cancels it.
      const writer = spawnSync(
        process.execPath,
        ['--input-type=module', '-e', WRITER, etcd.endpoint, prefix, '400', '8192'],
        { encoding: 'utf8', timeout: 45_000 },
      )
      assert.equal(writer.status, 0, writer.stderr)
      await until('the watch ends', () => errors.length > 0)
      assert.equal(errors[0]?.code, 'REVISION_COMPACTED')
      // Before the fix etcd3 threw on the answer to our cancel of a watch etcd had already
      // cancelled, from a stream callback: the process crashed here.
      await new Promise((resolve) => setTimeout(resolve, 500))
      const later = await store.txn([], [{ type: 'put', key: '/a', value: '1' }])
      assert.ok(later.succeeded)
      quiet.cancel()
    } finally {
      await store.close()
    }
  })
})

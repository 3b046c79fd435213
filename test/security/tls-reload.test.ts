/**
 * Issue 16 (a plus): a renewed certificate is picked up without a restart. After the key
 * store file is replaced, Broker.reloadTls() (SIGHUP in the CLI) makes new handshakes use
 * it; an unusable file is refused with a ConfigError and the current certificate stays.
 */
import assert from 'node:assert/strict'
import { copyFile, writeFile } from 'node:fs/promises'
import { test } from 'node:test'
import { connect } from 'node:tls'
import { ConfigError } from '../../src/common/errors.js'
import { makeTestCerts } from '../helpers/certs.js'
import { startBroker } from '../helpers/cluster.js'

function handshake(address: string, ca: string): Promise<string> {
  const [host, port] = address.split(':')
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port: Number(port), ca: [ca] }, () => {
      const issuer = socket.getPeerX509Certificate()!.issuer
      socket.destroy()
      resolve(issuer)
    })
    socket.once('error', reject)
  })
}

test('reloadTls() serves a replaced key store to new handshakes; an unusable one is refused and the old stays', async () => {
  const first = await makeTestCerts()
  const second = await makeTestCerts()
  const keystore = `${first.dir}/live-keystore.pem`
  await copyFile(first.brokerKeystore, keystore)
  const cluster = await startBroker({
    properties: {
      listeners: 'PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0',
      'ssl.keystore.type': 'PEM',
      'ssl.keystore.location': keystore,
    },
  })
  try {
    const broker = cluster.brokers[0]
    const address = broker.listenerAddress('SSL')
    await handshake(address, first.caPem)
    await copyFile(second.brokerKeystore, keystore)
    assert.ok(broker.reloadTls() >= 1)
    await handshake(address, second.caPem)
    await assert.rejects(handshake(address, first.caPem), /self-signed|unable to verify|certificate/i)
    await writeFile(keystore, 'not a pem file')
    assert.throws(() => broker.reloadTls(), ConfigError)
    await handshake(address, second.caPem)
  } finally {
    await cluster.stop()
    await first.cleanup()
    await second.cleanup()
  }
})

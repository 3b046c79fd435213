/**
 * Issue 16, TLS details: a renewed certificate is picked up without a restart (after the key
 * store file is replaced, Broker.reloadTls(), SIGHUP in the CLI, makes new handshakes use
 * it; an unusable file is refused with a ConfigError and the current certificate stays), and
 * ssl.client.auth=requested takes a client with or without a certificate.
 */
import assert from 'node:assert/strict'
import { copyFile, writeFile } from 'node:fs/promises'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { connect, type TLSSocket } from 'node:tls'
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

test('ssl.client.auth=requested: no certificate is ANONYMOUS, a trusted one its DN, an untrusted one is refused', async () => {
  const certs = await makeTestCerts()
  const cluster = await startBroker({
    properties: {
      listeners: 'PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0',
      'ssl.keystore.type': 'PEM',
      'ssl.keystore.location': certs.brokerKeystore,
      'ssl.truststore.type': 'PEM',
      'ssl.truststore.certificates': certs.caPem,
      'ssl.client.auth': 'requested',
    },
  })
  const [host, port] = cluster.brokers[0].listenerAddress('SSL').split(':')
  const open = (key?: string, cert?: string) =>
    new Promise<TLSSocket>((resolve, reject) => {
      const socket = connect({ host, port: Number(port), ca: [certs.caPem], key, cert }, () =>
        resolve(socket),
      )
      socket.once('error', reject)
    })
  const principals = async (expected: number): Promise<string[]> => {
    for (let i = 0; i < 50 && cluster.brokers[0].connectedPrincipals().length < expected; i++) await sleep(20)
    return cluster.brokers[0].connectedPrincipals().sort()
  }
  try {
    const anonymous = await open()
    const alice = await open(certs.clientKeyPem, certs.clientCertPem)
    assert.deepEqual(await principals(2), ['User:ANONYMOUS', 'User:CN=alice,OU=Ops,O=Tide Org,C=NO'])
    // An untrusted certificate completes the TLS 1.3 handshake on the client side first; the
    // broker then drops the connection without serving it.
    const stranger = await open(certs.strangerKeyPem, certs.strangerCertPem).catch((error: Error) => error)
    if (!(stranger instanceof Error))
      await new Promise<void>((resolve) => stranger.once('close', () => resolve()))
    assert.equal((await principals(3)).length, 2)
    anonymous.destroy()
    alice.destroy()
  } finally {
    await cluster.stop()
    await certs.cleanup()
  }
})

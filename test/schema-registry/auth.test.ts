/**
 * The pieces of the registry's security without a broker: the subject → topic mapping
 * (TopicNameStrategy), basic auth headers, and passwords checked against PLAIN users and
 * SCRAM credentials (right, wrong, changed).
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import { basicCredentials, topicOfSubject } from '../../src/schema-registry/auth.js'
import { PasswordCheck } from '../../src/security/password-check.js'
import {
  credentialFromSaltedPassword,
  type ScramMechanism,
  saltedPassword,
} from '../../src/security/scram.js'
import { ScramCredentialStore } from '../../src/security/scram-credentials.js'
import { ManualClock } from '../helpers/manual-clock.js'

test('a subject stands for the topic TopicNameStrategy names it after, else for itself', () => {
  assert.equal(topicOfSubject('orders-value'), 'orders')
  assert.equal(topicOfSubject('orders-key'), 'orders')
  assert.equal(topicOfSubject('my-topic-value-value'), 'my-topic-value')
  assert.equal(topicOfSubject('com.acme.User'), 'com.acme.User')
  assert.equal(topicOfSubject('-value'), '-value')
})

test('basic auth headers: user and password split at the first colon', () => {
  const header = (text: string) => `Basic ${Buffer.from(text).toString('base64')}`
  assert.deepEqual(basicCredentials(header('alice:pa:ss')), { user: 'alice', password: 'pa:ss' })
  assert.deepEqual(basicCredentials(header('alice:')), { user: 'alice', password: '' })
  assert.equal(basicCredentials(header('alice')), null)
  assert.equal(basicCredentials(header(':secret')), null)
  assert.equal(basicCredentials('Bearer abc'), null)
  assert.equal(basicCredentials(undefined), null)
})

async function scramCredential(
  store: ScramCredentialStore,
  mechanism: ScramMechanism,
  user: string,
  password: string,
) {
  const salt = randomBytes(16)
  await store.alter([
    {
      type: 'upsert',
      user,
      mechanism,
      credential: credentialFromSaltedPassword(
        mechanism,
        saltedPassword(mechanism, password, salt, 4096),
        salt,
        4096,
      ),
    },
  ])
}

test('passwords: PLAIN users and SCRAM credentials of either mechanism; a changed credential is checked anew', async () => {
  const metadata = await EmbeddedStore.open({ clock: new ManualClock() })
  try {
    const scram = new ScramCredentialStore(metadata)
    const check = new PasswordCheck({
      plainUsers: () => [new Map([['pat', 'plain-secret']])],
      scramCredentials: scram,
    })
    assert.equal(await check.verify('pat', 'plain-secret'), true)
    assert.equal(await check.verify('pat', 'plain-secreT'), false)
    await scramCredential(scram, 'SCRAM-SHA-256', 'sam', 'sha256-secret')
    await scramCredential(scram, 'SCRAM-SHA-512', 'sue', 'sha512-secret')
    assert.equal(await check.verify('sam', 'sha256-secret'), true)
    assert.equal(await check.verify('sue', 'sha512-secret'), true)
    // Remembered checks answer for the same password only.
    assert.equal(await check.verify('sam', 'sha256-secret'), true)
    assert.equal(await check.verify('sam', 'sha512-secret'), false)
    assert.equal(await check.verify('nobody', 'x'), false)
    assert.equal(await check.verify('sam', ''), false)
    // A new password replaces the old: the remembered check no longer holds.
    await scramCredential(scram, 'SCRAM-SHA-256', 'sam', 'new-secret')
    assert.equal(await check.verify('sam', 'sha256-secret'), false)
    assert.equal(await check.verify('sam', 'new-secret'), true)
    await scram.alter([{ type: 'delete', user: 'sam', mechanism: 'SCRAM-SHA-256' }])
    assert.equal(await check.verify('sam', 'new-secret'), false)
  } finally {
    await metadata.close()
  }
})

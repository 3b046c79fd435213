/**
 * ACLs in an etcd metadata store, as brokers in separate processes keep them: two store
 * connections (two brokers) on one etcd and prefix; an ACL written through one is decided
 * on by the other's authorizer, a deletion too, and a broker connecting later reads them.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, test } from 'node:test'
import { createLogger } from '../../src/common/logger.js'
import { EtcdStore } from '../../src/metadata/store/etcd-store.js'
import {
  type AclBinding,
  AclOperation,
  AclPermissionType,
  PatternType,
  ResourceType,
} from '../../src/security/authorizer/acl.js'
import { AclStore } from '../../src/security/authorizer/acl-store.js'
import { StandardAuthorizer } from '../../src/security/authorizer/standard-authorizer.js'
import { type EtcdProcess, startEtcd } from '../helpers/etcd.js'
import { waitUntil } from '../helpers/wait.js'

let etcd: EtcdProcess

before(async () => {
  etcd = await startEtcd()
})

after(async () => {
  await etcd?.stop()
})

const alice = { principal: 'User:alice', host: '10.1.1.1' }
const binding: AclBinding = {
  resourceType: ResourceType.TOPIC,
  resourceName: 'payments.',
  patternType: PatternType.PREFIXED,
  principal: 'User:alice',
  host: '*',
  operation: AclOperation.WRITE,
  permissionType: AclPermissionType.ALLOW,
}

async function broker(prefix: string) {
  const store = await EtcdStore.connect({ endpoints: [etcd.endpoint], prefix })
  const authorizer = new StandardAuthorizer({ superUsers: new Set(), allowEveryoneIfNoAclFound: false })
  const acls = await AclStore.open(
    store,
    (b) => authorizer.replaceAcls(b),
    createLogger('acls-etcd', 'silent'),
  )
  return {
    acls,
    mayWrite: () => authorizer.authorize(alice, AclOperation.WRITE, ResourceType.TOPIC, 'payments.eu'),
    close: async () => {
      acls.close()
      await store.close()
    },
  }
}

function eventually(what: string, check: () => boolean): Promise<void> {
  return waitUntil(what, 5000, check, 20)
}

test('an ACL written through one etcd connection holds on another, and after a reconnect', async () => {
  const prefix = `/tidelog-acls-${randomUUID()}/`
  const one = await broker(prefix)
  const two = await broker(prefix)
  try {
    assert.equal(two.mayWrite(), false)
    await one.acls.create([binding])
    assert.equal(one.mayWrite(), true, 'the writer decides on it as soon as create() returns')
    await eventually('the other broker sees the ACL', () => two.mayWrite())
    const late = await broker(prefix)
    assert.equal(late.mayWrite(), true)
    await late.close()
    await two.acls.delete([binding])
    await eventually('the first broker sees the deletion', () => !one.mayWrite())
  } finally {
    await one.close()
    await two.close()
  }
})

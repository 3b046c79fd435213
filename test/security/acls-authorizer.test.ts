import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import {
  type AclBinding,
  type AclBindingFilter,
  AclOperation,
  AclPermissionType,
  filterMatches,
  InvalidAclError,
  PatternType,
  ResourceType,
  validateBinding,
  validateFilter,
} from '../../src/security/authorizer/acl.js'
import { authorizerSettings } from '../../src/security/authorizer/authorizer-config.js'
import {
  hostOf,
  operationBits,
  StandardAuthorizer,
} from '../../src/security/authorizer/standard-authorizer.js'

const { TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID } = ResourceType
const { LITERAL, PREFIXED } = PatternType
const { ALLOW, DENY } = AclPermissionType
const op = AclOperation

function acl(partial: Partial<AclBinding>): AclBinding {
  return {
    resourceType: TOPIC,
    resourceName: 'orders',
    patternType: LITERAL,
    principal: 'User:alice',
    host: '*',
    operation: op.READ,
    permissionType: ALLOW,
    ...partial,
  }
}

function authorizer(acls: AclBinding[], options: { superUsers?: string[]; allowEveryone?: boolean } = {}) {
  const a = new StandardAuthorizer({
    superUsers: new Set(options.superUsers ?? []),
    allowEveryoneIfNoAclFound: options.allowEveryone ?? false,
  })
  a.replaceAcls(acls)
  return a
}

const alice = { principal: 'User:alice', host: '10.0.0.1' }
const bob = { principal: 'User:bob', host: '10.0.0.2' }

describe('StandardAuthorizer decisions', () => {
  test('a resource without ACLs is denied unless allow.everyone.if.no.acl.found', () => {
    assert.equal(authorizer([]).authorize(alice, op.READ, TOPIC, 'orders'), false)
    assert.equal(authorizer([], { allowEveryone: true }).authorize(alice, op.READ, TOPIC, 'orders'), true)
  })

  test('allow.everyone.if.no.acl.found does not apply once the resource has any ACL', () => {
    const a = authorizer([acl({ principal: 'User:bob' })], { allowEveryone: true })
    assert.equal(a.authorize(alice, op.READ, TOPIC, 'orders'), false)
    assert.equal(a.authorize(alice, op.READ, TOPIC, 'other'), true)
  })

  test('a literal ALLOW grants its principal its operation on that name only', () => {
    const a = authorizer([acl({})])
    assert.equal(a.authorize(alice, op.READ, TOPIC, 'orders'), true)
    assert.equal(a.authorize(alice, op.WRITE, TOPIC, 'orders'), false)
    assert.equal(a.authorize(bob, op.READ, TOPIC, 'orders'), false)
    assert.equal(a.authorize(alice, op.READ, TOPIC, 'orders2'), false)
    assert.equal(a.authorize(alice, op.READ, GROUP, 'orders'), false)
  })

  test('the literal * resource, User:* principal and ALL operation are wildcards', () => {
    const a = authorizer([acl({ resourceName: '*', principal: 'User:*', operation: op.ALL })])
    assert.equal(a.authorize(bob, op.WRITE, TOPIC, 'anything'), true)
    assert.equal(a.authorize(bob, op.DELETE, TOPIC, 'x'), true)
  })

  test('a PREFIXED ACL applies to every name starting with its name', () => {
    const a = authorizer([acl({ resourceName: 'team-a.', patternType: PREFIXED, operation: op.WRITE })])
    assert.equal(a.authorize(alice, op.WRITE, TOPIC, 'team-a.events'), true)
    assert.equal(a.authorize(alice, op.WRITE, TOPIC, 'team-a.'), true)
    assert.equal(a.authorize(alice, op.WRITE, TOPIC, 'team-b.events'), false)
    assert.equal(a.authorize(alice, op.WRITE, TOPIC, 'team-a'), false)
  })

  test('DENY wins over ALLOW, whatever patterns they come from', () => {
    const a = authorizer([
      acl({ resourceName: '*', principal: 'User:*', operation: op.ALL }),
      acl({ resourceName: 'secret.', patternType: PREFIXED, operation: op.READ, permissionType: DENY }),
    ])
    assert.equal(a.authorize(alice, op.READ, TOPIC, 'secret.keys'), false)
    assert.equal(a.authorize(alice, op.WRITE, TOPIC, 'secret.keys'), true)
    assert.equal(a.authorize(alice, op.READ, TOPIC, 'public'), true)
  })

  test('DENY ALL denies every operation, and a DENY does not imply other denials', () => {
    const denyAll = authorizer([
      acl({ operation: op.READ }),
      acl({ operation: op.ALL, permissionType: DENY }),
    ])
    assert.equal(denyAll.authorize(alice, op.READ, TOPIC, 'orders'), false)
    const denyRead = authorizer([
      acl({ operation: op.DESCRIBE }),
      acl({ operation: op.READ, permissionType: DENY }),
    ])
    assert.equal(
      denyRead.authorize(alice, op.DESCRIBE, TOPIC, 'orders'),
      true,
      'DENY READ does not deny DESCRIBE',
    )
  })

  test('READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS', () => {
    for (const granted of [op.READ, op.WRITE, op.DELETE, op.ALTER]) {
      assert.equal(
        authorizer([acl({ operation: granted })]).authorize(alice, op.DESCRIBE, TOPIC, 'orders'),
        true,
      )
    }
    assert.equal(
      authorizer([acl({ operation: op.CREATE })]).authorize(alice, op.DESCRIBE, TOPIC, 'orders'),
      false,
    )
    assert.equal(
      authorizer([acl({ operation: op.ALTER_CONFIGS })]).authorize(
        alice,
        op.DESCRIBE_CONFIGS,
        TOPIC,
        'orders',
      ),
      true,
    )
    assert.equal(
      authorizer([acl({ operation: op.DESCRIBE })]).authorize(alice, op.READ, TOPIC, 'orders'),
      false,
    )
  })

  test('an ACL for one host does not apply to another', () => {
    const a = authorizer([acl({ host: '10.0.0.1' })])
    assert.equal(a.authorize(alice, op.READ, TOPIC, 'orders'), true)
    assert.equal(a.authorize({ ...alice, host: '10.0.0.9' }, op.READ, TOPIC, 'orders'), false)
  })

  test('super users are allowed everything, DENY rules included', () => {
    const a = authorizer([acl({ principal: 'User:*', operation: op.ALL, permissionType: DENY })], {
      superUsers: ['User:admin'],
    })
    assert.equal(
      a.authorize({ principal: 'User:admin', host: '1.2.3.4' }, op.ALTER, CLUSTER, 'kafka-cluster'),
      true,
    )
    assert.equal(a.authorize(alice, op.READ, TOPIC, 'orders'), false)
  })

  test('authorizeByResourceType: WRITE on any topic unless a DENY covers every allowed name', () => {
    assert.equal(
      authorizer([acl({ operation: op.WRITE })]).authorizeByResourceType(alice, op.WRITE, TOPIC),
      true,
    )
    assert.equal(authorizer([]).authorizeByResourceType(alice, op.WRITE, TOPIC), false)
    const dominated = authorizer([
      acl({ resourceName: 'a.b', operation: op.WRITE }),
      acl({ resourceName: 'a.', patternType: PREFIXED, operation: op.WRITE, permissionType: DENY }),
    ])
    assert.equal(dominated.authorizeByResourceType(alice, op.WRITE, TOPIC), false)
    const wildcardDeny = authorizer([
      acl({ resourceName: 'x', operation: op.WRITE }),
      acl({ resourceName: '*', operation: op.WRITE, permissionType: DENY }),
    ])
    assert.equal(wildcardDeny.authorizeByResourceType(alice, op.WRITE, TOPIC), false)
    assert.equal(
      authorizer([acl({ operation: op.READ })]).authorizeByResourceType(alice, op.WRITE, TOPIC),
      false,
      'implied operations do not count here',
    )
  })

  test('authorizedOperations sets the bit of each operation the type has and the caller may do', () => {
    const a = authorizer([acl({ operation: op.WRITE }), acl({ resourceType: GROUP, resourceName: 'g' })])
    assert.equal(a.authorizedOperations(alice, TOPIC, 'orders'), operationBits([op.WRITE, op.DESCRIBE]))
    assert.equal(a.authorizedOperations(alice, GROUP, 'g'), operationBits([op.READ, op.DESCRIBE]))
    assert.equal(a.authorizedOperations(bob, TRANSACTIONAL_ID, 't'), 0)
  })
})

describe('ACL validation and filters', () => {
  test('CreateAcls refuses unknown or filter-only codes, empty names and malformed principals', () => {
    validateBinding(acl({}))
    const bad: Partial<AclBinding>[] = [
      { resourceType: ResourceType.ANY },
      { resourceType: 99 as ResourceType },
      { patternType: PatternType.MATCH },
      { patternType: PatternType.ANY },
      { operation: op.ANY },
      { operation: 42 as AclOperation },
      { permissionType: AclPermissionType.ANY },
      { resourceName: '' },
      { resourceType: CLUSTER, resourceName: 'my-cluster' },
      { principal: 'alice' },
      { principal: 'User:' },
    ]
    for (const b of bad) assert.throws(() => validateBinding(acl(b)), InvalidAclError, JSON.stringify(b))
    validateBinding(acl({ resourceType: CLUSTER, resourceName: 'kafka-cluster', operation: op.ALTER }))
  })

  const any: AclBindingFilter = {
    resourceType: ResourceType.ANY,
    resourceName: null,
    patternType: PatternType.ANY,
    principal: null,
    host: null,
    operation: op.ANY,
    permissionType: AclPermissionType.ANY,
  }

  test('filters: UNKNOWN codes are invalid, ANY matches all', () => {
    validateFilter(any)
    assert.throws(() => validateFilter({ ...any, resourceType: ResourceType.UNKNOWN }), InvalidAclError)
    assert.throws(() => validateFilter({ ...any, operation: 77 as AclOperation }), InvalidAclError)
    assert.equal(filterMatches(any, acl({ patternType: PREFIXED })), true)
  })

  test('a MATCH filter selects the literal, wildcard and prefixed ACLs that apply to a name', () => {
    const match = {
      ...any,
      resourceType: TOPIC,
      resourceName: 'team-a.events',
      patternType: PatternType.MATCH,
    }
    assert.equal(filterMatches(match, acl({ resourceName: 'team-a.events' })), true)
    assert.equal(filterMatches(match, acl({ resourceName: '*' })), true)
    assert.equal(filterMatches(match, acl({ resourceName: 'team-a.', patternType: PREFIXED })), true)
    assert.equal(filterMatches(match, acl({ resourceName: 'team-b.', patternType: PREFIXED })), false)
    assert.equal(filterMatches(match, acl({ resourceName: 'team-a.' })), false)
  })

  test('LITERAL and PREFIXED filters compare the name exactly; entry filters compare exactly', () => {
    const prefixed = { ...any, resourceName: 'team-a.', patternType: PREFIXED }
    assert.equal(filterMatches(prefixed, acl({ resourceName: 'team-a.', patternType: PREFIXED })), true)
    assert.equal(filterMatches(prefixed, acl({ resourceName: 'team-a.' })), false)
    assert.equal(filterMatches({ ...any, principal: 'User:*' }, acl({})), false)
    assert.equal(filterMatches({ ...any, principal: 'User:alice', permissionType: DENY }, acl({})), false)
  })
})

describe('authorizer configuration', () => {
  test('empty authorizer.class.name: no authorizer; Kafka class names enable it', () => {
    assert.equal(authorizerSettings(new Map([['authorizer.class.name', '']])), null)
    const settings = authorizerSettings(
      new Map<string, string | boolean>([
        ['authorizer.class.name', 'org.apache.kafka.metadata.authorizer.StandardAuthorizer'],
        ['super.users', 'User:admin; User:broker'],
        ['allow.everyone.if.no.acl.found', true],
      ]),
    )
    assert.deepEqual([...(settings?.superUsers ?? [])], ['User:admin', 'User:broker'])
    assert.equal(settings?.allowEveryoneIfNoAclFound, true)
    assert.ok(
      authorizerSettings(new Map([['authorizer.class.name', 'kafka.security.authorizer.AclAuthorizer']])),
    )
    assert.throws(
      () => authorizerSettings(new Map([['authorizer.class.name', 'com.example.Custom']])),
      /not available/,
    )
    assert.throws(
      () =>
        authorizerSettings(
          new Map([
            ['authorizer.class.name', 'kafka.security.authorizer.AclAuthorizer'],
            ['super.users', 'admin'],
          ]),
        ),
      /super.users/,
    )
  })

  test('hostOf takes the address of host:port, IPv6 and IPv4-mapped included', () => {
    assert.equal(hostOf('127.0.0.1:5555'), '127.0.0.1')
    assert.equal(hostOf('::1:5555'), '::1')
    assert.equal(hostOf('::ffff:127.0.0.1:5555'), '127.0.0.1')
  })
})

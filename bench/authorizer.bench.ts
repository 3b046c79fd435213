/**
 * StandardAuthorizer decisions per second, the cost every request pays with
 * authorizer.class.name set: 10,000 LITERAL topic ACLs over 100 principals plus 100
 * PREFIXED ones, asked about allowed names, refused names, PREFIXED matches and a super
 * user, one second each.
 *
 *   npm run build && node dist/bench/authorizer.bench.js
 */
import { type AclBinding, AclOperation, PatternType, ResourceType } from '../src/security/authorizer/acl.js'
import { StandardAuthorizer } from '../src/security/authorizer/standard-authorizer.js'

const RUN_MS = 1000
const LITERAL_ACLS = 10_000
const PREFIXED_ACLS = 100

const authorizer = new StandardAuthorizer({
  superUsers: new Set(['User:admin']),
  allowEveryoneIfNoAclFound: false,
})
const acls: AclBinding[] = []
for (let i = 0; i < LITERAL_ACLS; i++)
  acls.push({
    resourceType: ResourceType.TOPIC,
    resourceName: `topic-${i}`,
    patternType: PatternType.LITERAL,
    principal: `User:u${i % 100}`,
    host: '*',
    operation: AclOperation.WRITE,
    permissionType: 3,
  } as AclBinding)
for (let i = 0; i < PREFIXED_ACLS; i++)
  acls.push({
    resourceType: ResourceType.TOPIC,
    resourceName: `team-${i}.`,
    patternType: PatternType.PREFIXED,
    principal: `User:u${i}`,
    host: '*',
    operation: AclOperation.READ,
    permissionType: 3,
  } as AclBinding)
authorizer.replaceAcls(acls)

const names = Array.from({ length: LITERAL_ACLS }, (_, i) => `topic-${i}`)
const teamNames = Array.from({ length: PREFIXED_ACLS }, (_, i) => `team-${i}.events`)

function measure(label: string, ask: (i: number) => boolean): void {
  let count = 0
  let allowed = 0
  const start = process.hrtime.bigint()
  const endNs = start + BigInt(RUN_MS) * 1_000_000n
  while (process.hrtime.bigint() < endNs) for (let i = 0; i < 1000; i++, count++) if (ask(count)) allowed++
  const seconds = Number(process.hrtime.bigint() - start) / 1e9
  console.log(
    `${label.padEnd(44)} ${Math.round(count / seconds).toLocaleString('en')} decisions/s (${((allowed / count) * 100).toFixed(0)}% allowed)`,
  )
}

const u7 = { principal: 'User:u7', host: '127.0.0.1' }
console.log(`${LITERAL_ACLS + PREFIXED_ACLS} ACLs (${PREFIXED_ACLS} PREFIXED)`)
measure('WRITE on a LITERAL topic (1% allowed)', (i) =>
  authorizer.authorize(u7, AclOperation.WRITE, ResourceType.TOPIC, names[i % LITERAL_ACLS]),
)
measure('READ through a PREFIXED ACL (1% allowed)', (i) =>
  authorizer.authorize(u7, AclOperation.READ, ResourceType.TOPIC, teamNames[i % PREFIXED_ACLS]),
)
measure('DESCRIBE implied by WRITE, own topics', (i) =>
  authorizer.authorize(u7, AclOperation.DESCRIBE, ResourceType.TOPIC, names[(i % 100) * 100 + 7]),
)
measure('super user', (i) =>
  authorizer.authorize(
    { principal: 'User:admin', host: '1.2.3.4' },
    AclOperation.ALTER,
    ResourceType.TOPIC,
    names[i % LITERAL_ACLS],
  ),
)

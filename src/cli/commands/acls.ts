/**
 * `tidelog acls add|list|remove`, after kafka-acls.sh (its option names and defaults).
 *   add      every combination of the principals, hosts, operations and resources given
 *            (CreateAcls); --operation defaults to All, hosts to *
 *   list     the ACLs on the resources given, or on every resource (DescribeAcls);
 *            --resource-pattern-type defaults to ANY here, MATCH lists what applies to a name
 *   remove   the ACLs matching the resources, principals, hosts and operations given
 *            (DeleteAcls); without principals every principal's ACL on the resources goes
 * A broker without an authorizer answers SECURITY_DISABLED (exit 1).
 */
import { parseArgs } from 'node:util'
import { type Acl, type AclFilter, type AclOperationName, Admin, aclText } from '../../client/admin.js'
import { AclOperation } from '../../protocol/acl-codes.js'
import {
  COMMON_OPTIONS,
  clientOptions,
  EXIT_OK,
  EXIT_USAGE,
  guarded,
  isHelp,
  out,
  printJson,
  table,
  UsageError,
} from './common.js'

export const ACLS_USAGE = `Usage: tidelog acls <add|list|remove> [options]

Principals:  --allow-principal User:NAME ...   --deny-principal User:NAME ...
             --principal User:NAME ...   (list: only these principals' ACLs)
Hosts:       --allow-host IP ...   --deny-host IP ...   (default *)
Operations:  --operation OP ...   (add default All; list/remove default Any)
             Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs,
             AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, All
Resources:   --topic NAME ...  --group NAME ...  --transactional-id ID ...  --cluster
             (* is every resource of the type)
             --resource-pattern-type literal|prefixed|any|match
             (add default literal; list/remove default literal when a resource is named,
             any otherwise; any and match only for list and remove)
Common: --bootstrap-server HOST:PORT (default 127.0.0.1:9092), --command-config FILE, --json
`

const OPTIONS = {
  ...COMMON_OPTIONS,
  'allow-principal': { type: 'string', multiple: true },
  'deny-principal': { type: 'string', multiple: true },
  principal: { type: 'string', multiple: true },
  'allow-host': { type: 'string', multiple: true },
  'deny-host': { type: 'string', multiple: true },
  operation: { type: 'string', multiple: true },
  topic: { type: 'string', multiple: true },
  group: { type: 'string', multiple: true },
  'transactional-id': { type: 'string', multiple: true },
  cluster: { type: 'boolean', default: false },
  'resource-pattern-type': { type: 'string' },
  force: { type: 'boolean', default: false },
} as const

type Values = ReturnType<typeof parse>['values']
type Resource = { resourceType: Acl['resourceType']; resourceName: string }

function parse(args: readonly string[]) {
  return parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true, strict: true })
}

export async function aclsCommand(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv
  return guarded(`acls ${sub ?? ''}`.trim(), async () => {
    const { values, positionals } = parse(rest)
    if (values.help || sub === undefined || isHelp(sub)) {
      process.stdout.write(ACLS_USAGE)
      return sub === undefined ? EXIT_USAGE : EXIT_OK
    }
    if (sub !== 'add' && sub !== 'list' && sub !== 'remove')
      throw new UsageError(`unknown acls subcommand '${sub}'`)
    if (positionals.length > 0)
      throw new UsageError(`acls ${sub} takes no argument, got '${positionals.join(' ')}'`)
    const admin = new Admin(
      clientOptions(values['bootstrap-server'], 'tidelog-cli', values['command-config']),
    )
    try {
      if (sub === 'add') {
        const acls = aclsToAdd(values)
        await admin.createAcls(acls)
        if (values.json) printJson(acls)
        else for (const acl of acls) out(`Added ${aclText(acl)}`)
        return EXIT_OK
      }
      if (sub === 'list') {
        const found = (await Promise.all(listFilters(values).map((f) => admin.describeAcls(f)))).flat()
        print(found, values.json)
        return EXIT_OK
      }
      const removed = await admin.deleteAcls(removeFilters(values))
      if (values.json) printJson(removed)
      else if (removed.length === 0) out('No ACL matched.')
      else for (const acl of removed) out(`Removed ${aclText(acl)}`)
      return EXIT_OK
    } finally {
      admin.close()
    }
  })
}

function print(acls: readonly Acl[], json: boolean): void {
  if (json) {
    printJson(acls)
    return
  }
  out(
    table(
      ['RESOURCE TYPE', 'NAME', 'PATTERN', 'PRINCIPAL', 'HOST', 'OPERATION', 'PERMISSION'],
      acls.map((a) => [
        a.resourceType,
        a.resourceName,
        a.patternType,
        a.principal,
        a.host,
        a.operation,
        a.permissionType,
      ]),
    ),
  )
}

function resources(values: Values): Resource[] {
  const named: Resource[] = [
    ...(values.topic ?? []).map((name) => ({ resourceType: 'TOPIC' as const, resourceName: name })),
    ...(values.group ?? []).map((name) => ({ resourceType: 'GROUP' as const, resourceName: name })),
    ...(values['transactional-id'] ?? []).map((name) => ({
      resourceType: 'TRANSACTIONAL_ID' as const,
      resourceName: name,
    })),
    ...(values.cluster ? [{ resourceType: 'CLUSTER' as const, resourceName: 'kafka-cluster' }] : []),
  ]
  for (const r of named) if (r.resourceName === '') throw new UsageError(`an empty ${r.resourceType} name`)
  return named
}

/** Kafka's CamelCase names (IdempotentWrite) or the enum's (IDEMPOTENT_WRITE), any case. */
function operations(values: Values, fallback: 'ALL' | 'ANY'): (AclOperationName | 'ANY')[] {
  const given = values.operation ?? []
  if (given.length === 0) return [fallback]
  const byKey = new Map(
    Object.keys(AclOperation)
      .filter((name) => name !== 'UNKNOWN')
      .map((name) => [name.replaceAll('_', '').toLowerCase(), name as AclOperationName | 'ANY']),
  )
  return given.map((op) => {
    const name = byKey.get(op.replaceAll('_', '').replaceAll('-', '').toLowerCase())
    if (name === undefined || (fallback === 'ALL' && name === 'ANY'))
      throw new UsageError(`unknown operation '${op}' (see --help for the list)`)
    return name
  })
}

function patternType(
  values: Values,
  sub: 'add' | 'list' | 'remove',
  named: boolean,
): AclFilter['patternType'] {
  const given = values['resource-pattern-type']?.toUpperCase()
  if (given === undefined) return sub === 'add' || named ? 'LITERAL' : 'ANY'
  if (given !== 'LITERAL' && given !== 'PREFIXED' && given !== 'ANY' && given !== 'MATCH')
    throw new UsageError(`--resource-pattern-type expects literal, prefixed, any or match, got '${given}'`)
  if (sub === 'add' && (given === 'ANY' || given === 'MATCH'))
    throw new UsageError(
      `acls add needs --resource-pattern-type literal or prefixed, not ${given.toLowerCase()}`,
    )
  return given
}

function checkPrincipal(principal: string): string {
  const colon = principal.indexOf(':')
  if (colon <= 0 || colon === principal.length - 1)
    throw new UsageError(`a principal is TYPE:NAME (User:alice, User:*), got '${principal}'`)
  return principal
}

/** Each principal with its permission and hosts. */
function grants(values: Values): { principal: string; permissionType: 'ALLOW' | 'DENY'; hosts: string[] }[] {
  return [
    ...(values['allow-principal'] ?? []).map((p) => ({
      principal: checkPrincipal(p),
      permissionType: 'ALLOW' as const,
      hosts: values['allow-host'] ?? ['*'],
    })),
    ...(values['deny-principal'] ?? []).map((p) => ({
      principal: checkPrincipal(p),
      permissionType: 'DENY' as const,
      hosts: values['deny-host'] ?? ['*'],
    })),
  ]
}

function aclsToAdd(values: Values): Acl[] {
  const targets = resources(values)
  if (targets.length === 0)
    throw new UsageError('acls add needs a resource: --topic, --group, --transactional-id or --cluster')
  const who = grants(values)
  if (who.length === 0) throw new UsageError('acls add needs --allow-principal or --deny-principal')
  const pattern = patternType(values, 'add', true) as Acl['patternType']
  const ops = operations(values, 'ALL') as AclOperationName[]
  const acls: Acl[] = []
  for (const resource of targets)
    for (const grant of who)
      for (const host of grant.hosts)
        for (const operation of ops)
          acls.push({
            ...resource,
            patternType: pattern,
            principal: grant.principal,
            host,
            operation,
            permissionType: grant.permissionType,
          })
  return acls
}

function anyResourceOr(
  values: Values,
  sub: 'list' | 'remove',
): (Resource | { resourceType: 'ANY'; resourceName: null })[] {
  const targets = resources(values)
  if (targets.length > 0) return targets
  if (sub === 'remove')
    throw new UsageError('acls remove needs a resource: --topic, --group, --transactional-id or --cluster')
  return [{ resourceType: 'ANY', resourceName: null }]
}

function listFilters(values: Values): AclFilter[] {
  const targets = anyResourceOr(values, 'list')
  const pattern = patternType(values, 'list', targets[0].resourceType !== 'ANY')
  const principals = values.principal?.map(checkPrincipal) ?? [null]
  const filters: AclFilter[] = []
  for (const resource of targets)
    for (const principal of principals)
      for (const operation of operations(values, 'ANY'))
        filters.push({
          ...resource,
          patternType: pattern,
          principal,
          host: null,
          operation,
          permissionType: 'ANY',
        })
  return filters
}

function removeFilters(values: Values): AclFilter[] {
  const targets = anyResourceOr(values, 'remove')
  const pattern = patternType(values, 'remove', true)
  const who = grants(values)
  const filters: AclFilter[] = []
  for (const resource of targets)
    for (const operation of operations(values, 'ANY')) {
      if (who.length === 0) {
        filters.push({
          ...resource,
          patternType: pattern,
          principal: null,
          host: null,
          operation,
          permissionType: 'ANY',
        })
        continue
      }
      for (const grant of who)
        for (const host of grant.hosts)
          filters.push({
            ...resource,
            patternType: pattern,
            principal: grant.principal,
            host,
            operation,
            permissionType: grant.permissionType,
          })
    }
  return filters
}

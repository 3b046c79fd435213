/**
 * `tidelog quotas describe|alter`, after kafka-configs.sh --entity-type users/clients:
 *   describe   the quotas of the entities matching --user/--client-id (a name, or
 *              --user-default/--client-default for the defaults; neither: any), --strict
 *              for entities of no other type (DescribeClientQuotas)
 *   alter      --add-config k=v[,k=v] and --delete-config k[,k] on one entity: a user, a
 *              client id, or both; --validate-only checks without changing (AlterClientQuotas)
 * Quota keys: producer_byte_rate, consumer_byte_rate (bytes/s), request_percentage.
 */
import { parseArgs } from 'node:util'
import { Admin, type ClientQuotaEntity, type ClientQuotaFilterComponent } from '../../client/admin.js'
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

export const QUOTAS_USAGE = `Usage: tidelog quotas <describe|alter> [options]

  describe   [--user NAME | --user-default] [--client-id ID | --client-default] [--strict]
  alter      (--user NAME | --user-default) and/or (--client-id ID | --client-default)
             [--add-config KEY=VALUE[,KEY=VALUE]] [--delete-config KEY[,KEY]] [--validate-only]

Keys: producer_byte_rate and consumer_byte_rate (bytes per second, whole numbers),
request_percentage (percent of one request thread). A user is the authenticated principal's
name (ANONYMOUS on PLAINTEXT listeners). Precedence, most specific first: user + client id,
user + default client id, user, default user + client id, default user + default client id,
default user, client id, default client id (docs/quotas.md).
Common: --bootstrap-server HOST:PORT (default 127.0.0.1:9092), --command-config FILE, --json
`

const OPTIONS = {
  ...COMMON_OPTIONS,
  user: { type: 'string' },
  'user-default': { type: 'boolean', default: false },
  'client-id': { type: 'string' },
  'client-default': { type: 'boolean', default: false },
  strict: { type: 'boolean', default: false },
  'add-config': { type: 'string', multiple: true },
  'delete-config': { type: 'string', multiple: true },
  'validate-only': { type: 'boolean', default: false },
} as const

export async function quotasCommand(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv
  return guarded(`quotas ${sub ?? ''}`.trim(), async () => {
    const { values, positionals } = parseArgs({
      args: rest,
      options: OPTIONS,
      allowPositionals: true,
      strict: true,
    })
    if (values.help || sub === undefined || isHelp(sub)) {
      process.stdout.write(QUOTAS_USAGE)
      return sub === undefined ? EXIT_USAGE : EXIT_OK
    }
    if (sub !== 'describe' && sub !== 'alter') throw new UsageError(`unknown quotas subcommand '${sub}'`)
    if (positionals.length > 0)
      throw new UsageError(`quotas ${sub} takes no argument, got '${positionals.join(' ')}'`)
    const user = entityName(values.user, values['user-default'], '--user', '--user-default')
    const clientId = entityName(
      values['client-id'],
      values['client-default'],
      '--client-id',
      '--client-default',
    )
    const admin = new Admin(
      clientOptions(values['bootstrap-server'], 'tidelog-cli', values['command-config']),
    )
    try {
      if (sub === 'alter') {
        if (user === undefined && clientId === undefined)
          throw new UsageError('quotas alter needs --user, --user-default, --client-id or --client-default')
        const ops = [
          ...parseAdds(values['add-config']),
          ...splitList(values['delete-config']).map((key) => ({ key, value: null })),
        ]
        if (ops.length === 0) throw new UsageError('quotas alter needs --add-config or --delete-config')
        const entity: ClientQuotaEntity = {
          ...(user !== undefined ? { user } : {}),
          ...(clientId !== undefined ? { clientId } : {}),
        }
        await admin.alterClientQuotas([{ entity, ops }], { validateOnly: values['validate-only'] })
        if (values.json) printJson({ entity, ops, validateOnly: values['validate-only'] })
        else out(`${values['validate-only'] ? 'Validated' : 'Altered'} the quotas of ${entityText(entity)}.`)
        return EXIT_OK
      }
      const components: ClientQuotaFilterComponent[] = []
      if (user !== undefined) components.push({ entityType: 'user', match: user })
      if (clientId !== undefined) components.push({ entityType: 'client-id', match: clientId })
      const described = await admin.describeClientQuotas(components, { strict: values.strict })
      described.sort((a, b) => (entityText(a.entity) < entityText(b.entity) ? -1 : 1))
      if (values.json) printJson(described)
      else
        out(
          table(
            ['ENTITY', 'QUOTAS'],
            described.map((d) => [
              entityText(d.entity),
              Object.entries(d.values)
                .map(([k, v]) => `${k}=${v}`)
                .join(','),
            ]),
          ),
        )
      return EXIT_OK
    } finally {
      admin.close()
    }
  })
}

/** A name, null for the default, undefined when neither flag is given. */
function entityName(name: string | undefined, isDefault: boolean, flag: string, defaultFlag: string) {
  if (name !== undefined && isDefault) throw new UsageError(`${flag} and ${defaultFlag} exclude each other`)
  if (name === '') throw new UsageError(`${flag} needs a name (${defaultFlag} names the default)`)
  return isDefault ? null : name
}

function splitList(values: readonly string[] | undefined): string[] {
  return (values ?? [])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '')
}

function parseAdds(values: readonly string[] | undefined): { key: string; value: number }[] {
  return splitList(values).map((item) => {
    const eq = item.indexOf('=')
    const value = Number(item.slice(eq + 1))
    if (eq <= 0 || item.slice(eq + 1).trim() === '' || !Number.isFinite(value))
      throw new UsageError(`--add-config expects KEY=NUMBER, got '${item}'`)
    return { key: item.slice(0, eq), value }
  })
}

function entityText(entity: ClientQuotaEntity): string {
  const parts: string[] = []
  if (entity.user !== undefined) parts.push(`user=${entity.user ?? '<default>'}`)
  if (entity.clientId !== undefined) parts.push(`client-id=${entity.clientId ?? '<default>'}`)
  return parts.join(',')
}

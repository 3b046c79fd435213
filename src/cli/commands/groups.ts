/**
 * `tidelog groups list|describe|reset-offsets`. tidelog brokers do not serve the group
 * APIs yet, and this client has no group membership yet: against a broker without them
 * the command says so (exit 4); against one with them `list` works and the others say the
 * client side is still missing.
 */
import { parseArgs } from 'node:util'
import { Admin } from '../../client/admin.js'
import { GroupsNotSupportedError, UnsupportedApiError } from '../../client/errors.js'
import {
  COMMON_OPTIONS,
  clientOptions,
  EXIT_OK,
  EXIT_USAGE,
  guarded,
  out,
  printJson,
  table,
  UsageError,
} from './common.js'

export const GROUPS_USAGE = `Usage: tidelog groups <list|describe|reset-offsets> [--group G] [--bootstrap-server HOST:PORT] [--json]

Consumer groups need the broker's group coordinator (FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, OffsetCommit, OffsetFetch); tidelog brokers do not serve them yet.
`

export async function groupsCommand(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv
  return guarded(`groups ${sub ?? ''}`.trim(), async () => {
    const { values } = parseArgs({
      args: rest,
      options: {
        ...COMMON_OPTIONS,
        group: { type: 'string', short: 'g' },
        'to-earliest': { type: 'boolean' },
        'to-latest': { type: 'boolean' },
        topic: { type: 'string' },
      },
      strict: true,
    })
    if (values.help || sub === undefined || sub === 'help') {
      process.stdout.write(GROUPS_USAGE)
      return sub === undefined ? EXIT_USAGE : EXIT_OK
    }
    if (!['list', 'describe', 'reset-offsets'].includes(sub))
      throw new UsageError(`unknown groups subcommand '${sub}'`)
    const admin = new Admin(clientOptions(values['bootstrap-server'], 'tidelog-cli'))
    try {
      if (!(await admin.supportsGroups()))
        throw new GroupsNotSupportedError('FindCoordinator/JoinGroup/OffsetCommit')
      if (sub !== 'list')
        throw new UnsupportedApiError(
          'DescribeGroups',
          `groups ${sub} is not implemented in this client yet (it lands with the groups issue)`,
        )
      const groups = await admin.listGroups()
      if (values.json) printJson(groups)
      else
        out(
          table(
            ['GROUP', 'PROTOCOL', 'STATE'],
            groups.map((g) => [g.groupId, g.protocolType, g.state]),
          ),
        )
      return EXIT_OK
    } finally {
      admin.close()
    }
  })
}

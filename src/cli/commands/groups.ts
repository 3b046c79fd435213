/**
 * `tidelog groups list|describe|reset-offsets`, after Kafka's kafka-consumer-groups.sh.
 *   list            the groups of the cluster (ListGroups)
 *   describe        state, members and their assignments, and per partition the committed
 *                   offset, the log end offset and the lag (DescribeGroups, OffsetFetch,
 *                   ListOffsets)
 *   reset-offsets   computes new committed offsets for a topic (earliest, latest, an offset,
 *                   a time) and prints them; commits them only with --execute, and only
 *                   while the group has no active member (OffsetCommit from outside the
 *                   group: generation -1, no member id)
 * Against a broker without the group APIs every subcommand says so (exit 4).
 */
import { parseArgs } from 'node:util'
import { Admin, type GroupDescription, type GroupOffset } from '../../client/admin.js'
import { GroupsNotSupportedError } from '../../client/errors.js'
import type { OffsetSpec } from '../../client/offsets.js'
import { TidelogError } from '../../common/errors.js'
import {
  COMMON_OPTIONS,
  clientOptions,
  colour,
  EXIT_FAILED,
  EXIT_OK,
  EXIT_USAGE,
  guarded,
  isHelp,
  oneTopic,
  out,
  parseInteger,
  printJson,
  table,
  UsageError,
} from './common.js'

export const GROUPS_USAGE = `Usage: tidelog groups <list|describe|reset-offsets> [options]

  list
  describe       --group G
  reset-offsets  --group G [--topic] T (--to-earliest | --to-latest | --to-offset N | --to-datetime ISO)
                 [--execute]   (without it: a dry run that only prints the new offsets)

reset-offsets refuses while the group has active members (stop its consumers first).
Common: --bootstrap-server HOST:PORT (default 127.0.0.1:9092), --command-config FILE, --json
`

const OPTIONS = {
  ...COMMON_OPTIONS,
  group: { type: 'string', short: 'g' },
  topic: { type: 'string', short: 't' },
  'to-earliest': { type: 'boolean', default: false },
  'to-latest': { type: 'boolean', default: false },
  'to-offset': { type: 'string' },
  'to-datetime': { type: 'string' },
  execute: { type: 'boolean', default: false },
  'dry-run': { type: 'boolean', default: false },
} as const

type Values = ReturnType<typeof parse>['values']

function parse(args: readonly string[]) {
  return parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true, strict: true })
}

export async function groupsCommand(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv
  return guarded(`groups ${sub ?? ''}`.trim(), async () => {
    const { values, positionals } = parse(rest)
    if (values.help || sub === undefined || isHelp(sub)) {
      process.stdout.write(GROUPS_USAGE)
      return sub === undefined ? EXIT_USAGE : EXIT_OK
    }
    if (!['list', 'describe', 'reset-offsets'].includes(sub))
      throw new UsageError(`unknown groups subcommand '${sub}'`)
    if (sub !== 'list' && !values.group) throw new UsageError(`groups ${sub} needs --group G`)
    // Only a topic may be given as an argument, where --topic is taken (reset-offsets).
    if (sub !== 'reset-offsets' && positionals.length > 0)
      throw new UsageError(`groups ${sub} takes no argument, got '${positionals.join(' ')}'`)
    const admin = new Admin(
      clientOptions(values['bootstrap-server'], 'tidelog-cli', values['command-config']),
    )
    try {
      if (!(await admin.supportsGroups()))
        throw new GroupsNotSupportedError('FindCoordinator/JoinGroup/OffsetCommit')
      if (sub === 'describe') return await describe(admin, values.group as string, values.json)
      if (sub === 'reset-offsets')
        return await resetOffsets(admin, values, oneTopic(values.topic, positionals))
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

interface PartitionLag {
  topic: string
  partition: number
  /** null: nothing committed. */
  currentOffset: number | null
  logEndOffset: number
  lag: number | null
  memberId: string | null
  clientId: string | null
  host: string | null
}

const key = (topic: string, partition: number) => `${topic}\u0000${partition}`

async function describe(admin: Admin, groupId: string, json: boolean): Promise<number> {
  const [group] = await admin.describeGroups([groupId])
  const committed = await admin.listGroupOffsets(groupId)
  if (group.state === 'Dead' && committed.length === 0) {
    process.stderr.write(
      `${colour.red('error')}: tidelog groups describe: consumer group '${groupId}' does not exist\n`,
    )
    return EXIT_FAILED
  }
  const rows = new Map<string, PartitionLag>()
  const add = (topic: string, partition: number): PartitionLag => {
    let row = rows.get(key(topic, partition))
    if (!row) {
      row = {
        topic,
        partition,
        currentOffset: null,
        logEndOffset: -1,
        lag: null,
        memberId: null,
        clientId: null,
        host: null,
      }
      rows.set(key(topic, partition), row)
    }
    return row
  }
  for (const o of committed) if (o.offset >= 0) add(o.topic, o.partition).currentOffset = o.offset
  for (const m of group.members)
    for (const tp of m.assignment)
      Object.assign(add(tp.topic, tp.partition), {
        memberId: m.memberId,
        clientId: m.clientId,
        host: m.clientHost,
      })
  const lags = [...rows.values()].sort((a, b) => a.topic.localeCompare(b.topic) || a.partition - b.partition)
  if (lags.length > 0) {
    const ends = await admin.listOffsets(
      lags.map((r) => ({ topic: r.topic, partition: r.partition, spec: 'latest' })),
    )
    for (const end of ends) {
      const row = rows.get(key(end.topic, end.partition))
      if (!row) continue
      row.logEndOffset = end.offset
      if (row.currentOffset !== null) row.lag = Math.max(0, end.offset - row.currentOffset)
    }
  }
  if (json) {
    printJson({ ...group, offsets: lags })
    return EXIT_OK
  }
  printGroupHeader(group)
  if (group.members.length > 0) {
    out()
    out(
      table(
        ['MEMBER-ID', 'CLIENT-ID', 'HOST', 'INSTANCE-ID', 'ASSIGNMENT'],
        group.members.map((m) => [
          m.memberId,
          m.clientId,
          m.clientHost,
          m.groupInstanceId ?? '-',
          formatAssignment(m.assignment) || '-',
        ]),
      ),
    )
  }
  if (lags.length > 0) {
    out()
    out(
      table(
        ['TOPIC', 'PARTITION', 'CURRENT-OFFSET', 'LOG-END-OFFSET', 'LAG', 'MEMBER-ID', 'CLIENT-ID'],
        lags.map((r) => [
          r.topic,
          String(r.partition),
          r.currentOffset === null ? '-' : String(r.currentOffset),
          r.logEndOffset < 0 ? '-' : String(r.logEndOffset),
          r.lag === null ? '-' : String(r.lag),
          r.memberId ?? '-',
          r.clientId ?? '-',
        ]),
      ),
    )
  }
  return EXIT_OK
}

function printGroupHeader(group: GroupDescription): void {
  const protocol = group.protocolType
    ? `${group.protocolType}${group.protocol ? `/${group.protocol}` : ''}`
    : '-'
  out(
    `Group: ${group.groupId}  State: ${group.state}  Protocol: ${protocol}  Coordinator: ${group.coordinator}  Members: ${group.members.length}`,
  )
}

/** "orders: 0,1  payments: 3" */
function formatAssignment(assignment: readonly { topic: string; partition: number }[]): string {
  const byTopic = new Map<string, number[]>()
  for (const tp of assignment) byTopic.set(tp.topic, [...(byTopic.get(tp.topic) ?? []), tp.partition])
  return [...byTopic]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([topic, partitions]) => `${topic}: ${partitions.sort((a, b) => a - b).join(',')}`)
    .join('  ')
}

type ResetTarget =
  | { kind: 'earliest' }
  | { kind: 'latest' }
  | { kind: 'offset'; offset: number }
  | { kind: 'datetime'; timestamp: number }

function resetTarget(values: Values): ResetTarget {
  const chosen = [
    values['to-earliest'] ? '--to-earliest' : null,
    values['to-latest'] ? '--to-latest' : null,
    values['to-offset'] !== undefined ? '--to-offset' : null,
    values['to-datetime'] !== undefined ? '--to-datetime' : null,
  ].filter((c) => c !== null)
  if (chosen.length !== 1)
    throw new UsageError(
      `reset-offsets needs exactly one of --to-earliest, --to-latest, --to-offset N, --to-datetime ISO${chosen.length > 1 ? ` (got ${chosen.join(', ')})` : ''}`,
    )
  if (values['to-earliest']) return { kind: 'earliest' }
  if (values['to-latest']) return { kind: 'latest' }
  if (values['to-offset'] !== undefined)
    return { kind: 'offset', offset: parseInteger(values['to-offset'], '--to-offset') as number }
  const text = values['to-datetime'] as string
  const timestamp = Date.parse(text)
  if (!Number.isFinite(timestamp))
    throw new UsageError(`--to-datetime expects an ISO 8601 time (e.g. 2026-01-31T12:00:00Z), got '${text}'`)
  return { kind: 'datetime', timestamp }
}

async function resetOffsets(admin: Admin, values: Values, topic: string): Promise<number> {
  const groupId = values.group as string
  if (values.execute && values['dry-run']) throw new UsageError('--execute and --dry-run exclude each other')
  const target = resetTarget(values)
  const [group] = await admin.describeGroups([groupId])
  if (group.state !== 'Empty' && group.state !== 'Dead')
    throw new TidelogError(
      'ERR_GROUP_ACTIVE',
      `offsets can only be reset while group '${groupId}' is inactive, but it is ${group.state} with ${group.members.length} member(s): stop its consumers first`,
    )
  const [description] = await admin.describeTopics([topic])
  const partitions = description.partitions.map((p) => p.partition).sort((a, b) => a - b)
  const listed = async (spec: OffsetSpec) =>
    new Map(
      (await admin.listOffsets(partitions.map((partition) => ({ topic, partition, spec })))).map((o) => [
        o.partition,
        o.offset,
      ]),
    )
  const [earliest, latest] = await Promise.all([listed('earliest'), listed('latest')])
  const byTime = target.kind === 'datetime' ? await listed(target.timestamp) : null
  const current = new Map<number, GroupOffset>(
    (await admin.listGroupOffsets(groupId, [topic])).map((o) => [o.partition, o]),
  )
  const plan = partitions.map((partition) => {
    const low = earliest.get(partition) ?? 0
    const high = latest.get(partition) ?? 0
    let offset: number
    if (target.kind === 'earliest') offset = low
    else if (target.kind === 'latest') offset = high
    else if (target.kind === 'offset') offset = Math.min(Math.max(target.offset, low), high)
    else {
      const found = byTime?.get(partition) ?? -1
      offset = found < 0 ? high : found
    }
    const was = current.get(partition)?.offset ?? -1
    return { topic, partition, currentOffset: was < 0 ? null : was, newOffset: offset }
  })
  if (values.execute)
    await admin.alterGroupOffsets(
      groupId,
      plan.map((p) => ({ topic, partition: p.partition, offset: p.newOffset })),
    )
  if (values.json) {
    printJson({ groupId, executed: values.execute, offsets: plan })
    return EXIT_OK
  }
  out(
    table(
      ['GROUP', 'TOPIC', 'PARTITION', 'CURRENT-OFFSET', 'NEW-OFFSET'],
      plan.map((p) => [
        groupId,
        p.topic,
        String(p.partition),
        p.currentOffset === null ? '-' : String(p.currentOffset),
        String(p.newOffset),
      ]),
    ),
  )
  out()
  out(
    values.execute
      ? `Reset the offsets of group ${groupId} on ${topic} (${plan.length} partitions).`
      : colour.yellow(
          `Dry run: nothing was committed; add --execute to reset the offsets of group ${groupId}.`,
        ),
  )
  return EXIT_OK
}

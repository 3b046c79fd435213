/**
 * `tidelog topics create|list|describe|alter|delete`, after kafka-topics.sh: the topic is
 * named by --topic (or as the first argument), describe shows leader, replicas, ISR, the
 * high watermark and the last stable offset (below the HW while a transaction is open in
 * the partition) and flags offline and under-replicated partitions.
 */
import { parseArgs } from 'node:util'
import { Admin, type TopicDescription } from '../../client/admin.js'
import { KafkaProtocolError } from '../../client/errors.js'
import type { PartitionInfo } from '../../client/metadata.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  COMMON_OPTIONS,
  clientOptions,
  colour,
  EXIT_OK,
  EXIT_USAGE,
  guarded,
  isHelp,
  namedTopics,
  oneTopic,
  out,
  parseInteger,
  parsePairs,
  printJson,
  table,
  UsageError,
} from './common.js'

export const TOPICS_USAGE = `Usage: tidelog topics <create|list|describe|alter|delete> [options]

  create   [--topic] T [--partitions N] [--replication-factor N] [--config k=v]... [--if-not-exists]
  list     [--include-internal]
  describe [[--topic] T]... [--under-replicated-partitions] [--unavailable-partitions]
  alter    [--topic] T [--partitions N] [--config k=v]... [--delete-config k]...
  delete   [--topic] T [--if-exists]

Common: --bootstrap-server HOST:PORT (default 127.0.0.1:9092), --command-config FILE, --json
`

const OPTIONS = {
  ...COMMON_OPTIONS,
  topic: { type: 'string', short: 't', multiple: true },
  partitions: { type: 'string' },
  'replication-factor': { type: 'string' },
  config: { type: 'string', multiple: true },
  'delete-config': { type: 'string', multiple: true },
  'if-not-exists': { type: 'boolean', default: false },
  'if-exists': { type: 'boolean', default: false },
  'include-internal': { type: 'boolean', default: false },
  'under-replicated-partitions': { type: 'boolean', default: false },
  'unavailable-partitions': { type: 'boolean', default: false },
} as const

type Values = ReturnType<typeof parse>['values']

function parse(args: readonly string[]) {
  return parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true, strict: true })
}

export async function topicsCommand(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv
  return guarded(`topics ${sub ?? ''}`.trim(), async () => {
    const { values, positionals } = parse(rest)
    if (values.help || sub === undefined || isHelp(sub)) {
      process.stdout.write(TOPICS_USAGE)
      return sub === undefined ? EXIT_USAGE : EXIT_OK
    }
    const topics = namedTopics(values.topic, positionals)
    const admin = new Admin(
      clientOptions(values['bootstrap-server'], 'tidelog-cli', values['command-config']),
    )
    try {
      switch (sub) {
        case 'create':
          return await create(admin, one(topics), values)
        case 'list':
          return await list(admin, values)
        case 'describe':
          return await describe(admin, topics, values)
        case 'alter':
          return await alter(admin, one(topics), values)
        case 'delete':
          return await remove(admin, one(topics), values)
        default:
          throw new UsageError(`unknown topics subcommand '${sub}'`)
      }
    } finally {
      admin.close()
    }
  })
}

function one(topics: readonly string[]): string {
  return oneTopic(topics, [])
}

async function create(admin: Admin, topic: string, values: Values): Promise<number> {
  const configs = Object.fromEntries(parsePairs(values.config, '--config'))
  try {
    await admin.createTopics([
      {
        topic,
        numPartitions: parseInteger(values.partitions, '--partitions', 1) ?? -1,
        replicationFactor: parseInteger(values['replication-factor'], '--replication-factor', 1) ?? -1,
        configs,
      },
    ])
  } catch (error) {
    const exists = error instanceof KafkaProtocolError && error.errorCode === ErrorCode.TOPIC_ALREADY_EXISTS
    if (!exists || !values['if-not-exists']) throw error
    return report(values, { topic, created: false, reason: 'exists' }, `Topic ${topic} already exists.`)
  }
  return report(values, { topic, created: true }, `Created topic ${colour.bold(topic)}.`)
}

async function list(admin: Admin, values: Values): Promise<number> {
  const names = await admin.listTopics({ includeInternal: values['include-internal'] })
  if (values.json) printJson(names)
  else for (const name of names) out(name)
  return EXIT_OK
}

type PartitionState = 'ok' | 'under-replicated' | 'offline'

function stateOf(p: PartitionInfo): PartitionState {
  if (p.leader < 0) return 'offline'
  return p.isr.length < p.replicas.length ? 'under-replicated' : 'ok'
}

async function describe(admin: Admin, topics: readonly string[], values: Values): Promise<number> {
  const descriptions = await admin.describeTopics(topics.length > 0 ? topics : undefined)
  const wanted = (p: PartitionInfo): boolean => {
    const state = stateOf(p)
    if (values['under-replicated-partitions'] && state !== 'under-replicated') return false
    if (values['unavailable-partitions'] && state !== 'offline') return false
    return true
  }
  const filtering = values['under-replicated-partitions'] || values['unavailable-partitions']
  const filtered = descriptions
    .filter((d) => values['include-internal'] || !d.isInternal || topics.length > 0)
    .map((d) => ({ ...d, partitions: d.partitions.filter(wanted) }))
    // With a health filter, topics without such partitions are left out (as kafka-topics.sh).
    .filter((d) => !filtering || d.partitions.length > 0)
  const offsets = await stableOffsets(admin, filtered)
  if (values.json) {
    printJson(
      filtered.map((d) => ({
        ...d,
        partitions: d.partitions.map((p) => ({
          ...p,
          state: stateOf(p),
          highWatermark: offsets.get(`${d.name}/${p.partition}`)?.highWatermark ?? null,
          lastStableOffset: offsets.get(`${d.name}/${p.partition}`)?.lastStableOffset ?? null,
        })),
      })),
    )
    return EXIT_OK
  }
  const all = new Map(descriptions.map((d) => [d.name, d]))
  for (const d of filtered) printTopic(all.get(d.name)!, d.partitions, offsets)
  return EXIT_OK
}

type Offsets = Map<string, { highWatermark: number; lastStableOffset: number }>

/**
 * Each led partition's high watermark (ListOffsets latest) and last stable offset
 * (latest with read_committed); a partition whose leader does not answer is left out.
 */
async function stableOffsets(admin: Admin, topics: readonly TopicDescription[]): Promise<Offsets> {
  const offsets: Offsets = new Map()
  const queries = topics.flatMap((d) =>
    d.partitions
      .filter((p) => p.leader >= 0)
      .map((p) => ({ topic: d.name, partition: p.partition, spec: 'latest' as const })),
  )
  const both = async (batch: typeof queries): Promise<void> => {
    const hws = await admin.listOffsets(batch, 'read_uncommitted')
    const lsos = new Map(
      (await admin.listOffsets(batch, 'read_committed')).map((o) => [`${o.topic}/${o.partition}`, o.offset]),
    )
    for (const hw of hws) {
      const lso = lsos.get(`${hw.topic}/${hw.partition}`)
      if (lso !== undefined)
        offsets.set(`${hw.topic}/${hw.partition}`, { highWatermark: hw.offset, lastStableOffset: lso })
    }
  }
  try {
    if (queries.length > 0) await both(queries)
  } catch {
    // One failing partition fails the batch: ask one by one, leaving out those that fail
    // (a leader that moved or went away; the row shows '-', its STATUS says why).
    for (const query of queries) await both([query]).catch(() => undefined)
  }
  return offsets
}

/** The topic line counts all its partitions; the table shows `shown` (all, or those a filter kept). */
function printTopic(d: TopicDescription, shown: readonly PartitionInfo[], offsets: Offsets): void {
  const rf = d.partitions[0]?.replicas.length ?? 0
  const offline = d.partitions.filter((p) => stateOf(p) === 'offline').length
  const under = d.partitions.filter((p) => stateOf(p) === 'under-replicated').length
  const open = shown.filter((p) => {
    const o = offsets.get(`${d.name}/${p.partition}`)
    return o !== undefined && o.lastStableOffset < o.highWatermark
  }).length
  const health = [
    offline > 0 ? colour.red(`${offline} offline`) : '',
    under > 0 ? colour.yellow(`${under} under-replicated`) : '',
    open > 0 ? `${open} with open transactions` : '',
  ].filter(Boolean)
  out(
    `${colour.bold(`Topic: ${d.name}`)}  TopicId: ${d.topicId}  PartitionCount: ${d.partitions.length}  ReplicationFactor: ${rf}${health.length ? `  ${health.join(', ')}` : ''}`,
  )
  const rows = shown.map((p) => {
    const state = stateOf(p)
    const painted =
      state === 'ok' ? colour.green(state) : state === 'offline' ? colour.red(state) : colour.yellow(state)
    return [
      String(p.partition),
      p.leader < 0 ? 'none' : String(p.leader),
      String(p.leaderEpoch),
      p.replicas.join(','),
      p.isr.join(','),
      p.offlineReplicas.join(',') || '-',
      String(offsets.get(`${d.name}/${p.partition}`)?.highWatermark ?? '-'),
      String(offsets.get(`${d.name}/${p.partition}`)?.lastStableOffset ?? '-'),
      painted,
    ]
  })
  out(table(['PARTITION', 'LEADER', 'EPOCH', 'REPLICAS', 'ISR', 'OFFLINE', 'HW', 'LSO', 'STATUS'], rows))
  out()
}

async function alter(admin: Admin, topic: string, values: Values): Promise<number> {
  const partitions = parseInteger(values.partitions, '--partitions', 1)
  const sets = parsePairs(values.config, '--config')
  const deletes = values['delete-config'] ?? []
  if (partitions === undefined && sets.length === 0 && deletes.length === 0) {
    throw new UsageError('alter needs --partitions, --config or --delete-config')
  }
  if (partitions !== undefined) await admin.createPartitions([{ topic, count: partitions }])
  if (sets.length > 0 || deletes.length > 0) {
    const ops = [
      ...sets.map(([name, value]) => ({ name, op: 'set' as const, value })),
      ...deletes.map((name) => ({ name, op: 'delete' as const })),
    ]
    await admin.incrementalAlterConfigs([{ type: 'topic', name: topic, ops }])
  }
  const changes = [
    partitions !== undefined ? `partitions=${partitions}` : '',
    ...sets.map(([k, v]) => `${k}=${v}`),
    ...deletes.map((k) => `-${k}`),
  ].filter(Boolean)
  return report(
    values,
    { topic, altered: changes },
    `Altered topic ${colour.bold(topic)}: ${changes.join(', ')}.`,
  )
}

async function remove(admin: Admin, topic: string, values: Values): Promise<number> {
  try {
    await admin.deleteTopics([topic])
  } catch (error) {
    const missing =
      error instanceof KafkaProtocolError && error.errorCode === ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if (!missing || !values['if-exists']) throw error
    return report(values, { topic, deleted: false, reason: 'missing' }, `Topic ${topic} does not exist.`)
  }
  return report(values, { topic, deleted: true }, `Deleted topic ${colour.bold(topic)}.`)
}

function report(values: Values, json: unknown, text: string): number {
  if (values.json) printJson(json)
  else out(text)
  return EXIT_OK
}

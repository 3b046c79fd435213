/**
 * `tidelog cluster describe`: cluster id, controller, brokers, and a partition health
 * summary (offline and under-replicated partitions across all topics).
 */
import { parseArgs } from 'node:util'
import { Admin } from '../../client/admin.js'
import {
  COMMON_OPTIONS,
  clientOptions,
  colour,
  EXIT_OK,
  EXIT_USAGE,
  guarded,
  isHelp,
  out,
  printJson,
  table,
  UsageError,
} from './common.js'

export const CLUSTER_USAGE = `Usage: tidelog cluster describe [--bootstrap-server HOST:PORT] [--command-config FILE] [--json]
`

export async function clusterCommand(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv
  return guarded('cluster', async () => {
    const { values } = parseArgs({ args: rest, options: COMMON_OPTIONS, strict: true })
    if (values.help || sub === undefined || isHelp(sub)) {
      process.stdout.write(CLUSTER_USAGE)
      return sub === undefined ? EXIT_USAGE : EXIT_OK
    }
    if (sub !== 'describe') throw new UsageError(`unknown cluster subcommand '${sub}'`)
    const admin = new Admin(
      clientOptions(values['bootstrap-server'], 'tidelog-cli', values['command-config']),
    )
    try {
      const cluster = await admin.describeCluster()
      const topics = await admin.describeTopics()
      const partitions = topics.flatMap((t) => t.partitions)
      const offline = partitions.filter((p) => p.leader < 0).length
      const under = partitions.filter((p) => p.leader >= 0 && p.isr.length < p.replicas.length).length
      const groups = await admin.supportsGroups()
      const summary = {
        topics: topics.length,
        partitions: partitions.length,
        offlinePartitions: offline,
        underReplicatedPartitions: under,
      }
      if (values.json) {
        printJson({ ...cluster, ...summary, consumerGroups: groups })
        return EXIT_OK
      }
      out(
        `${colour.bold('Cluster')}: ${cluster.clusterId ?? 'unknown'}   Controller: ${cluster.controllerId}`,
      )
      out(
        table(
          ['ID', 'HOST', 'PORT', 'RACK', 'ROLE'],
          cluster.brokers.map((b) => [
            String(b.nodeId),
            b.host,
            String(b.port),
            b.rack ?? '-',
            b.nodeId === cluster.controllerId ? 'controller' : '',
          ]),
        ),
      )
      const health = `${offline > 0 ? colour.red(`${offline} offline`) : '0 offline'}, ${under > 0 ? colour.yellow(`${under} under-replicated`) : '0 under-replicated'}`
      out(
        `Topics: ${topics.length}   Partitions: ${partitions.length} (${health})   Consumer groups: ${groups ? 'supported' : 'not supported by this broker yet'}`,
      )
      return EXIT_OK
    } finally {
      admin.close()
    }
  })
}

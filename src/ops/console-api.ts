/**
 * The console's JSON API. It reads what `tidelog cluster|topics|groups|consume` read, the
 * same way: tidelog's own Admin and Consumer over the Kafka protocol, bootstrapped at this
 * broker. The broker's in-process state is used only where Kafka's protocol has no answer
 * for a client (a partition's log end offset and size on this broker, this broker's
 * produce and fetch byte counters).
 */
import { Admin } from '../client/admin.js'
import { Consumer } from '../client/consumer.js'
import { tpKey } from '../client/leader-requests.js'
import type { RecordHeader } from '../protocol/record-batch.js'
import type { BrokerMetricsSource } from './broker-metrics-source.js'
import type { RequestMetrics } from './request-observer.js'

export class ConsoleApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

/** Most records one message-browser request returns. */
const BROWSE_LIMIT_MAX = 200
const CLIENT_ID = 'tidelog-console'

export interface BrokerSummary {
  nodeId: number
  host: string | null
  port: number | null
  rack: string | null
  status: 'online' | 'offline'
  controller: boolean
}

export class ConsoleApi {
  private adminClient: Admin | null = null
  /** Brokers this console has seen registered: one that disappears shows as offline. */
  private readonly seenBrokers = new Map<number, { host: string; port: number; rack: string | null }>()

  constructor(
    private readonly source: () => BrokerMetricsSource | null,
    private readonly requests: RequestMetrics,
    private readonly topicAdminEnabled: boolean,
  ) {}

  get admin(): Admin {
    const source = this.source()
    if (!source) throw new ConsoleApiError(503, 'the broker is still starting (loading its logs)')
    this.adminClient ??= new Admin({ bootstrapServers: source.bootstrapServers(), clientId: CLIENT_ID })
    return this.adminClient
  }

  close(): void {
    this.adminClient?.close()
    this.adminClient = null
  }

  async cluster(): Promise<unknown> {
    const admin = this.admin
    await admin.client.refreshMetadata()
    const cluster = await admin.describeCluster()
    const topics = await admin.describeTopics()
    const partitions = topics.flatMap((t) => t.partitions)
    const live = new Set(cluster.brokers.map((b) => b.nodeId))
    for (const b of cluster.brokers)
      this.seenBrokers.set(b.nodeId, { host: b.host, port: b.port, rack: b.rack })
    const ids = new Set<number>([...this.seenBrokers.keys(), ...partitions.flatMap((p) => p.replicas)])
    const brokers: BrokerSummary[] = [...ids]
      .sort((a, b) => a - b)
      .map((nodeId) => {
        const seen = this.seenBrokers.get(nodeId)
        return {
          nodeId,
          host: seen?.host ?? null,
          port: seen?.port ?? null,
          rack: seen?.rack ?? null,
          status: live.has(nodeId) ? 'online' : 'offline',
          controller: nodeId === cluster.controllerId,
        }
      })
    return {
      clusterId: cluster.clusterId,
      controllerId: cluster.controllerId,
      servedBy: this.source()?.nodeId ?? null,
      brokers,
      topics: topics.filter((t) => !t.isInternal).length,
      partitions: partitions.length,
      offlinePartitions: partitions.filter((p) => p.leader < 0).length,
      underReplicatedPartitions: partitions.filter((p) => p.leader >= 0 && p.isr.length < p.replicas.length)
        .length,
      topicAdmin: this.topicAdminEnabled,
    }
  }

  async topics(includeInternal: boolean): Promise<unknown> {
    const admin = this.admin
    const topics = (await admin.describeTopics()).filter((t) => includeInternal || !t.isInternal)
    const available = topics.flatMap((t) => t.partitions.filter((p) => p.leader >= 0))
    const query = (spec: 'earliest' | 'latest') =>
      available.map((p) => ({ topic: p.topic, partition: p.partition, spec }))
    const [earliest, latest] = available.length
      ? await Promise.all([admin.listOffsets(query('earliest')), admin.listOffsets(query('latest'))])
      : [[], []]
    const offsetOf = (
      list: readonly { topic: string; partition: number; offset: number }[],
      topic: string,
      p: number,
    ) => list.find((o) => o.topic === topic && o.partition === p)?.offset ?? null
    const source = this.source()
    return topics
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((t) => ({
        name: t.name,
        topicId: t.topicId,
        internal: t.isInternal,
        partitions: t.partitions
          .sort((a, b) => a.partition - b.partition)
          .map((p) => {
            // Log end offset and size come from this broker's replica when it is the leader.
            const local = source?.replicaManager.getPartition(t.name, p.partition)
            const leaderHere = local?.isLeader === true
            return {
              partition: p.partition,
              leader: p.leader,
              replicas: p.replicas,
              isr: p.isr,
              offlineReplicas: p.offlineReplicas,
              logStartOffset: offsetOf(earliest, t.name, p.partition),
              highWatermark: offsetOf(latest, t.name, p.partition),
              logEndOffset: leaderHere ? local.log.logEndOffset : null,
              sizeBytes: local ? local.log.size : null,
              underReplicated: p.leader >= 0 && p.isr.length < p.replicas.length,
            }
          }),
      }))
  }

  async groups(): Promise<unknown> {
    const admin = this.admin
    const listed = await admin.listGroups()
    if (listed.length === 0) return []
    const described = await admin.describeGroups(listed.map((g) => g.groupId))
    const result = []
    for (const group of described) {
      const offsets = (await admin.listGroupOffsets(group.groupId)).filter((o) => o.offset >= 0)
      const ends = offsets.length
        ? await admin.listOffsets(
            offsets.map((o) => ({ topic: o.topic, partition: o.partition, spec: 'latest' as const })),
          )
        : []
      const partitions = offsets.map((o) => {
        const end = ends.find((e) => e.topic === o.topic && e.partition === o.partition)?.offset ?? null
        return {
          topic: o.topic,
          partition: o.partition,
          committedOffset: o.offset,
          highWatermark: end,
          lag: end === null ? null : Math.max(0, end - o.offset),
        }
      })
      result.push({
        groupId: group.groupId,
        state: group.state,
        protocol: group.protocol,
        coordinator: group.coordinator,
        members: group.members.map((m) => ({
          memberId: m.memberId,
          clientId: m.clientId,
          clientHost: m.clientHost,
          assignment: m.assignment.map((a) => `${a.topic}-${a.partition}`),
        })),
        totalLag: partitions.reduce((sum, p) => sum + (p.lag ?? 0), 0),
        partitions,
      })
    }
    return result
  }

  /** This broker's cumulative produce/fetch counters per topic; the page turns them into rates. */
  rates(): unknown {
    const topics = new Set<string>()
    for (const counter of [this.requests.bytesIn, this.requests.bytesOut, this.requests.messagesIn])
      for (const sample of counter.get().values) topics.add(String(sample.labels.topic))
    return {
      atMs: Date.now(),
      brokerId: this.source()?.nodeId ?? null,
      topics: [...topics].sort().map((topic) => ({
        topic,
        bytesIn: this.requests.bytesIn.value(topic),
        messagesIn: this.requests.messagesIn.value(topic),
        bytesOut: this.requests.bytesOut.value(topic),
      })),
    }
  }

  /** Records of one partition from an offset or the first at/after a timestamp. */
  async messages(params: URLSearchParams): Promise<unknown> {
    const topic = params.get('topic')
    if (!topic) throw new ConsoleApiError(400, 'topic is required')
    const partition = integerParam(params, 'partition', 0)
    const limit = Math.min(BROWSE_LIMIT_MAX, Math.max(1, integerParam(params, 'limit', 20)))
    const consumer = new Consumer({
      client: this.admin.client,
      clientId: CLIENT_ID,
      autoOffsetReset: 'earliest',
      fetchMaxWaitMs: 100,
      maxPollRecords: limit,
    })
    try {
      const tp = { topic, partition }
      let offset: number
      if (params.has('timestamp')) {
        const timestampMs = timestampParam(params.get('timestamp')!)
        offset = (await consumer.offsetsForTimes([tp], timestampMs)).get(tpKey(tp)) ?? -1
        if (offset < 0) return { topic, partition, startOffset: null, records: [] }
      } else if (params.has('offset')) {
        offset = integerParam(params, 'offset', 0)
      } else {
        offset = (await consumer.beginningOffsets([tp])).get(tpKey(tp)) ?? 0
      }
      const end = (await consumer.endOffsets([tp])).get(tpKey(tp)) ?? 0
      if (offset >= end) return { topic, partition, startOffset: offset, highWatermark: end, records: [] }
      consumer.assign([{ topic, partition, offset }])
      const records = []
      for (let attempt = 0; attempt < 5 && records.length < limit; attempt++) {
        for (const record of await consumer.poll(300)) {
          if (records.length < limit) records.push(record)
        }
        if (records.length > 0 && records[records.length - 1].offset >= end - 1) break
      }
      return {
        topic,
        partition,
        startOffset: offset,
        highWatermark: end,
        records: records.map((r) => ({
          offset: r.offset,
          timestamp: r.timestamp,
          timestampType: r.timestampType,
          key: r.key === null ? null : r.key.toString('base64'),
          value: r.value === null ? null : r.value.toString('base64'),
          headers: r.headers.map((h: RecordHeader) => ({
            key: h.key,
            value: h.value === null ? null : Buffer.from(h.value).toString('base64'),
          })),
        })),
      }
    } finally {
      await consumer.close()
    }
  }

  async createTopic(body: unknown): Promise<unknown> {
    this.requireTopicAdmin()
    const spec = body as { name?: unknown; partitions?: unknown; replicationFactor?: unknown }
    if (typeof spec?.name !== 'string' || spec.name === '') throw new ConsoleApiError(400, 'name is required')
    const numPartitions = spec.partitions === undefined ? -1 : Number(spec.partitions)
    const replicationFactor = spec.replicationFactor === undefined ? -1 : Number(spec.replicationFactor)
    if (!Number.isInteger(numPartitions) || !Number.isInteger(replicationFactor))
      throw new ConsoleApiError(400, 'partitions and replicationFactor must be integers')
    await this.admin.createTopics([{ topic: spec.name, numPartitions, replicationFactor }])
    return { created: spec.name }
  }

  async deleteTopic(name: string): Promise<unknown> {
    this.requireTopicAdmin()
    await this.admin.deleteTopics([name])
    return { deleted: name }
  }

  private requireTopicAdmin(): void {
    if (!this.topicAdminEnabled)
      throw new ConsoleApiError(403, 'the console is read-only: set tidelog.console.topic.admin.enable=true')
  }
}

function integerParam(params: URLSearchParams, name: string, fallback: number): number {
  const raw = params.get(name)
  if (raw === null || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isSafeInteger(value) || value < 0)
    throw new ConsoleApiError(400, `${name} must be an integer >= 0`)
  return value
}

/** Milliseconds since the epoch, or an ISO-8601 date. */
function timestampParam(raw: string): number {
  const value = /^\d+$/.test(raw) ? Number(raw) : Date.parse(raw)
  if (!Number.isFinite(value))
    throw new ConsoleApiError(400, 'timestamp must be epoch milliseconds or an ISO date')
  return value
}

/**
 * One broker's metrics registry (prom-client), named after Kafka's JMX metrics the way the
 * Prometheus JMX exporter spells them (`kafka_<domain>_<type>_<name>`, lower case, with
 * Prometheus units: `_total` for counters, `_seconds` for times). docs/operations.md maps
 * each one to Kafka's MBean and says where tidelog's meaning differs.
 *
 * Event-loop lag comes with prom-client's default Node metrics (nodejs_eventloop_lag_*).
 * Gauges read the broker's state at scrape time; counters on the request path are plain
 * numbers bumped by the request observer (request-observer.ts).
 *
 * prom-client (and the @opentelemetry/api it requires) is a sixth of the CPU `tidelog start`
 * spends before it listens (docs/notes/startup.md), and nothing needs it until a scrape: the
 * metrics register into a stand-in, and `load()` (the broker calls it once it has started,
 * /metrics awaits it) imports prom-client and replays them, in the same order, into the
 * Registry.
 */
import { performance } from 'node:perf_hooks'
import type { Histogram, Registry } from 'prom-client'
import type { Logger } from '../common/logger.js'
import type { BrokerMetricsSource } from './broker-metrics-source.js'
import { CollectedMetric, LATENCY_BUCKETS_SECONDS, type MetricSink, type Samples } from './fast-metrics.js'
import { RequestMetrics } from './request-observer.js'

export interface BrokerMetricsOptions {
  readonly logger: Logger
  readonly slowRequestMs: number
  /**
   * High watermarks of partitions this broker does not lead, for the consumer lag (the
   * console's admin client asks their leaders with ListOffsets).
   */
  readonly highWatermarks: (
    partitions: readonly { topic: string; partition: number }[],
  ) => Promise<Map<string, number>>
}

export class BrokerMetrics {
  readonly requests: RequestMetrics
  private source: BrokerMetricsSource | null = null
  private lastEventLoopUtilization = performance.eventLoopUtilization()
  private eventLoopUtilization = 0
  /** Null until load() has imported prom-client; metrics registered before wait in `pending`. */
  private registry: Registry | null = null
  private readonly pending: never[] = []
  private readonly sink: MetricSink = {
    registerMetric: (metric) =>
      this.registry ? this.registry.registerMetric(metric) : this.pending.push(metric),
  }
  private loading: Promise<Registry> | null = null
  private closed = false
  private histogram: typeof Histogram | null = null
  private flush: Histogram | null = null
  /** Log flush times (seconds) observed before the flush histogram exists. */
  private readonly earlyFlushesSeconds: number[] = []

  constructor(private readonly options: BrokerMetricsOptions) {
    this.requests = new RequestMetrics({
      registry: this.sink,
      logger: options.logger,
      slowRequestMs: options.slowRequestMs,
      topicName: (topicId) => this.topicName(topicId),
    })
    this.defineBrokerGauges()
    this.defineSessionMetrics()
    this.defineShareMetrics()
  }

  /** The broker's state becomes readable (before that, the gauges report nothing). */
  attach(source: BrokerMetricsSource): void {
    this.source = source
    source.logManager.onLogFlushed = (durationMs) => {
      if (this.flush) this.flush.observe(durationMs / 1000)
      else this.earlyFlushesSeconds.push(durationMs / 1000)
    }
    if (this.registry) this.defineFlushHistogram(this.registry)
  }

  /**
   * Imports prom-client and builds the registry: the default Node metrics first, then every
   * metric registered so far, in order, so /metrics reads as it did when all were built at once.
   */
  load(): Promise<Registry> {
    this.loading ??= import('prom-client').then(({ Registry, Histogram, collectDefaultMetrics }) => {
      const registry = new Registry()
      if (this.closed) return registry
      this.histogram = Histogram
      collectDefaultMetrics({ register: registry })
      for (const metric of this.pending.splice(0)) registry.registerMetric(metric)
      this.registry = registry
      if (this.source) this.defineFlushHistogram(registry)
      return registry
    })
    return this.loading
  }

  close(): void {
    this.closed = true
    if (this.source) this.source.logManager.onLogFlushed = null
    this.registry?.clear()
  }

  /** The exposition text and its content type. */
  async metrics(): Promise<{ contentType: string; body: string }> {
    const registry = await this.load()
    const body = await registry.metrics()
    // Client metrics have names of the clients' choosing: text of their own after the registry's.
    const clients = this.source?.clientTelemetryExposition?.() ?? ''
    return {
      contentType: registry.contentType,
      body: clients === '' ? body : `${body}${body.endsWith('\n') || body === '' ? '' : '\n'}${clients}`,
    }
  }

  private defineFlushHistogram(registry: Registry): void {
    const flush = new this.histogram!({
      name: 'kafka_log_logflushstats_logflush_seconds',
      help: 'Log flush (fsync) latency (LogFlushRateAndTimeMs)',
      buckets: [...LATENCY_BUCKETS_SECONDS],
      registers: [registry],
    })
    for (const seconds of this.earlyFlushesSeconds.splice(0)) flush.observe(seconds)
    this.flush = flush
  }

  private topicName(topicId: string): string | undefined {
    if (!this.source) return undefined
    for (const topic of this.source.metadataImage().topics.values())
      if (topic.topicId === topicId) return topic.name
    return undefined
  }

  private gauge(
    name: string,
    help: string,
    read: (source: BrokerMetricsSource) => Samples | Promise<Samples>,
  ): void {
    new CollectedMetric(name, help, 'gauge', this.sink, () => (this.source ? read(this.source) : []))
  }

  private counter(name: string, help: string, read: (source: BrokerMetricsSource) => Samples): void {
    new CollectedMetric(name, help, 'counter', this.sink, () => (this.source ? read(this.source) : []))
  }

  private defineBrokerGauges(): void {
    const rm = 'kafka_server_replicamanager'
    this.gauge(
      `${rm}_underreplicatedpartitions`,
      'Partitions led here whose ISR is smaller than their replicas',
      (s) => one(this.ledPartitions(s).filter((p) => p.isr.length < p.replicas.length).length),
    )
    this.gauge(
      `${rm}_underminisrpartitioncount`,
      'Partitions led here whose ISR is below min.insync.replicas',
      (s) =>
        one(
          this.ledPartitions(s).filter(
            (p) => p.isr.length < (s.replicaManager.topicSettings(p.topic)?.minInsyncReplicas ?? 1),
          ).length,
        ),
    )
    this.gauge(
      `${rm}_atminisrpartitioncount`,
      'Partitions led here whose ISR is exactly min.insync.replicas',
      (s) =>
        one(
          this.ledPartitions(s).filter(
            (p) => p.isr.length === (s.replicaManager.topicSettings(p.topic)?.minInsyncReplicas ?? 1),
          ).length,
        ),
    )
    this.gauge(`${rm}_leadercount`, 'Partitions this broker leads', (s) => one(this.ledPartitions(s).length))
    this.gauge(`${rm}_partitioncount`, 'Partitions with a replica on this broker', (s) =>
      one([...s.replicaManager.hostedPartitions].length),
    )
    this.counter(
      `${rm}_isrshrinks_total`,
      'ISR shrinks made by this broker as leader (IsrShrinksPerSec)',
      (s) => one(s.isrCounters().shrinks),
    )
    this.counter(
      `${rm}_isrexpands_total`,
      'ISR expansions made by this broker as leader (IsrExpandsPerSec)',
      (s) => one(s.isrCounters().expands),
    )
    this.gauge(
      'kafka_server_replicafetchermanager_maxlag',
      'Largest lag in records of a follower behind a partition led here (the leader-side MaxLag)',
      (s) =>
        one(Math.max(0, ...this.ledPartitions(s).flatMap((p) => p.followerLag().map((f) => f.lagMessages)))),
    )
    this.gauge(
      'kafka_server_delayedoperationpurgatory_purgatorysize',
      'Requests waiting in a purgatory (acks=all produce, long-poll fetch)',
      () => [
        { labels: { delayedOperation: 'Produce' }, value: this.requests.purgatorySize.Produce },
        { labels: { delayedOperation: 'Fetch' }, value: this.requests.purgatorySize.Fetch },
      ],
    )
    const kc = 'kafka_controller_kafkacontroller'
    this.gauge(`${kc}_activecontrollercount`, '1 on the active controller, 0 elsewhere', (s) =>
      one(s.isActiveController() ? 1 : 0),
    )
    this.gauge(
      `${kc}_offlinepartitionscount`,
      'Partitions without a leader (reported by the active controller)',
      (s) => {
        if (!s.isActiveController()) return one(0)
        let offline = 0
        for (const topic of s.metadataImage().topics.values())
          for (const p of topic.partitions) if (p.leader < 0) offline++
        return one(offline)
      },
    )
    this.gauge(
      `${kc}_globalpartitioncount`,
      'Partitions in the cluster (reported by the active controller)',
      (s) => {
        if (!s.isActiveController()) return one(0)
        let count = 0
        for (const topic of s.metadataImage().topics.values()) count += topic.partitions.length
        return one(count)
      },
    )
    const cs = 'kafka_controller_controllerstats'
    this.counter(`${cs}_leaderelections_total`, 'Leader elections made by this broker as controller', (s) =>
      one(s.controllerCounters().leaderElections),
    )
    this.counter(
      `${cs}_uncleanleaderelections_total`,
      'Unclean leader elections made by this broker as controller',
      (s) => one(s.controllerCounters().uncleanLeaderElections),
    )
    this.counter(
      `${cs}_uncleanleaderelection_lostoffsets_total`,
      'Committed offsets removed from this broker’s replicas by truncation after an unclean election',
      (s) => one(s.replicaManager.fetcherStats.committedOffsetsTruncated),
    )
    const log = (name: string, help: string, value: (p: PartitionView) => number) =>
      this.gauge(`kafka_log_log_${name}`, help, (s) =>
        [...s.replicaManager.hostedPartitions].map((p) => ({
          labels: { topic: p.topic, partition: p.partition },
          value: value(p as PartitionView),
        })),
      )
    log('size', 'Bytes of the partition log on this broker (Size)', (p) => p.log.size)
    log('logstartoffset', 'First offset of the partition log (LogStartOffset)', (p) => p.log.logStartOffset)
    log(
      'logendoffset',
      'Offset after the last record of the partition log (LogEndOffset)',
      (p) => p.log.logEndOffset,
    )
    this.gauge(
      'kafka_log_logmanager_offlinelogdirectorycount',
      'Log directories offline after a disk error',
      (s) => one(s.logManager.offlineLogDirs.length),
    )
    this.counter(
      'tidelog_log_sync_append_stalls_total',
      'Appends written on the event loop that took over 2 ms, each sending appends to the thread pool for 1-60 s (a slow disk)',
      (s) => one(s.syncAppendStalls()),
    )
    this.gauge(
      'kafka_server_socketservermetrics_connection_count',
      'Open client connections per listener (connection-count)',
      (s) => [{ labels: { listener: 'PLAINTEXT' }, value: s.connectionCount() }],
    )
    this.gauge(
      'kafka_consumergroup_lag',
      'Consumer group lag in records: high watermark minus committed offset, for the groups this broker coordinates',
      (s) => this.consumerLag(s),
    )
    this.gauge(
      'nodejs_eventloop_utilization_ratio',
      'Event loop utilisation since the previous scrape (0..1)',
      () => {
        this.sampleEventLoop()
        return one(this.eventLoopUtilization)
      },
    )
    // One Node thread reads sockets and runs handlers: Kafka's two idle ratios are one here.
    this.gauge(
      'kafka_network_socketserver_networkprocessoravgidlepercent',
      'Idle share of the event loop since the previous scrape (1 - utilisation)',
      () => one(1 - this.eventLoopUtilization),
    )
    this.gauge(
      'kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent',
      'Idle share of the event loop since the previous scrape (1 - utilisation)',
      () => one(1 - this.eventLoopUtilization),
    )
  }

  /**
   * The store session (Kafka's ZooKeeper-era SessionExpireListener counted expiries), the
   * event-loop stalls that lose it, and the metadata watch's restarts (broker-metadata-metrics).
   */
  private defineSessionMetrics(): void {
    const session = (s: BrokerMetricsSource) => s.sessionCounters?.()
    const sel = 'kafka_server_sessionexpirelistener'
    this.counter(`${sel}_sessionexpires_total`, 'Metadata store sessions this broker lost', (s) =>
      one(session(s)?.sessionLosses ?? 0),
    )
    this.counter(`${sel}_reregistrations_total`, 'Registrations made again after a lost session', (s) =>
      one(session(s)?.reregistrations ?? 0),
    )
    this.counter(
      'nodejs_eventloop_stalls_total',
      'Event-loop stalls longer than a third of broker.session.timeout.ms (logged at warn)',
      (s) => one(session(s)?.stalls ?? 0),
    )
    this.gauge('nodejs_eventloop_stall_longest_seconds', 'The longest of those stalls', (s) =>
      one((session(s)?.longestStallMs ?? 0) / 1000),
    )
    const bmm = 'kafka_server_brokermetadatametrics'
    this.counter(
      `${bmm}_watchrestarts_total`,
      'Metadata watches started again from a fresh read of the store (ended by it, or stalled)',
      (s) => one(session(s)?.watch.restarts ?? 0),
    )
    this.counter(
      `${bmm}_watchstalls_total`,
      'Metadata watches restarted because they delivered nothing while this broker waited for its own write',
      (s) => one(session(s)?.watch.stalls ?? 0),
    )
    this.counter(
      `${bmm}_watchprobestalls_total`,
      "Metadata watches restarted because the store's probe found them stalled, whatever this broker wrote",
      (s) => one(session(s)?.watch.probeStalls ?? 0),
    )
  }

  /**
   * KIP-932's broker metrics, Kafka 4.4's names: the share session cache
   * (kafka.server:type=ShareSessionCache), records acknowledged by type
   * (type=ShareGroupMetrics), each open share-partition's in-flight records and lock expiries
   * (type=SharePartitionMetrics), share fetch and acknowledgement requests by topic
   * (type=BrokerTopicMetrics), the time share-partitions took to load their state
   * (ShareGroupMetrics' PartitionLoadTimeMs as the JMX exporter shows a histogram: count, mean,
   * max), and the share groups coordinated here (group-coordinator-metrics' group-count and
   * share-group-count). Meters are counters here.
   */
  private defineShareMetrics(): void {
    const view = (s: BrokerMetricsSource) => s.shareMetrics?.() ?? null
    const ssc = 'kafka_server_sharesessioncache'
    this.gauge(`${ssc}_sharesessionscount`, 'Share sessions open on this broker (ShareSessionsCount)', (s) =>
      one(view(s)?.sessionCount ?? 0),
    )
    this.gauge(
      `${ssc}_sharepartitionscount`,
      'Partitions over all share sessions on this broker (SharePartitionsCount)',
      (s) => one(view(s)?.sessionPartitionCount ?? 0),
    )
    this.counter(
      `${ssc}_sharesessionevictions_total`,
      'Share sessions ended by their connection closing (ShareSessionEvictionsPerSec)',
      (s) => one(view(s)?.sessionEvictions ?? 0),
    )
    this.counter(
      'kafka_server_sharegroupmetrics_recordacknowledgements_total',
      'Records acknowledged by share consumers, by acknowledge type (RecordAcknowledgementsPerSec)',
      (s) =>
        [...(view(s)?.recordAcknowledgements ?? [])].map(([ackType, value]) => ({
          labels: { ackType },
          value,
        })),
    )
    this.defineShareRequestMetrics()
    const spm = 'kafka_server_sharepartitionmetrics'
    this.gauge(
      `${spm}_inflightmessagecount`,
      'Records in flight (start offset to end offset) of each share-partition led here (InFlightMessageCount)',
      (s) =>
        (view(s)?.sharePartitions ?? []).map((p) => ({
          labels: { group: p.groupId, topic: p.topic, partition: p.partition },
          value: p.inFlightMessages,
        })),
    )
    this.counter(
      `${spm}_acquisitionlocktimeout_total`,
      'Acquisition locks that ran out holding records (AcquisitionLockTimeoutPerSec); closed share-partitions unlabelled',
      (s) => {
        const v = view(s)
        if (!v) return []
        const open = v.sharePartitions.map((p) => ({
          labels: { group: p.groupId, topic: p.topic, partition: p.partition },
          value: p.acquisitionLockTimeouts,
        }))
        return [...open, { labels: {}, value: v.closedAcquisitionLockTimeouts }]
      },
    )
    const gcm = 'kafka_server_group_coordinator_metrics'
    this.gauge(`${gcm}_group_count`, 'Groups coordinated here by protocol (group-count)', (s) => {
      const counts = new Map<string, number>()
      for (const g of s.groupCoordinator.listGroups().groups)
        counts.set(g.type, (counts.get(g.type) ?? 0) + 1)
      return [...counts].map(([protocol, value]) => ({ labels: { protocol }, value }))
    })
    this.counter(
      `${gcm}_share_group_rebalance_count`,
      'Share group epoch bumps by heartbeats coordinated here (share-group-rebalance-count)',
      (s) => one(s.groupCoordinator.share.rebalances),
    )
    this.gauge(
      `${gcm}_share_group_count`,
      'Share groups coordinated here by state (share-group-count)',
      (s) => {
        const counts = new Map<string, number>([
          ['empty', 0],
          ['stable', 0],
        ])
        for (const g of s.groupCoordinator.listGroups().groups)
          if (g.type === 'share')
            counts.set(g.state.toLowerCase(), (counts.get(g.state.toLowerCase()) ?? 0) + 1)
        return [...counts].map(([state, value]) => ({ labels: { state }, value }))
      },
    )
  }

  /** BrokerTopicMetrics' share request meters and ShareGroupMetrics' PartitionLoadTimeMs. */
  private defineShareRequestMetrics(): void {
    const view = (s: BrokerMetricsSource) => s.shareMetrics?.() ?? null
    const btm = 'kafka_server_brokertopicmetrics'
    const byTopic = (counts: ReadonlyMap<string, number> | undefined): Samples =>
      [...(counts ?? [])].map(([topic, value]) => ({ labels: { topic }, value }))
    for (const [name, what, key] of [
      [
        'totalsharefetchrequests',
        'Share fetches, once per topic fetched (TotalShareFetchRequestsPerSec)',
        'fetch',
      ],
      [
        'failedsharefetchrequests',
        'Share fetch partitions answered with an error (FailedShareFetchRequestsPerSec)',
        'failedFetch',
      ],
      [
        'totalshareacknowledgementrequests',
        'Share acknowledgements, once per topic acknowledged (TotalShareAcknowledgementRequestsPerSec)',
        'acknowledgement',
      ],
      [
        'failedshareacknowledgementrequests',
        'Share acknowledgement partitions that failed (FailedShareAcknowledgementRequestsPerSec)',
        'failedAcknowledgement',
      ],
    ] as const)
      this.counter(`${btm}_${name}_total`, what, (s) => byTopic(view(s)?.topicRequests[key]))
    const scm = 'kafka_server_share_coordinator_metrics'
    const writes = (s: BrokerMetricsSource) => s.shareCoordinatorWrites?.()
    this.counter(
      `${scm}_write_total`,
      'WriteShareGroupState calls on the share coordinator here (write-total)',
      (s) => one(writes(s)?.count ?? 0),
    )
    this.gauge(
      `${scm}_write_latency_avg`,
      'Mean time of those writes until answered, ms (write-latency-avg)',
      (s) => {
        const w = writes(s)
        return one(w && w.count > 0 ? w.totalLatencyMs / w.count : 0)
      },
    )
    this.gauge(`${scm}_write_latency_max`, 'Longest of those writes, ms (write-latency-max)', (s) =>
      one(writes(s)?.maxLatencyMs ?? 0),
    )
    const sgm = 'kafka_server_sharegroupmetrics_partitionloadtimems'
    this.counter(
      `${sgm}_count`,
      'Share-partitions loaded from their persisted state (PartitionLoadTimeMs Count)',
      (s) => one(view(s)?.partitionLoads.count ?? 0),
    )
    this.gauge(`${sgm}_mean`, 'Mean time to load a share-partition, ms (PartitionLoadTimeMs Mean)', (s) => {
      const loads = view(s)?.partitionLoads
      return one(loads && loads.count > 0 ? loads.totalMs / loads.count : 0)
    })
    this.gauge(`${sgm}_max`, 'Longest time to load a share-partition, ms (PartitionLoadTimeMs Max)', (s) =>
      one(view(s)?.partitionLoads.maxMs ?? 0),
    )
  }

  private sampleEventLoop(): void {
    const now = performance.eventLoopUtilization()
    this.eventLoopUtilization = performance.eventLoopUtilization(
      now,
      this.lastEventLoopUtilization,
    ).utilization
    this.lastEventLoopUtilization = now
  }

  private ledPartitions(source: BrokerMetricsSource): PartitionView[] {
    const led: PartitionView[] = []
    for (const p of source.replicaManager.hostedPartitions) if (p.isLeader) led.push(p as PartitionView)
    return led
  }

  /**
   * Lag of each committed offset of the groups coordinated here: the partition's high
   * watermark (its own when this broker leads it, else ListOffsets to its leader) minus the
   * committed offset, never below 0 — kafkajs's admin and `tidelog groups describe` compute
   * it the same way.
   */
  private async consumerLag(source: BrokerMetricsSource): Promise<Samples> {
    const committed = source.groupCoordinator.committedOffsets()
    if (committed.length === 0) return []
    const highWatermarks = new Map<string, number>()
    const remote: { topic: string; partition: number }[] = []
    for (const c of committed) {
      const key = `${c.topic}\0${c.partition}`
      if (highWatermarks.has(key)) continue
      const local = source.replicaManager.getPartition(c.topic, c.partition)
      if (local?.isLeader) highWatermarks.set(key, local.highWatermark)
      else if (!remote.some((r) => r.topic === c.topic && r.partition === c.partition)) remote.push(c)
    }
    if (remote.length > 0) {
      try {
        for (const [key, hw] of await this.options.highWatermarks(remote)) highWatermarks.set(key, hw)
      } catch (error) {
        this.options.logger.debug(
          { err: error },
          'consumer lag: ListOffsets failed; those partitions are left out',
        )
      }
    }
    const samples: { labels: Record<string, string | number>; value: number }[] = []
    for (const c of committed) {
      const hw = highWatermarks.get(`${c.topic}\0${c.partition}`)
      if (hw === undefined || c.offset < 0) continue
      samples.push({
        labels: { group: c.groupId, topic: c.topic, partition: c.partition },
        value: Math.max(0, hw - c.offset),
      })
    }
    return samples
  }
}

interface PartitionView {
  readonly topic: string
  readonly partition: number
  readonly isLeader: boolean
  readonly isr: readonly number[]
  readonly replicas: readonly number[]
  readonly highWatermark: number
  readonly log: { readonly size: number; readonly logStartOffset: number; readonly logEndOffset: number }
  followerLag(): { lagMessages: number }[]
}

function one(value: number): Samples {
  return [{ value }]
}

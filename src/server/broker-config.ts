/**
 * Broker configuration with Kafka's property names and defaults. Parsed once from
 * `server.properties`, `--set key=value` and the embedding API, then read through the
 * typed BrokerConfig object.
 */
import { parse as parseJavaProperties } from 'dot-properties'
import { type ConfigDef, ConfigDefs, type ConfigValue } from '../common/config-def.js'
import { ConfigError } from '../common/errors.js'
import { type BrokerId, toBrokerId } from '../common/types.js'
import { STORE_LIMITS_DEFAULT, type StoreLimits } from '../metadata/store/metadata-store.js'
import { RACK_AWARE_REPLICA_SELECTOR } from '../replication/replica-selector.js'
import { authorizerConfigDefs } from '../security/authorizer/authorizer-config.js'
import { type Endpoint, type ListenerSettings, listenerSettings } from '../security/listeners.js'
import { checkListenerOverrides, securityConfigDefs } from '../security/security-config.js'
import { DEFAULT_MAX_OPEN_FILES } from '../storage/bounded-file-system.js'

const MIB = 1024 * 1024
const LONG_MAX = Number.MAX_SAFE_INTEGER
/**
 * A producer that pipelines (librdkafka allows 1,000,000 requests in flight) would otherwise
 * fill a leader with up to queued.max.requests (500) requests of up to 1 MB each while they
 * wait for acks=all; their Buffers were most of a broker's memory under load
 * (docs/notes/performance.md, "Memory of a broker process").
 */
export const QUEUED_REQUEST_BYTES_PER_CONNECTION_DEFAULT = 4 * MIB
/** -1 (unbounded) as null. */
const nonNegativeOrNull = (value: number): number | null => (value < 0 ? null : value)

export const brokerConfigDefs = new ConfigDefs([
  def('node.id', 'int', 0, 'The broker id (broker.id is accepted as an alias).', { min: 0 }),
  def('listeners', 'list', ['PLAINTEXT://127.0.0.1:9092'], 'Listeners to bind, as NAME://host:port.'),
  def('advertised.listeners', 'list', null, 'Addresses given to clients; defaults to listeners.'),
  ...securityConfigDefs,
  ...authorizerConfigDefs,
  def('log.dirs', 'list', null, 'Directories holding partition logs.'),
  def('log.dir', 'string', '/tmp/tidelog-logs', 'Log directory used when log.dirs is not set.'),
  def('cluster.id', 'string', null, 'Cluster id; generated and stored in meta.properties when absent.'),
  def('socket.request.max.bytes', 'int', 104857600, 'Largest request frame accepted.', { min: 1 }),
  def('queued.max.requests', 'int', 500, 'Requests read from one connection but not yet answered.', {
    min: 1,
  }),
  def(
    'queued.max.request.bytes',
    'long',
    -1,
    'Bytes of requests read from all connections but not yet answered before the broker reads no more; -1: no bound.',
    { min: -1 },
  ),
  def(
    'tidelog.connection.queued.max.request.bytes',
    'int',
    QUEUED_REQUEST_BYTES_PER_CONNECTION_DEFAULT,
    'Bytes of requests read from one connection but not yet answered before the broker reads no more from it (one request is always read); -1: no bound but queued.max.requests. Kafka reads one request per connection at a time.',
    { min: -1 },
  ),
  def('quota.window.num', 'int', 11, 'Samples a client quota rate is measured over.', { min: 1 }),
  def('quota.window.size.seconds', 'int', 1, 'Length of one client quota sample.', { min: 1 }),
  def(
    'delegation.token.secret.key',
    'password',
    null,
    'Key of delegation token HMACs, the same on every broker; unset: delegation tokens are off.',
  ),
  def('delegation.token.master.key', 'password', null, 'Deprecated name of delegation.token.secret.key.'),
  def('delegation.token.max.lifetime.ms', 'long', 604800000, 'Longest life of a delegation token.', {
    min: 1,
  }),
  def(
    'delegation.token.expiry.time.ms',
    'long',
    86400000,
    'Renewal period of a delegation token, when its renewal names none.',
    { min: 1 },
  ),
  def(
    'delegation.token.expiry.check.interval.ms',
    'long',
    3600000,
    'How often expired delegation tokens are deleted.',
    { min: 1 },
  ),
  def(
    'telemetry.max.bytes',
    'int',
    MIB,
    'Largest client telemetry payload (PushTelemetry), compressed or decompressed.',
    { min: 1 },
  ),
  def('connections.max.idle.ms', 'long', 600000, 'Idle connections are closed after this long.'),
  def('num.partitions', 'int', 1, 'Partitions of auto-created topics.', { min: 1 }),
  def('default.replication.factor', 'int', 1, 'Replication factor of auto-created topics.', { min: 1 }),
  def('min.insync.replicas', 'int', 1, 'Replicas that must acknowledge acks=all writes.', { min: 1 }, true),
  def('auto.create.topics.enable', 'boolean', true, 'Create topics on first metadata request or produce.'),
  def('delete.topic.enable', 'boolean', true, 'Allow DeleteTopics.'),
  def('unclean.leader.election.enable', 'boolean', false, 'Allow a leader outside the ISR.', {}, true),
  def('replica.lag.time.max.ms', 'long', 30000, 'A follower behind for this long leaves the ISR.', {
    min: 0,
  }),
  def('replica.fetch.max.bytes', 'int', 1048576, 'Bytes a follower asks per partition per fetch.', {
    min: 0,
  }),
  def('replica.fetch.response.max.bytes', 'int', 10485760, 'Bytes a follower asks per fetch.', { min: 0 }),
  def('replica.fetch.wait.max.ms', 'int', 500, 'How long a follower fetch waits for data.', { min: 0 }),
  def('replica.fetch.min.bytes', 'int', 1, 'Bytes a follower fetch waits for.', { min: 1 }),
  def(
    'replica.socket.timeout.ms',
    'int',
    30000,
    'How long past its wait a follower fetch may go unanswered before the connection is dropped.',
    { min: 1 },
  ),
  def('replica.fetch.backoff.ms', 'int', 1000, 'Pause after a follower fetch error.', { min: 0 }),
  def('num.replica.fetchers', 'int', 1, 'Fetcher connections per source broker (tidelog uses one).', {
    min: 1,
  }),
  def('auto.leader.rebalance.enable', 'boolean', true, 'Give leadership back to preferred replicas.'),
  def('leader.imbalance.check.interval.seconds', 'long', 300, 'How often the controller checks.', { min: 1 }),
  def('leader.imbalance.per.broker.percentage', 'int', 10, 'Imbalance that triggers a rebalance.', {
    min: 0,
  }),
  def('message.max.bytes', 'int', 1048588, 'Largest record batch accepted.', { min: 0 }, true),
  def('log.segment.bytes', 'int', 1073741824, 'Segment file size.', { min: 14 }, true),
  def('log.roll.ms', 'long', null, 'Segment roll time; log.roll.hours when null.', { min: 1 }, true),
  def('log.roll.hours', 'int', 168, 'Segment roll time in hours (below log.roll.ms).', { min: 1 }),
  def(
    'log.roll.jitter.ms',
    'long',
    null,
    'Maximum random jitter subtracted from the roll time.',
    { min: 0 },
    true,
  ),
  def('log.roll.jitter.hours', 'int', 0, 'Roll jitter in hours (below log.roll.jitter.ms).', { min: 0 }),
  def(
    'log.retention.ms',
    'long',
    null,
    'Time retention; -1 keeps forever; log.retention.minutes when null.',
    {},
    true,
  ),
  def('log.retention.minutes', 'int', null, 'Time retention in minutes (below log.retention.ms).'),
  def('log.retention.hours', 'int', 168, 'Time retention in hours (below log.retention.minutes).'),
  def('log.retention.bytes', 'long', -1, 'Size retention per partition; -1 unbounded.', {}, true),
  def('log.retention.check.interval.ms', 'long', 300000, 'How often retention runs.', { min: 1 }),
  def(
    'replica.high.watermark.checkpoint.interval.ms',
    'long',
    5000,
    'How often high watermarks are written to replication-offset-checkpoint.',
    { min: 1 },
  ),
  def(
    'log.flush.offset.checkpoint.interval.ms',
    'int',
    60000,
    'How often recovery points are written to recovery-point-offset-checkpoint.',
    { min: 0 },
  ),
  def(
    'log.flush.start.offset.checkpoint.interval.ms',
    'int',
    60000,
    'How often log start offsets are written to log-start-offset-checkpoint.',
    { min: 0 },
  ),
  def('log.cleaner.enable', 'boolean', true, 'Run the log cleaner on logs with cleanup.policy compact.'),
  def('log.cleaner.backoff.ms', 'long', 15000, 'Pause between log cleaner passes.', { min: 0 }),
  def('log.cleaner.threads', 'int', 1, 'Log cleaner threads (tidelog cleans one log at a time).', {
    min: 0,
  }),
  def(
    'log.cleaner.dedupe.buffer.size',
    'long',
    134217728,
    'Memory of the cleaner offset map (24 bytes a key, as Kafka counts it).',
    { min: 0 },
  ),
  def('log.flush.interval.messages', 'long', LONG_MAX, 'Messages before an fsync.', { min: 1 }, true),
  def(
    'log.flush.interval.ms',
    'long',
    null,
    'Time before an fsync; log.flush.scheduler.interval.ms when null.',
    {},
    true,
  ),
  def('log.flush.scheduler.interval.ms', 'long', LONG_MAX, 'How often the flusher checks for logs to fsync.'),
  def('log.index.interval.bytes', 'int', 4096, 'Bytes between offset index entries.', { min: 0 }, true),
  def(
    'log.segment.open.files.max',
    'int',
    DEFAULT_MAX_OPEN_FILES,
    'Segment and index files the logs keep open at once; idle ones close and reopen on use.',
    { min: 1 },
  ),
  def('log.index.size.max.bytes', 'int', 10 * MIB, 'Largest offset index file.', { min: 4 }, true),
  def(
    'log.message.timestamp.type',
    'string',
    'CreateTime',
    'Timestamp type of new topics.',
    { oneOf: ['CreateTime', 'LogAppendTime'] },
    true,
  ),
  def(
    'log.cleanup.policy',
    'list',
    ['delete'],
    'Cleanup policy of new topics.',
    { oneOf: ['delete', 'compact'] },
    true,
  ),
  def(
    'compression.type',
    'string',
    'producer',
    'Compression of stored batches.',
    { oneOf: ['uncompressed', 'zstd', 'lz4', 'snappy', 'gzip', 'producer'] },
    true,
  ),
  // Broker synonyms of the remaining topic-level configs (see metadata/topic-config.ts).
  def('compression.gzip.level', 'int', -1, 'gzip level when compression.type is gzip.', {}, true),
  def(
    'compression.lz4.level',
    'int',
    9,
    'lz4 level when compression.type is lz4.',
    { min: 1, max: 17 },
    true,
  ),
  def(
    'compression.zstd.level',
    'int',
    3,
    'zstd level when compression.type is zstd.',
    { min: -131072, max: 22 },
    true,
  ),
  def(
    'log.cleaner.delete.retention.ms',
    'long',
    86400000,
    'How long delete tombstones are kept.',
    { min: 0 },
    true,
  ),
  def(
    'log.cleaner.min.compaction.lag.ms',
    'long',
    0,
    'Minimum age of a record before compaction.',
    { min: 0 },
    true,
  ),
  def(
    'log.cleaner.max.compaction.lag.ms',
    'long',
    LONG_MAX,
    'Maximum time a record stays uncompacted.',
    { min: 1 },
    true,
  ),
  def(
    'log.cleaner.min.cleanable.ratio',
    'double',
    0.5,
    'Dirty ratio that makes a log cleanable.',
    { min: 0, max: 1 },
    true,
  ),
  def(
    'log.segment.delete.delay.ms',
    'long',
    60000,
    'Delay before a deleted segment file is removed.',
    { min: 0 },
    true,
  ),
  def('log.preallocate', 'boolean', false, 'Preallocate segment files.', {}, true),
  def('log.message.format.version', 'string', '3.0-IV1', 'Deprecated; ignored from 3.0 on.'),
  def(
    'log.message.timestamp.difference.max.ms',
    'long',
    LONG_MAX,
    'Deprecated timestamp skew limit.',
    { min: 0 },
    true,
  ),
  def(
    'log.message.timestamp.before.max.ms',
    'long',
    LONG_MAX,
    'Largest accepted age of a record timestamp.',
    { min: 0 },
    true,
  ),
  def(
    'log.message.timestamp.after.max.ms',
    'long',
    3600000,
    'Largest accepted future record timestamp.',
    { min: 0 },
    true,
  ),
  def('log.message.downconversion.enable', 'boolean', true, 'Down-convert for old fetch versions.', {}, true),
  def(
    'log.local.retention.ms',
    'long',
    -2,
    'Local retention with tiered storage; -2 follows log.retention.',
    { min: -2 },
    true,
  ),
  def(
    'log.local.retention.bytes',
    'long',
    -2,
    'Local size retention with tiered storage; -2 follows log.retention.bytes.',
    { min: -2 },
    true,
  ),
  def('remote.log.storage.system.enable', 'boolean', false, 'Tiered storage (not supported by tidelog).'),
  def('broker.session.timeout.ms', 'int', 9000, 'Metadata store session timeout.', { min: 1 }),
  def(
    'max.request.partition.size.limit',
    'int',
    2000,
    'The maximum number of partitions served in one DescribeTopicPartitions response.',
    { min: 1 },
  ),
  def('offsets.topic.num.partitions', 'int', 50, 'Partitions of __consumer_offsets.', { min: 1 }),
  def('offsets.topic.replication.factor', 'short', 3, 'Replication of __consumer_offsets.', { min: 1 }),
  def('group.initial.rebalance.delay.ms', 'int', 3000, 'Delay of the first rebalance of a new group.'),
  def('group.min.session.timeout.ms', 'int', 6000, 'Smallest session.timeout.ms a member may ask for.'),
  def('group.max.session.timeout.ms', 'int', 1800000, 'Largest session.timeout.ms a member may ask for.'),
  def('group.max.size', 'int', 2147483647, 'Members a consumer group may have.', { min: 1 }),
  def(
    'group.coordinator.rebalance.protocols',
    'list',
    ['classic', 'consumer', 'streams'],
    'Rebalance protocols the group coordinator serves; consumer is KIP-848 (ConsumerGroupHeartbeat), streams KIP-1071 (StreamsGroupHeartbeat).',
    { oneOf: ['classic', 'consumer', 'streams'] },
  ),
  def(
    'group.consumer.heartbeat.interval.ms',
    'int',
    5000,
    'Heartbeat interval given to members of consumer-protocol groups.',
    { min: 1 },
  ),
  def(
    'group.consumer.session.timeout.ms',
    'int',
    45000,
    'Session timeout of members of consumer-protocol groups.',
    { min: 1 },
  ),
  def(
    'group.consumer.assignors',
    'list',
    ['uniform', 'range'],
    'Server-side assignors of consumer-protocol groups; the first is the default.',
    { oneOf: ['uniform', 'range'] },
  ),
  def('group.consumer.max.size', 'int', 2147483647, 'Members a consumer-protocol group may have.', {
    min: 1,
  }),
  def(
    'group.consumer.assignment.interval.ms',
    'int',
    1000,
    'Least time between two target assignments of a consumer-protocol group; a change within it waits for the next heartbeat after it.',
    { min: 0 },
  ),
  def('group.share.heartbeat.interval.ms', 'int', 5000, 'Heartbeat interval given to share group members.', {
    min: 1,
  }),
  def('group.share.session.timeout.ms', 'int', 45000, 'Session timeout of share group members.', { min: 1 }),
  def('group.share.max.size', 'int', 200, 'Members a share group may have.', { min: 1 }),
  def(
    'group.share.assignment.interval.ms',
    'int',
    1000,
    'Least time between two target assignments of a share group; a change within it waits for the next heartbeat after it.',
    { min: 0 },
  ),
  def(
    'group.streams.heartbeat.interval.ms',
    'int',
    5000,
    'Heartbeat interval given to streams group members.',
    {
      min: 1,
    },
  ),
  def('group.streams.session.timeout.ms', 'int', 45000, 'Session timeout of streams group members.', {
    min: 1,
  }),
  def('group.streams.max.size', 'int', 2147483647, 'Members a streams group may have.', { min: 1 }),
  def('group.streams.num.standby.replicas', 'int', 0, 'Standby replicas of each stateful streams task.', {
    min: 0,
  }),
  def(
    'group.streams.initial.rebalance.delay.ms',
    'int',
    3000,
    'How long a new streams group waits for more members before its first assignment.',
    { min: 0 },
  ),
  def(
    'group.streams.task.offset.interval.ms',
    'int',
    60000,
    'How often streams group members report their task changelog offsets (told to them in the heartbeat).',
    { min: 1 },
  ),
  def(
    'group.streams.acceptable.recovery.lag',
    'long',
    10000,
    'Lag under which a streams task counts as caught up (told to the members; Kafka 4.4 places no warm-up tasks by it).',
    { min: 0 },
  ),
  def(
    'group.streams.num.warmup.replicas',
    'int',
    2,
    'Warm-up replicas of a streams group: accepted, no effect, as in Kafka 4.4 (its assignment refiner places none).',
    { min: 0 },
  ),
  def(
    'group.streams.topology.description.plugin.class',
    'string',
    '',
    "Where streams groups' topology descriptions are kept (KIP-1331): empty turns StreamsGroupTopologyDescriptionUpdate off, as Kafka's default; Kafka's in-memory plugin keeps them with the group in the coordinator's memory (tidelog runs no Java plugin).",
    { oneOf: ['', 'org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin'] },
  ),
  def(
    'group.streams.assignment.interval.ms',
    'int',
    1000,
    'Least time between two target assignments of a streams group; a change within it waits for the next heartbeat after it.',
    { min: 0 },
  ),
  def(
    'group.share.record.lock.duration.ms',
    'int',
    30000,
    'How long a share consumer holds the records it acquired before they are released.',
    { min: 1000 },
  ),
  def(
    'group.share.delivery.count.limit',
    'int',
    5,
    'Deliveries of a record to share consumers after which it is archived instead of released.',
    { min: 2, max: 10 },
  ),
  def(
    'group.share.partition.max.record.locks',
    'int',
    2000,
    'Records a share-partition keeps in flight (acquired or awaiting delivery) at most.',
    { min: 100 },
  ),
  def(
    'group.share.max.share.sessions',
    'int',
    2000,
    'Share sessions a broker keeps open at most; a new one beyond is refused with SHARE_SESSION_LIMIT_REACHED.',
    { min: 1 },
  ),
  def(
    'tidelog.share.auto.offset.reset',
    'string',
    'latest',
    "Where a new share-partition starts (Kafka's share.auto.offset.reset, a group config there).",
    { oneOf: ['latest', 'earliest'] },
  ),
  def('offsets.retention.minutes', 'int', 10080, 'How long offsets of an empty group are kept.', { min: 1 }),
  def('offsets.retention.check.interval.ms', 'long', 600000, 'How often expired offsets are removed.', {
    min: 1,
  }),
  def('offsets.commit.timeout.ms', 'int', 5000, 'How long an offset commit waits for its replicas.', {
    min: 1,
  }),
  def('offsets.topic.segment.bytes', 'int', 104857600, 'Segment size of __consumer_offsets.', { min: 1 }),
  def('offsets.load.buffer.size', 'int', 5242880, 'Bytes read at a time when loading groups.', { min: 1 }),
  def('offset.metadata.max.bytes', 'int', 4096, 'Largest metadata string of a committed offset.'),
  def('broker.rack', 'string', null, 'Rack of this broker.'),
  def(
    'replica.selector.class',
    'string',
    null,
    "KIP-392: which replica a consumer should fetch from; RackAwareReplicaSelector names one in the consumer's client.rack. Unset: the leader.",
    { oneOf: [RACK_AWARE_REPLICA_SELECTOR] },
  ),
  def('producer.id.expiration.ms', 'int', 86400000, 'An idle producer id is forgotten after this long.', {
    min: 1,
  }),
  def('producer.id.expiration.check.interval.ms', 'int', 600000, 'How often idle producer ids expire.', {
    min: 1,
  }),
  def(
    'transaction.partition.verification.enable',
    'boolean',
    true,
    'KIP-890: verify with the transaction coordinator that a partition is in the ongoing transaction before its first transactional write.',
    {},
    true,
  ),
  def(
    'add.partitions.to.txn.retry.backoff.ms',
    'int',
    20,
    "How long a partition leader waits before asking again to add a transaction version 2 producer's partition while the coordinator completes the previous transaction.",
    { min: 0 },
  ),
  def(
    'add.partitions.to.txn.retry.backoff.max.ms',
    'int',
    100,
    'How long in all a partition leader retries such an add before the producer is told to retry (NOT_ENOUGH_REPLICAS); at most request.timeout.ms.',
    { min: 0 },
  ),
  // The share coordinator (src/coordinator/share, KIP-932): Kafka's names and defaults.
  def('share.coordinator.state.topic.num.partitions', 'int', 50, 'Partitions of __share_group_state.', {
    min: 1,
  }),
  def(
    'share.coordinator.state.topic.replication.factor',
    'short',
    3,
    'Replication of __share_group_state (capped at the live brokers).',
    { min: 1 },
  ),
  def('share.coordinator.state.topic.min.isr', 'short', 2, 'min.insync.replicas of __share_group_state.', {
    min: 1,
  }),
  def(
    'share.coordinator.snapshot.update.records.per.snapshot',
    'int',
    500,
    'ShareUpdate records of a share-partition after which its next write is a whole ShareSnapshot.',
    { min: 0, max: 500 },
  ),
  def(
    'share.coordinator.write.timeout.ms',
    'int',
    5000,
    'How long a write to __share_group_state waits for the in-sync replicas.',
    { min: 1 },
  ),
  // Transactions (src/coordinator/transaction): Kafka's names and defaults.
  def('transaction.state.log.num.partitions', 'int', 50, 'Partitions of __transaction_state.', { min: 1 }),
  def('transaction.state.log.replication.factor', 'short', 3, 'Replication of __transaction_state.', {
    min: 1,
  }),
  def('transaction.state.log.min.isr', 'int', 2, 'min.insync.replicas of __transaction_state.', { min: 1 }),
  def('transaction.state.log.segment.bytes', 'int', 104857600, 'Segment size of __transaction_state.', {
    min: 1,
  }),
  def('transaction.state.log.load.buffer.size', 'int', 5242880, 'Bytes read at a time when loading.', {
    min: 1,
  }),
  def('transaction.max.timeout.ms', 'int', 900000, 'Largest transaction.timeout.ms a producer may ask for.', {
    min: 1,
  }),
  def('transactional.id.expiration.ms', 'int', 604800000, 'An idle transactional id is removed after this.', {
    min: 1,
  }),
  def(
    'transaction.abort.timed.out.transaction.cleanup.interval.ms',
    'int',
    10000,
    'How often transactions past their timeout are aborted.',
    { min: 1 },
  ),
  def(
    'transaction.remove.expired.transaction.cleanup.interval.ms',
    'int',
    3600000,
    'How often expired transactional ids are removed.',
    { min: 1 },
  ),
  def(
    'request.timeout.ms',
    'int',
    30000,
    'How long an inter-broker request (transaction markers) may take.',
    {
      min: 0,
    },
  ),
  // Operations (src/ops, docs/operations.md): tidelog's own names, in Kafka's dotted style.
  def(
    'tidelog.shutdown.timeout.ms',
    'long',
    30000,
    'After SIGTERM or SIGINT, `tidelog start` and `tidelog broker` exit with status 1 if the clean shutdown takes longer (the logs then recover at the next start).',
    { min: 1 },
  ),
  def(
    'tidelog.http.listener',
    'string',
    null,
    'HOST:PORT of the HTTP listener for /metrics, /healthz, /readyz and the console; off when null.',
  ),
  def(
    'tidelog.request.log.slow.ms',
    'long',
    1000,
    'Requests slower than this (purgatory wait excluded) are logged at warn; -1 turns it off.',
    { min: -1 },
  ),
  def(
    'tidelog.metadata.store.max.txn.ops',
    'int',
    STORE_LIMITS_DEFAULT.txnOpsMax,
    "Compares, and ops, per metadata store transaction: etcd's --max-txn-ops (its default 128); larger writes are split. The embedded store keeps the same limit.",
    { min: 8 },
  ),
  def(
    'tidelog.metadata.store.max.request.bytes',
    'int',
    STORE_LIMITS_DEFAULT.requestBytesMax,
    "Bytes per metadata store transaction: etcd's --max-request-bytes (its default 1.5 MiB); larger writes are split. The embedded store keeps the same limit.",
    { min: 65536 },
  ),
  def(
    'tidelog.console.topic.admin.enable',
    'boolean',
    false,
    'Let the web console create and delete topics.',
  ),
  def(
    'tidelog.schema.registry.enable',
    'boolean',
    true,
    'Serve the schema registry (Confluent API) under /schema-registry/ on the HTTP listener and on tidelog.schema.registry.listener.',
  ),
  def(
    'tidelog.schema.registry.listener',
    'string',
    null,
    "HOST:PORT (or http://HOST:PORT, or https://HOST:PORT for TLS) of the schema registry's own listener (the API at its root, as Confluent's on 8081); off when null.",
  ),
  def(
    'tidelog.schema.registry.ssl.listener.name',
    'string',
    null,
    'The Kafka listener whose ssl.* settings (key store, trust store, ssl.client.auth) an https:// schema registry listener serves with; null: the first SSL or SASL_SSL listener, else the top-level ssl.* settings.',
  ),
  def(
    'tidelog.schema.registry.authentication.method',
    'string',
    'AUTO',
    "HTTP authentication of the schema registry (its own listener and /schema-registry/): BASIC checks basic auth against the cluster's SASL users (PLAIN's JAAS users, SCRAM credentials) and applies the Kafka ACLs to subjects; NONE lets anyone in; AUTO is BASIC when a listener uses SASL with PLAIN or SCRAM, else NONE.",
    { oneOf: ['AUTO', 'BASIC', 'NONE'] },
  ),
])

function def(
  name: string,
  type: ConfigDef['type'],
  defaultValue: ConfigValue,
  doc: string,
  validator?: ConfigDef['validator'],
  dynamic = false,
): ConfigDef {
  return { name, type, defaultValue, doc, validator, dynamic }
}

/** Typed broker settings (camelCase, units in names). */
export interface BrokerConfig {
  readonly nodeId: BrokerId
  readonly host: string
  readonly port: number
  readonly advertisedHost: string
  readonly advertisedPort: number
  readonly logDirs: readonly string[]
  readonly clusterId: string | null
  readonly socketRequestMaxBytes: number
  readonly queuedMaxRequests: number
  /** queued.max.request.bytes; null: unbounded (-1). */
  readonly queuedMaxRequestBytes: number | null
  /** tidelog.connection.queued.max.request.bytes; null: unbounded (-1). */
  readonly connectionQueuedMaxRequestBytes: number | null
  readonly connectionsMaxIdleMs: number
  readonly rack: string | null
  /** Every listener, what is advertised of each, and the inter-broker one (security/listeners.ts). */
  readonly listeners: ListenerSettings
  /** `listener.name.<listener>.<config>` overrides, by full property name, parsed. */
  readonly listenerOverrides: ReadonlyMap<string, ConfigValue>
  /** Every property as given or defaulted, by Kafka name (DescribeConfigs reads these). */
  readonly values: ReadonlyMap<string, ConfigValue>
  /** Names set explicitly (source STATIC_BROKER_CONFIG) rather than defaulted. */
  readonly explicit: ReadonlySet<string>
}

/** The metadata store's transaction limits from the properties (those of a store made before the broker's config). */
export function storeLimitsFromProperties(properties: ReadonlyMap<string, string>): StoreLimits {
  const names = ['tidelog.metadata.store.max.txn.ops', 'tidelog.metadata.store.max.request.bytes']
  const parsed = brokerConfigDefs.parse(
    new Map([...properties].filter(([name]) => names.includes(name))),
    true,
  )
  return {
    txnOpsMax: (parsed.get(names[0]) as number | undefined) ?? STORE_LIMITS_DEFAULT.txnOpsMax,
    requestBytesMax: (parsed.get(names[1]) as number | undefined) ?? STORE_LIMITS_DEFAULT.requestBytesMax,
  }
}

/** broker.session.timeout.ms from properties, for the etcd store made before the broker. */
export function sessionTimeoutMsFromProperties(properties: ReadonlyMap<string, string>): number {
  const name = 'broker.session.timeout.ms'
  const parsed = brokerConfigDefs.parse(new Map([...properties].filter(([key]) => key === name)), true)
  return (parsed.get(name) ?? brokerConfigDefs.get(name)?.defaultValue) as number
}

/** Builds the broker config from Kafka properties (all values as strings). */
export function brokerConfigFromProperties(properties: ReadonlyMap<string, string>): BrokerConfig {
  const props = new Map(properties)
  if (props.has('broker.id') && !props.has('node.id')) props.set('node.id', props.get('broker.id')!)
  props.delete('broker.id')
  const overrideProps = new Map<string, string>()
  for (const [name, value] of props)
    if (name.startsWith('listener.name.')) {
      overrideProps.set(name, value)
      props.delete(name)
    }
  const parsed = brokerConfigDefs.parse(props)
  const values = new Map<string, ConfigValue>()
  for (const d of brokerConfigDefs.defs)
    values.set(d.name, parsed.has(d.name) ? parsed.get(d.name)! : d.defaultValue)
  const listeners = listenerSettings({
    listeners: values.get('listeners') as string[],
    advertisedListeners: values.get('advertised.listeners') as string[] | null,
    securityProtocolMap: values.get('listener.security.protocol.map') as string[],
    interBrokerListenerName: values.get('inter.broker.listener.name') as string | null,
    interBrokerProtocolSet: parsed.has('security.inter.broker.protocol'),
    interBrokerProtocol: values.get('security.inter.broker.protocol') as string,
  })
  const listenerOverrides = checkListenerOverrides(overrideProps, listeners, (name) =>
    brokerConfigDefs.get(name),
  )
  const listener: Endpoint = listeners.listeners[0]
  const advertised: Endpoint = listeners.advertised[0]
  const logDirs = (values.get('log.dirs') as string[] | null) ?? [values.get('log.dir') as string]
  return {
    nodeId: toBrokerId(values.get('node.id') as number),
    host: listener.host,
    port: listener.port,
    advertisedHost: advertised.host,
    advertisedPort: advertised.port,
    logDirs,
    clusterId: values.get('cluster.id') as string | null,
    socketRequestMaxBytes: values.get('socket.request.max.bytes') as number,
    queuedMaxRequests: values.get('queued.max.requests') as number,
    queuedMaxRequestBytes: nonNegativeOrNull(values.get('queued.max.request.bytes') as number),
    connectionQueuedMaxRequestBytes: nonNegativeOrNull(
      values.get('tidelog.connection.queued.max.request.bytes') as number,
    ),
    connectionsMaxIdleMs: values.get('connections.max.idle.ms') as number,
    rack: values.get('broker.rack') as string | null,
    listeners,
    listenerOverrides,
    values,
    explicit: new Set(parsed.keys()),
  }
}

/** `NAME://host:port` (or `host:port`) to its host and port (the name is checked by listenerSettings). */
export function parseListener(listener: string): { host: string; port: number } {
  const match = /^(?:([A-Za-z0-9_.-]+):\/\/)?\[?([^\]]*?)\]?:(\d+)$/.exec(listener.trim())
  if (!match) throw new ConfigError(`Invalid listener ${listener}: expected NAME://host:port`)
  const port = Number(match[3])
  if (port > 65535) throw new ConfigError(`Invalid listener ${listener}: port out of range`)
  return { host: match[2] === '' ? '127.0.0.1' : match[2], port }
}

/**
 * Parses `server.properties` text as Java's Properties.load does (Kafka reads the file with
 * it): `=`, `:` or whitespace between key and value, `#`/`!` comments, `\` line
 * continuations, `\=`, `\:`, `\ ` and `\uXXXX` escapes; a later key wins. Like Java it
 * never refuses a line (a lone word is a key with an empty value). Values keep their
 * spaces; parseConfigValue trims them, as Kafka's ConfigDef does.
 */
export function parseProperties(text: string): Map<string, string> {
  // Without a path separator dot-properties gives a flat key → string object.
  return new Map(Object.entries(parseJavaProperties(text, false) as Record<string, string>))
}

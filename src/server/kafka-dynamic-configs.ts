/**
 * Kafka 3.9's dynamic broker config names (DynamicBrokerConfig.AllDynamicConfigs plus the
 * broker quota configs of DynamicConfig.Broker), which AlterConfigs and
 * IncrementalAlterConfigs accept on a BROKER resource, and the ones Kafka takes only with a
 * broker id (DynamicBrokerConfig.PerBrokerConfigs). tidelog applies those its broker
 * config defines as dynamic; the rest are stored, described and have no effect (listed in
 * docs/accepted-configs.md).
 */

const SSL_RECONFIGURABLE = [
  'ssl.keystore.type',
  'ssl.keystore.location',
  'ssl.keystore.password',
  'ssl.key.password',
  'ssl.keystore.key',
  'ssl.keystore.certificate.chain',
  'ssl.truststore.type',
  'ssl.truststore.location',
  'ssl.truststore.password',
  'ssl.truststore.certificates',
]

/** DynamicListenerConfig.ReconfigurableConfigs: listeners and their security settings. */
const LISTENER_RECONFIGURABLE = [
  'advertised.listeners',
  'listeners',
  'listener.security.protocol.map',
  'principal.builder.class',
  'ssl.protocol',
  'ssl.provider',
  'ssl.cipher.suites',
  'ssl.enabled.protocols',
  'ssl.keymanager.algorithm',
  'ssl.trustmanager.algorithm',
  'ssl.endpoint.identification.algorithm',
  'ssl.secure.random.implementation',
  'ssl.client.auth',
  'ssl.engine.factory.class',
  'sasl.mechanism.inter.broker.protocol',
  'sasl.jaas.config',
  'sasl.enabled.mechanisms',
  'sasl.kerberos.service.name',
  'sasl.kerberos.kinit.cmd',
  'sasl.kerberos.ticket.renew.window.factor',
  'sasl.kerberos.ticket.renew.jitter',
  'sasl.kerberos.min.time.before.relogin',
  'sasl.kerberos.principal.to.local.rules',
  'sasl.login.refresh.window.factor',
  'sasl.login.refresh.window.jitter',
  'sasl.login.refresh.min.period.seconds',
  'sasl.login.refresh.buffer.seconds',
  'connections.max.reauth.ms',
]

/** Listener settings Kafka also takes at the cluster-default level (ClusterLevelListenerConfigs). */
const CLUSTER_LEVEL_LISTENER = ['max.connections', 'max.connection.creation.rate', 'num.network.threads']

/** DynamicLogConfig.ReconfigurableConfigs: the broker synonyms of topic configs. */
const LOG_RECONFIGURABLE = [
  'log.segment.bytes',
  'log.roll.ms',
  'log.roll.hours',
  'log.roll.jitter.ms',
  'log.roll.jitter.hours',
  'log.index.size.max.bytes',
  'log.flush.interval.messages',
  'log.flush.interval.ms',
  'log.retention.bytes',
  'log.retention.ms',
  'log.retention.minutes',
  'log.retention.hours',
  'message.max.bytes',
  'log.index.interval.bytes',
  'log.cleaner.delete.retention.ms',
  'log.cleaner.min.compaction.lag.ms',
  'log.cleaner.max.compaction.lag.ms',
  'log.segment.delete.delay.ms',
  'log.cleaner.min.cleanable.ratio',
  'log.cleanup.policy',
  'unclean.leader.election.enable',
  'min.insync.replicas',
  'compression.type',
  'compression.gzip.level',
  'compression.lz4.level',
  'compression.zstd.level',
  'log.preallocate',
  'log.message.format.version',
  'log.message.timestamp.type',
  'log.message.timestamp.difference.max.ms',
  'log.message.timestamp.before.max.ms',
  'log.message.timestamp.after.max.ms',
  'log.message.downconversion.enable',
  'log.local.retention.ms',
  'log.local.retention.bytes',
]

const OTHER_RECONFIGURABLE = [
  // LogCleaner.ReconfigurableConfigs
  'log.cleaner.threads',
  'log.cleaner.dedupe.buffer.size',
  'log.cleaner.io.buffer.load.factor',
  'log.cleaner.io.buffer.size',
  'log.cleaner.io.max.bytes.per.second',
  'log.cleaner.backoff.ms',
  // DynamicThreadPool.ReconfigurableConfigs
  'num.io.threads',
  'num.replica.fetchers',
  'num.recovery.threads.per.data.dir',
  'background.threads',
  'metric.reporters',
  // SocketServer.ReconfigurableConfigs
  'max.connections.per.ip',
  'max.connections.per.ip.overrides',
  // DynamicProducerStateManagerConfig
  'producer.id.expiration.ms',
  'transaction.partition.verification.enable',
  // DynamicRemoteLogConfig.ReconfigurableConfigs
  'remote.log.index.file.cache.total.size.bytes',
  'remote.log.manager.copy.max.bytes.per.second',
  'remote.log.manager.fetch.max.bytes.per.second',
  // DynamicConfig.Broker's quota configs
  'leader.replication.throttled.rate',
  'follower.replication.throttled.rate',
  'replica.alter.log.dirs.io.max.bytes.per.second',
]

export const KAFKA_DYNAMIC_BROKER_CONFIGS: ReadonlySet<string> = new Set([
  ...SSL_RECONFIGURABLE,
  ...LISTENER_RECONFIGURABLE,
  ...CLUSTER_LEVEL_LISTENER,
  ...LOG_RECONFIGURABLE,
  ...OTHER_RECONFIGURABLE,
])

const PER_BROKER_ONLY: ReadonlySet<string> = new Set([...SSL_RECONFIGURABLE, ...LISTENER_RECONFIGURABLE])

/** `listener.name.<listener>.<config>`: a setting of one listener. */
const LISTENER_PREFIXED = /^listener\.name\.[^.]+\.(.+)$/

/** Kafka's perBrokerConfigs: names that need a broker id (not the cluster default). */
export function isPerBrokerOnly(name: string): boolean {
  if (PER_BROKER_ONLY.has(name)) return true
  const base = LISTENER_PREFIXED.exec(name)?.[1]
  return base !== undefined && !CLUSTER_LEVEL_LISTENER.includes(base)
}

/**
 * The layering of src/ (STYLE.md): imports go one way, common <- protocol <- storage <-
 * replication <- server, with metadata, coordinator, client and cli beside them; no cycles,
 * type-only imports included. Run by the test command (`npm run lint:deps`).
 */
const core = '^src/(common|protocol|storage|replication|metadata|coordinator|server/handlers)/'
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import cycle (type-only imports count: they couple the modules all the same).',
      from: {},
      to: { circular: true },
    },
    {
      name: 'storage-below-replication',
      severity: 'error',
      comment: 'storage knows nothing of replication, metadata, coordinators or the server.',
      from: { path: '^src/storage/' },
      to: { path: '^src/(replication|metadata|coordinator|server|client|cli|sim|runtime)/' },
    },
    {
      name: 'client-speaks-protocol-only',
      severity: 'error',
      comment: "tidelog's client imports only protocol and common (it must run without a broker).",
      from: { path: '^src/client/' },
      to: { path: '^src/(server|storage|replication|metadata|coordinator|sim|cli|runtime)/' },
    },
    {
      name: 'client-network-is-injected',
      severity: 'error',
      comment:
        "tidelog's client opens streams through its injected connector (client/connector.ts); only the default one, client/tcp-connector.ts, touches sockets.",
      from: { path: '^src/client/', pathNot: '^src/client/tcp-connector\\.ts$' },
      to: { path: '^(node:)?(net|tls|dgram)$', dependencyTypes: ['core'] },
    },
    {
      name: 'schema-registry-is-a-client',
      severity: 'error',
      comment:
        "The schema registry reads and writes _schemas through tidelog's client, as any client would; the broker reaches it through src/ops only.",
      from: { path: '^src/schema-registry/' },
      to: { path: '^src/(server|storage|replication|metadata|coordinator|ops|cli|sim|runtime|testing)/' },
    },
    {
      name: 'registry-loaded-by-ops',
      severity: 'error',
      comment: 'Only ops loads the registry (lazily); the broker may name its types.',
      from: { path: '^src/(?!ops/|schema-registry/|server/broker(-http)?\\.ts)' },
      to: { path: '^src/schema-registry/', dependencyTypes: ['local', 'import'] },
    },
    {
      name: 'ops-below-the-server',
      severity: 'error',
      comment:
        'ops (metrics, health checks, console, the registry listener) is composed by the server, which hands it what it needs (parsed listeners, the broker state): it imports no composition.',
      from: { path: '^src/ops/' },
      to: { path: '^src/(server|cli|sim|runtime|testing)/' },
    },
    {
      name: 'runtime-is-parts-not-composition',
      comment:
        "src/runtime holds Node's real parts (clock, disk, TCP, TLS) and builds them from the interfaces below it (common; protocol's frame reader for TCP; security's TLS provider); whoever composes a broker imports it, never the other way.",
      severity: 'error',
      from: { path: '^src/runtime/' },
      to: {
        path: '^src/(storage|replication|metadata|coordinator|server|client|ops|schema-registry|cli|sim|testing)/',
      },
    },
    {
      name: 'protocol-is-the-bottom',
      severity: 'error',
      from: { path: '^src/protocol/' },
      to: { path: '^src/(?!common/|protocol/)' },
    },
    {
      name: 'metadata-below-replication',
      severity: 'error',
      comment:
        'The metadata layer (store, cluster image, controller) is read by replication, the coordinators and the server; it imports only common, protocol and storage (log configs).',
      from: { path: '^src/metadata/' },
      to: { path: '^src/(?!common/|protocol/|storage/|metadata/)' },
    },
    {
      name: 'replication-below-coordinators',
      severity: 'error',
      comment: 'Partition, the replica manager and fetchers build on storage and metadata; nothing above them.',
      from: { path: '^src/replication/' },
      to: { path: '^src/(?!common/|protocol/|storage/|metadata/|replication/)' },
    },
    {
      name: 'coordinators-below-the-server',
      severity: 'error',
      comment: 'The group, share, streams and transaction coordinators sit on replication; the server composes them.',
      from: { path: '^src/coordinator/' },
      to: { path: '^src/(?!common/|protocol/|storage/|metadata/|replication/|coordinator/)' },
    },
    {
      name: 'security-below-the-server',
      severity: 'error',
      comment:
        'Authentication, ACLs, TLS and credentials: they keep credentials in the metadata store and dial through common\'s Transport; the server (and runtime, for TLS) use them.',
      from: { path: '^src/security/' },
      to: { path: '^src/(?!common/|protocol/|metadata/|security/)' },
    },
    {
      name: 'the-broker-is-built-from-its-parts',
      severity: 'error',
      comment:
        "Broker.create has no default parts: Node's are chosen by the files that compose brokers on Node (startCluster, the broker threads) and by the HTTP listener, which serves node:https itself.",
      from: { path: '^src/server/', pathNot: '^src/server/(cluster|broker-worker|broker-http)\\.ts$' },
      to: { path: '^src/runtime/' },
    },
    {
      name: 'the-edges-are-the-top',
      severity: 'error',
      comment: 'cli/ and testing/ compose brokers (the CLI uses testing/ for its process faults); nothing below them imports them.',
      from: { path: '^src/(?!cli/|testing/)' },
      to: { path: '^src/(cli|testing)/' },
    },
    {
      name: 'verify-is-standalone',
      severity: 'error',
      comment: '`tidelog verify` checks a recorded history; it needs nothing of the broker.',
      from: { path: '^src/verify/' },
      to: { path: '^src/(?!common/|verify/)' },
    },
    {
      name: 'common-is-the-bottom',
      severity: 'error',
      from: { path: '^src/common/' },
      to: { path: '^src/(?!common/)' },
    },
    {
      name: 'core-has-no-ambient-io',
      severity: 'error',
      comment:
        'Core code gets the network and the disk from injected parts (common/network.ts, common/file-system.ts), never from node:net or node:fs.',
      from: { path: core },
      to: { path: '^(node:)?(net|fs|fs/promises|http|https|tls|dgram|child_process)$', dependencyTypes: ['core'] },
    },
    {
      name: 'real-parts-at-the-composition-root',
      severity: 'error',
      comment: "Node's real parts (src/runtime) are chosen where a broker is composed, not inside the core.",
      from: { path: core },
      to: { path: '^src/runtime/' },
    },
    {
      name: 'nothing-imports-the-simulator',
      severity: 'error',
      from: { path: '^src/(?!sim/)' },
      to: { path: '^src/sim/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/protocol/generated/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
}

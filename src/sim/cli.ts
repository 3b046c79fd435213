/**
 * `npm run sim -- --seed N [--ticks T]` replays one run; `--seeds K [--from S]` runs K seeds.
 * `--mutation unclean-election|isr-without-cas|hw-truncation` breaks one rule to show the simulator finds it.
 * `--store-latency N` puts the metadata store N ms away; `--store-stalls` adds store-link stalls.
 * `--transactions` adds transactional producers and read_committed consumers;
 * `--transaction-version 2` finalizes transaction.version 2, so they use KIP-890 part 2 (default 1).
 * `--replication-factor N` (1..3) and `--min-isr N` set the topic's RF and min.insync.replicas.
 * `--share` adds a share group: tidelog's own producer and share consumers (share-workload.ts).
 * `--compaction` (with `--groups` or `--transactions`) compacts their internal topics during the run.
 * `--partitions N` gives the topic N partitions (over 384 with 3 brokers: a broker leads more
 * than etcd's 128 operations per transaction).
 * `--scale N` adds N partitions (thousands) in many topics, created under faults (see README, Scale).
 * Each seed's line gives its wall time, simulated time and events per wall second.
 * A failing run prints its seed and trace; the exit code is 1 if any run failed.
 */
import { MUTATIONS, type Mutation } from './mutations.js'
import { runSimulation } from './world.js'

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : undefined
}

/** `--seed N`, or `--seeds K [--from S]` (S random by default). */
function seedsArg(): number[] {
  if (arg('seed') !== undefined) return [Number(arg('seed'))]
  const count = Number(arg('seeds') ?? 10)
  const from = arg('from') !== undefined ? Number(arg('from')) : Math.floor(Math.random() * 2 ** 31)
  return Array.from({ length: count }, (_, i) => from + i)
}

function brokersArg(): number | undefined {
  const brokers = arg('brokers') !== undefined ? Number(arg('brokers')) : undefined
  if (brokers !== undefined && !(brokers >= 3 && brokers <= 5)) throw new Error('--brokers must be 3..5')
  return brokers
}

/** `--scale N`: N partitions more, at least two 20-partition topics' worth. */
function scaleArg(): number | undefined {
  if (arg('scale') === undefined) return undefined
  const partitions = Number(arg('scale'))
  if (!(Number.isInteger(partitions) && partitions >= 40))
    throw new Error('--scale must be an integer of at least 40 (partitions)')
  return partitions
}

/** The run's flags for its replay line: every argument but the seed choice and --trace. */
function replayFlags(): string {
  const flags: string[] = []
  const args = process.argv.slice(2)
  for (let i = 0; i < args.length; i++) {
    if (['--seed', '--seeds', '--from'].includes(args[i])) i++
    else if (args[i] !== '--trace') flags.push(args[i])
  }
  return flags.map((f) => ` ${f}`).join('')
}

function transactionVersionArg(): 1 | 2 {
  const version = Number(arg('transaction-version') ?? 1)
  if (version !== 1 && version !== 2) throw new Error('--transaction-version must be 1 or 2')
  return version
}

async function main(): Promise<number> {
  const ticks = arg('ticks') !== undefined ? Number(arg('ticks')) : undefined
  const mutation = (arg('mutation') ?? 'none') as Mutation
  if (!MUTATIONS.includes(mutation)) {
    console.error(`unknown --mutation ${mutation}; one of ${MUTATIONS.join(', ')}`)
    process.exit(2)
  }
  const verbose = process.argv.includes('--verbose')
  const storeLatencyMaxMs = Number(arg('store-latency') ?? 0)
  const storeStalls = process.argv.includes('--store-stalls')
  const twoImpairments = process.argv.includes('--two-impairments')
  const idempotentProducers = process.argv.includes('--idempotent')
  const consumers = process.argv.includes('--consumers')
  const diskErrors = process.argv.includes('--disk-errors')
  const consumerProtocol = process.argv.includes('--consumer-protocol')
  const groups = process.argv.includes('--groups') || consumerProtocol
  const transactions = process.argv.includes('--transactions')
  const transactionVersion = transactionVersionArg()
  const compaction = process.argv.includes('--compaction')
  if (compaction && !groups && !transactions) throw new Error('--compaction needs --groups or --transactions')
  const brokers = brokersArg()
  const partitions = arg('partitions') !== undefined ? Number(arg('partitions')) : undefined
  if (partitions !== undefined && !(Number.isInteger(partitions) && partitions >= 1))
    throw new Error('--partitions must be a positive integer')
  const replicationFactor =
    arg('replication-factor') !== undefined ? Number(arg('replication-factor')) : undefined
  if (replicationFactor !== undefined && !(replicationFactor >= 1 && replicationFactor <= 3))
    throw new Error('--replication-factor must be 1..3')
  const minInsyncReplicas = arg('min-isr') !== undefined ? Number(arg('min-isr')) : undefined
  if (
    minInsyncReplicas !== undefined &&
    !(minInsyncReplicas >= 1 && minInsyncReplicas <= (replicationFactor ?? 3))
  )
    throw new Error('--min-isr must be 1..the replication factor')
  const scalePartitions = scaleArg()
  const printTrace = process.argv.includes('--trace')
  const seeds = seedsArg()
  let failed = 0
  for (const seed of seeds) {
    const started = performance.now()
    const result = await runSimulation({
      seed,
      ...(ticks !== undefined ? { ticks } : {}),
      mutation,
      verbose,
      storeLatencyMaxMs,
      storeStalls,
      twoImpairments,
      idempotentProducers,
      consumers,
      diskErrors,
      acksZero: process.argv.includes('--acks0'),
      groups,
      consumerProtocol,
      transactions,
      transactionVersion,
      compaction,
      share: process.argv.includes('--share'),
      ...(brokers !== undefined ? { brokers } : {}),
      ...(partitions !== undefined ? { partitions } : {}),
      ...(replicationFactor !== undefined ? { replicationFactor } : {}),
      ...(minInsyncReplicas !== undefined ? { minInsyncReplicas } : {}),
      ...(scalePartitions !== undefined ? { scalePartitions } : {}),
    })
    const wallMs = Math.round(performance.now() - started)
    const s = result.stats
    console.log(
      `seed ${seed}: ${result.ok ? 'ok' : 'FAILED'} (${s.simulatedMs} ms simulated, ${s.events} events, ${wallMs} ms wall; produced ${s.produced}, acked all ${s.ackedAll} / one ${s.ackedOne}; crashes ${s.crashes}, partitions ${s.partitions}, session expiries ${s.sessionExpiries}${s.diskErrors > 0 ? `, disk errors ${s.diskErrors}` : ''}${compaction ? `, cleaner checkpoints ${s.cleanerCheckpoints}` : ''}${scalePartitions !== undefined ? `, longest failover wait ${s.failoverMaxMs} ms` : ''}; ${Math.round(s.events / Math.max(wallMs / 1000, 0.001))} events/s)`,
    )
    if (!result.ok || printTrace) {
      if (!result.ok) failed++
      console.log(result.trace.join('\n'))
      if (!result.ok)
        console.log(
          `seed ${seed} FAILED: ${result.violation}\nreplay: npm run sim -- --seed ${seed}${replayFlags()}`,
        )
    }
  }
  return failed > 0 ? 1 : 0
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error)
    process.exit(2)
  },
)

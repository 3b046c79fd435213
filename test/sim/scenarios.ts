/**
 * What a named simulation seed must show in its trace for its test to mean what its name
 * says: a passing run proves nothing about a scenario that never happened (a seed drifts
 * off its scenario whenever the fault schedule or the broker's timing changes). Each
 * scenario is a sequence of trace markers, found in order; a later marker may depend on
 * what an earlier one matched (the broker id, the partition). The markers are lines that
 * src/sim/world.ts and invariants.ts write themselves (FAULT, HEAL, DISK ERROR, ADMIN,
 * STORE, ...), not the brokers' own log lines, which change with the broker's code.
 */
import type { SimOptions } from '../../src/sim/world.js'

export interface Step {
  /** The line to find next; a function builds it from the earlier steps' matches. */
  readonly marker: RegExp | ((earlier: readonly RegExpExecArray[]) => RegExp)
  /** No line between the previous step's line and this one may match this. */
  readonly unless?: (earlier: readonly RegExpExecArray[]) => RegExp
}

export interface Scenario {
  /** What the markers show, for the failure message. */
  readonly what: string
  readonly steps: readonly Step[]
}

/** The trace lines that make up `scenario`, or null when it did not happen. */
export function findScenario(trace: readonly string[], scenario: Scenario): string[] | null {
  const search = (
    step: number,
    from: number,
    earlier: RegExpExecArray[],
    lines: string[],
  ): string[] | null => {
    if (step === scenario.steps.length) return lines
    const { marker, unless } = scenario.steps[step]
    const pattern = typeof marker === 'function' ? marker(earlier) : marker
    const stop = unless?.(earlier)
    for (let i = from; i < trace.length; i++) {
      const match = pattern.exec(trace[i])
      if (match) {
        const found = search(step + 1, i + 1, [...earlier, match], [...lines, trace[i]])
        if (found) return found
      }
      if (stop?.test(trace[i])) return null
    }
    return null
  }
  return search(0, 0, [], [])
}

/** A STORE line: partition `topic-p` changes leader away from `from` (any broker when omitted). */
export function leadershipMoves(topic: string, partition = '\\d+', from = '(\\d+)'): RegExp {
  const away = from === '(\\d+)' ? '(?!\\1 )' : `(?!${from} )`
  return new RegExp(
    `STORE ${topic}-${partition}: leader ${from} epoch \\d+ ISR [\\d,]+ -> leader ${away}\\d+ `,
  )
}

/** The liveness phase ended with every partition led, its ISR full and its replicas converged. */
export const CONVERGED: Step = { marker: /converged after \d+ ms/ }

/** Every simulation run: faults were injected during the safety phase, and the cluster converged. */
export const FAULTS_THEN_CONVERGED: Scenario = {
  what: 'a fault injected during the safety phase, then convergence after healing',
  steps: [{ marker: / FAULT / }, CONVERGED],
}

/** The replay flags of `options` for `npm run sim -- --seed N ...`. */
export function simFlags(options: SimOptions): string {
  const flags: string[] = []
  if (options.ticks !== undefined) flags.push(`--ticks ${options.ticks}`)
  if (options.mutation !== undefined && options.mutation !== 'none')
    flags.push(`--mutation ${options.mutation}`)
  if (options.storeLatencyMaxMs !== undefined && options.storeLatencyMaxMs > 0)
    flags.push(`--store-latency ${options.storeLatencyMaxMs}`)
  if (options.storeStalls === true) flags.push('--store-stalls')
  if (options.idempotentProducers === true) flags.push('--idempotent')
  if (options.consumers === true) flags.push('--consumers')
  if (options.brokers !== undefined) flags.push(`--brokers ${options.brokers}`)
  if (options.partitions !== undefined) flags.push(`--partitions ${options.partitions}`)
  if (options.replicationFactor !== undefined) flags.push(`--replication-factor ${options.replicationFactor}`)
  if (options.minInsyncReplicas !== undefined) flags.push(`--min-isr ${options.minInsyncReplicas}`)
  if (options.scalePartitions !== undefined) flags.push(`--scale ${options.scalePartitions}`)
  if (options.diskErrors === true) flags.push('--disk-errors')
  if (options.acksZero === true) flags.push('--acks0')
  if (options.consumerProtocol === true) flags.push('--consumer-protocol')
  else if (options.groups === true) flags.push('--groups')
  if (options.transactions === true) flags.push('--transactions')
  if (options.transactionVersion === 2) flags.push('--transaction-version 2')
  if (options.compaction === true) flags.push('--compaction')
  if (options.share === true) flags.push('--share')
  return flags.map((f) => ` ${f}`).join('')
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** Seed 36: a leader back from a power loss, still registered and leader in the store; the leadership leaves it. */
export const POWER_LOST_LEADER_RETURNS: Scenario = {
  what: 'a broker crashes with power loss, restarts while the store still names it leader, then the leadership moves away from it',
  steps: [
    { marker: /FAULT crash broker (\d+) with power loss/ },
    {
      marker: ([crash]) =>
        new RegExp(`broker ${crash[1]} restarts still registered in the store, leader there of p(\\d+)`),
      unless: ([crash]) => new RegExp(`FAULT crash broker ${crash[1]}\\b`),
    },
    { marker: ([crash, back]) => leadershipMoves('sim', back[1], crash[1]) },
  ],
}

/** Issue 41 (seed 3 with min.insync.replicas 1): the sole ISR member of a partition, its leader, is killed and restarts still leading it. */
export const SOLE_ISR_LEADER_RESTARTS: Scenario = {
  what: 'the leader and sole ISR member of a partition crashes (page cache kept), restarts still registered and leader of it in the store, and the cluster converges',
  steps: [
    {
      marker:
        /FAULT crash broker (\d+): process crash, page cache kept \(sole ISR member of [p\d,]*\bp(\d+)\b/,
    },
    {
      marker: ([crash]) =>
        new RegExp(
          `broker ${crash[1]} restarts still registered in the store, leader there of [p\\d,]*\\bp${crash[2]}\\b`,
        ),
      unless: ([crash]) => new RegExp(`FAULT crash broker ${crash[1]}\\b`),
    },
    CONVERGED,
  ],
}

/** Seeds 5 and 91 (since broker incarnations 308, since follower fetch sessions 61): a follower truncates, then loses power before its process restarts. */
export const TRUNCATED_FOLLOWER_LOSES_POWER: Scenario = {
  what: "a replica's log end drops (a truncation), the same process then crashes with power loss, restarts, and the cluster converges",
  steps: [
    { marker: /\(log end of p(\d+) on broker (\d+) dropped \d+ -> \d+\)/ },
    {
      marker: ([cut]) => new RegExp(`FAULT crash broker ${cut[2]} with power loss`),
      unless: ([cut]) => new RegExp(`start broker ${cut[2]} \\(`),
    },
    { marker: ([cut]) => new RegExp(`start broker ${cut[2]} \\(incarnation`) },
    CONVERGED,
  ],
}

/** Seed 33 with store latency: a leader's ISR expansion stays in flight across an unrelated image change, then commits. */
export const ISR_EXPANSION_ACROSS_IMAGE_CHANGE: Scenario = {
  what: "the store changes (not the partition) while a leader's ISR expansion is in flight, and that expansion then commits",
  steps: [
    {
      marker:
        /\(leader (\d+) of p(\d+): ISR expansion to ([\d,]+) in flight across an unrelated store change\)/,
    },
    {
      marker: ([pending]) =>
        new RegExp(
          `STORE sim-${pending[2]}: leader ${pending[1]} epoch \\d+ ISR [\\d,]+ -> leader ${pending[1]} epoch \\d+ ISR ${pending[3]}$`,
        ),
    },
  ],
}

/** Seed 3 with store latency: a leader's own ISR write commits through the latent store, and the cluster converges. */
export const LEADER_ISR_WRITE_THROUGH_LATENT_STORE: Scenario = {
  what: "a leader's ISR expansion (its own write: the controller never expands an ISR) commits in the store, then convergence",
  steps: [
    { marker: /STORE sim-\d+: leader (\d+) epoch (\d+) ISR ([\d,]+) -> leader \1 epoch \2 ISR \3,\d+$/ },
    CONVERGED,
  ],
}

/** Store stalls: a leader's store link stalls and, while it is stalled, the store moves a leadership away from it. */
export const STALLED_LEADER_LOSES_LEADERSHIP: Scenario = {
  what: "a leader's store link stalls, and a leadership moves away from it before the link heals",
  steps: [
    { marker: /FAULT store link of broker (\d+) stalls/ },
    {
      marker: ([stall]) => leadershipMoves('sim', '\\d+', stall[1]),
      unless: ([stall]) => new RegExp(`HEAL store link of broker ${stall[1]}\\b|HEAL everything`),
    },
    CONVERGED,
  ],
}

/**
 * Idempotent producers (tidelog's own Producer): a batch sent to one broker and not
 * acknowledged to the client (an error, or an answer lost with its leader or connection)
 * is sent again, unchanged, to another broker (a new leader), which acknowledges it. The
 * lines are the world's tap on the brokers' Produce requests.
 */
export const IDEMPOTENT_RETRY_ON_NEW_LEADER: Scenario = {
  what: "an idempotent producer's batch is sent again to another broker (a new leader), which acknowledges it",
  steps: [
    {
      marker:
        /(idempotent batch p\d+ producer \d+ epoch \d+ sequence \d+) sent again, to broker (\d+) \(first to broker \d+\)/,
    },
    {
      marker: ([sent]) =>
        new RegExp(`${escapeRegExp(sent[1])} acknowledged by broker ${sent[2]} at offset \\d+`),
    },
  ],
}

/** Consumers: a leadership changes while consumers read, and they then catch up with the high watermark. */
export const CONSUMERS_ACROSS_LEADER_CHANGE: Scenario = {
  what: 'a leadership moves in the store during the run, and every consumer catches up at the end',
  steps: [{ marker: leadershipMoves('sim') }, { marker: /consumers caught up: / }],
}

/** Five brokers: a broker is crashed or cut off, comes back, and the cluster converges; consumers catch up. */
export const FIVE_BROKERS_ONE_IMPAIRED: Scenario = {
  what: 'a broker crashed or cut off, then restarted or healed, convergence, and consumers caught up',
  steps: [
    { marker: /FAULT (?:crash|partition) broker (\d+)/ },
    { marker: ([fault]) => new RegExp(`(start broker|HEAL network of broker) ${fault[1]}\\b`) },
    CONVERGED,
    { marker: /consumers caught up: / },
  ],
}

/** Disk errors: an EIO on a leader takes its log dir offline; it stops itself; the leadership moves. */
export const LEADER_LOG_DIR_OFFLINE: Scenario = {
  what: 'an EIO fires on a broker the store names leader, its every log dir goes offline and it stops itself, then the leadership moves away from it',
  steps: [
    { marker: /DISK ERROR on broker (\d+): .*; leader in the store of p/ },
    {
      marker: ([error]) =>
        new RegExp(`broker ${error[1]} stopped itself \\(every log dir offline\\), controlled`),
    },
    { marker: ([error]) => leadershipMoves('sim', '\\d+', error[1]) },
  ],
}

/** Everything at once: a disk error fires, acks=0 writes land, and consumers catch up. */
export const DISK_ERROR_AND_ACKS_ZERO: Scenario = {
  what: 'an EIO fires on some broker, some acks=0 writes over the network commit, and consumers catch up',
  steps: [
    { marker: /DISK ERROR on broker \d+/ },
    { marker: /acks=0: [1-9]\d* of \d+ writes committed/ },
    { marker: /consumers caught up: / },
  ],
}

/** Groups: the group's coordinator (the leader of its __consumer_offsets partition) moves to another broker. */
export const COORDINATOR_FAILOVER: Scenario = {
  what: "the leadership of the group's __consumer_offsets partition (its coordinator) moves to another broker, then convergence",
  steps: [
    { marker: /group \S+ in p(\d+)/ },
    { marker: ([group]) => leadershipMoves('__consumer_offsets', group[1]) },
    CONVERGED,
  ],
}

/** A transaction's name as a pattern that does not also match a longer one (x0.1, not x0.10). */
const txnPattern = (txnId: string): string => `${escapeRegExp(txnId)}(?!\\d)`

/** The summary line of a `transactions` run: its end checks passed. */
export const TRANSACTIONS_CHECKED: Step = { marker: /transactions: \d+ begun, \d+ committed/ }

/**
 * Transactions: the leadership of a producer's __transaction_state partition (its transaction
 * coordinator) moves while one of its transactions is open (begun, not ended), and that
 * transaction then commits through the new coordinator; the end checks pass.
 */
export const TXN_COORDINATOR_FAILOVER_MID_TRANSACTION: Scenario = {
  what: "a producer's transaction coordinator moves to another broker in the middle of a transaction, which then commits",
  steps: [
    { marker: /transactional id sim-txn-(\d+) in __transaction_state-(\d+)/ },
    { marker: ([id]) => new RegExp(`txn producer ${id[1]}: txn (x${id[1]}\\.\\d+) begins`) },
    {
      marker: ([id]) => leadershipMoves('__transaction_state', id[2]),
      unless: ([, begin]) =>
        new RegExp(`txn ${txnPattern(begin[1])}(?: (?:committed|aborted|ends)|: commit)`),
    },
    { marker: ([, begin]) => new RegExp(`txn ${txnPattern(begin[1])} committed`) },
    TRANSACTIONS_CHECKED,
  ],
}

/** Transactions: a paused instance is replaced (epoch bump), resumes as a zombie and is fenced. */
export const ZOMBIE_FENCED: Scenario = {
  what: 'a producer instance pauses mid-transaction, a new instance takes over, and the old one resumes and is fenced',
  steps: [
    {
      marker:
        /txn producer (\d+): instance (\d+) \(producer \d+ epoch \d+\) pauses for \d+ ms mid-transaction (\S+);/,
    },
    {
      marker: ([pause]) =>
        new RegExp(
          `txn producer ${pause[1]}: zombie instance ${pause[2]} .* resumes txn ${txnPattern(pause[3])}`,
        ),
    },
    {
      marker: ([pause]) =>
        new RegExp(
          `txn ${txnPattern(pause[3])}(?: ends without commit: fenced|: commitTransaction failed \\(\\S+, fenced\\))`,
        ),
    },
    TRANSACTIONS_CHECKED,
  ],
}

/**
 * Transactions: a leader whose store link stalls is deposed without knowing, and appends a
 * late write of a producer epoch its client already left (the coordinator closed the old
 * epoch's transaction on the new leader only, so the deposed one skips KIP-890's
 * verification, as Kafka does); it is truncated away when the broker learns, never committed.
 */
export const DEPOSED_LEADER_APPENDS_FENCED_EPOCH: Scenario = {
  what: "a stalled, deposed leader appends a fenced epoch's late write, which is truncated away uncommitted",
  steps: [
    { marker: /FAULT store link of broker (\d+) stalls/ },
    {
      marker: ([stall]) =>
        new RegExp(
          `\\(fenced epoch wrote again: deposed leader ${stall[1]} .* to p(\\d+) at offset \\d+, .*: allowed unless it is committed\\)$`,
        ),
    },
    {
      marker: ([stall, append]) =>
        new RegExp(`\\(log end of p${append[1]} on broker ${stall[1]} dropped \\d+ -> \\d+\\)`),
    },
    TRANSACTIONS_CHECKED,
  ],
}

/**
 * Transactions: a produce that its client gave up on (its transaction aborted) reaches the
 * leader late and is refused: INVALID_TXN_STATE (KIP-890's verification, the coordinator's
 * transaction is over) or INVALID_PRODUCER_EPOCH (the abort's epoch bump, which the
 * verification or a later write of the new epoch told the leader).
 */
export const LATE_WRITE_REFUSED_BY_VERIFICATION: Scenario = {
  what: "a produce whose link to the leader stalls past its batch's delivery timeout lands after the client gave up and aborted, and is refused",
  steps: [
    {
      marker:
        /txn producer (\d+): txn (\S+) \(p(\d+)\): link of instance (\d+) to broker (\d+) holds its bytes/,
    },
    {
      marker: ([held]) =>
        new RegExp(
          `late produce of sim-txn-${held[1]}-${held[4]} \\(.*\\) to broker ${held[5]}: p${held[3]} error (?:47|48)$`,
        ),
    },
    TRANSACTIONS_CHECKED,
  ],
}

/**
 * Groups: an OffsetFetch answer computed before a commit arrives after a later fetch's answer
 * that returned the commit (the two overlapped), then the group's end check passes.
 */
export const OFFSET_FETCH_OVERTAKEN: Scenario = {
  what: "an OffsetFetch answer from before a commit arrives after a later, overlapping fetch's answer that returned it",
  steps: [
    {
      marker: /group offsets: broker \d+ returned \d+ for \S+ to a fetch overtaken by one that returned \d+/,
    },
    { marker: /group: .*; acknowledged commits found by the final OffsetFetch/ },
  ],
}

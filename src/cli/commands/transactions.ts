/**
 * `tidelog transactions list|describe`, after kafka-transactions.sh.
 *   list       every transactional id of the cluster: its coordinator, producer id and
 *              state (ListTransactions on every broker); --state and --duration-ms filter
 *   describe   one transactional id at its coordinator: state, producer id and epoch,
 *              timeout, when the open transaction started and its partitions
 *              (DescribeTransactions)
 * Against a broker without the transaction APIs both say so (exit 4).
 */
import { parseArgs } from 'node:util'
import { Admin } from '../../client/admin.js'
import {
  COMMON_OPTIONS,
  clientOptions,
  EXIT_OK,
  EXIT_USAGE,
  guarded,
  isHelp,
  out,
  parseInteger,
  printJson,
  table,
  UsageError,
} from './common.js'

export const TRANSACTIONS_USAGE = `Usage: tidelog transactions <list|describe> [options]

  list       [--state S]... [--duration-ms N]   (transactions open longer than N ms)
  describe   --transactional-id ID

States: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort,
PrepareEpochFence, Dead.
Common: --bootstrap-server HOST:PORT (default 127.0.0.1:9092), --command-config FILE, --json
`

const OPTIONS = {
  ...COMMON_OPTIONS,
  'transactional-id': { type: 'string' },
  state: { type: 'string', multiple: true },
  'duration-ms': { type: 'string' },
} as const

export async function transactionsCommand(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv
  return guarded(`transactions ${sub ?? ''}`.trim(), async () => {
    const { values, positionals } = parseArgs({
      args: rest,
      options: OPTIONS,
      allowPositionals: true,
      strict: true,
    })
    if (values.help || sub === undefined || isHelp(sub)) {
      process.stdout.write(TRANSACTIONS_USAGE)
      return sub === undefined ? EXIT_USAGE : EXIT_OK
    }
    if (sub !== 'list' && sub !== 'describe') throw new UsageError(`unknown transactions subcommand '${sub}'`)
    if (positionals.length > 0)
      throw new UsageError(`transactions ${sub} takes no argument, got '${positionals.join(' ')}'`)
    const transactionalId = values['transactional-id']
    if (sub === 'describe' && !transactionalId)
      throw new UsageError('transactions describe needs --transactional-id ID')
    const durationMs = parseInteger(values['duration-ms'], '--duration-ms', 0)
    const admin = new Admin(
      clientOptions(values['bootstrap-server'], 'tidelog-cli', values['command-config']),
    )
    try {
      if (sub === 'describe') {
        const d = await admin.describeTransaction(transactionalId as string)
        if (values.json) printJson(d)
        else {
          out(
            table(
              [
                'COORDINATOR',
                'TRANSACTIONAL ID',
                'PRODUCER ID',
                'EPOCH',
                'STATE',
                'TIMEOUT MS',
                'START',
                'DURATION MS',
              ],
              [
                [
                  String(d.coordinator),
                  d.transactionalId,
                  String(d.producerId),
                  String(d.producerEpoch),
                  d.state,
                  String(d.transactionTimeoutMs),
                  d.transactionStartTimeMs < 0 ? '-' : new Date(d.transactionStartTimeMs).toISOString(),
                  d.transactionStartTimeMs < 0
                    ? '-'
                    : String(Math.max(0, Date.now() - d.transactionStartTimeMs)),
                ],
              ],
            ),
          )
          out(`Partitions: ${d.partitions.map((p) => `${p.topic}-${p.partition}`).join(', ') || '-'}`)
        }
        return EXIT_OK
      }
      const listed = await admin.listTransactions({
        ...(values.state ? { states: values.state } : {}),
        ...(durationMs !== undefined ? { durationMs } : {}),
      })
      if (values.json) printJson(listed)
      else
        out(
          table(
            ['TRANSACTIONAL ID', 'COORDINATOR', 'PRODUCER ID', 'STATE'],
            listed.map((t) => [t.transactionalId, String(t.coordinator), String(t.producerId), t.state]),
          ),
        )
      return EXIT_OK
    } finally {
      admin.close()
    }
  })
}

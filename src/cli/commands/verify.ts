/**
 * `tidelog verify FILE [--json]`: checks a history (docs/history-format.md) for lost
 * acknowledged writes, duplicates, reorderings, phantom reads, offset mismatches,
 * conflicting offsets, and Jepsen's Kafka checks (poll skips, nonmonotonic polls, aborted and
 * uncommitted reads, G1b, G1c). Exit codes: 0 no anomaly, 1 anomalies found, 2 usage or a
 * history that does not follow the format (every bad line listed with its number).
 */
import { parseArgs } from 'node:util'
import { checkHistory } from '../../verify/checker.js'
import { formatVerifyReport } from '../../verify/format.js'
import { HistoryFormatError } from '../../verify/history.js'
import { readHistoryFile } from '../../verify/history-file.js'
import { EXIT_FAILED, EXIT_OK, EXIT_USAGE, guarded, out, printJson, UsageError } from './common.js'

export const VERIFY_USAGE = `Usage: tidelog verify FILE [--json]

Checks a history of sends, acks, fails and reads (JSON lines; FILE '-' reads stdin) and
reports: acknowledged writes lost, duplicates, reorderings within a producer and partition,
reads of records never sent, reads away from the acknowledged offset, two records at one
offset; consumers' poll skips and nonmonotonic polls; read_committed reads of aborted or
open transactions (G1a); intermediate reads (G1b) and read-dependency cycles (G1c; write
cycles (G0) and cycles that need write order are listed as allowed). The format is in docs/history-format.md.

  --json      The whole report as JSON (every anomaly with its events)

Exit codes: 0 no anomaly, 1 anomalies found, 2 usage or malformed history.
`

export async function verifyCommand(argv: readonly string[]): Promise<number> {
  return guarded('verify', async () => {
    const { values, positionals } = parseArgs({
      args: [...argv],
      options: {
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      allowPositionals: true,
      strict: true,
    })
    if (values.help || positionals[0] === 'help') {
      process.stdout.write(VERIFY_USAGE)
      return EXIT_OK
    }
    if (positionals.length !== 1)
      throw new UsageError(positionals.length === 0 ? 'verify needs a history FILE' : 'verify takes one FILE')
    const path = positionals[0]
    let history: Awaited<ReturnType<typeof readHistoryFile>>
    try {
      history = await readHistoryFile(path)
    } catch (error) {
      return badInput(error, path, values.json)
    }
    const report = checkHistory(history)
    if (values.json) printJson(report)
    else out(formatVerifyReport(report))
    return report.ok ? EXIT_OK : EXIT_FAILED
  })
}

function badInput(error: unknown, file: string, json: boolean): number {
  const path = file === '-' ? 'stdin' : file
  if (error instanceof HistoryFormatError) {
    if (json) printJson({ ok: false, inputErrors: error.errors, truncated: error.truncated })
    const lines = error.errors.map((e) => `${path}:${e.line}: ${e.message}\n`).join('')
    const more = error.truncated ? `(stopped after ${error.errors.length} errors)\n` : ''
    process.stderr.write(`tidelog verify: ${path} is not a valid history:\n${lines}${more}`)
    return EXIT_USAGE
  }
  const code = (error as NodeJS.ErrnoException).code
  if (code === 'ENOENT' || code === 'EISDIR' || code === 'EACCES') {
    process.stderr.write(`tidelog verify: cannot read ${path}: ${(error as Error).message}\n`)
    return EXIT_USAGE
  }
  throw error
}

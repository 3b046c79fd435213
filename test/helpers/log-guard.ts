/**
 * A test that starts brokers fails on any error-level log line of theirs (pino level >= 50:
 * error, fatal) that it did not expect. In-process brokers get `guardedLogger()`; broker
 * processes' output is fed to `recordErrorLine()` by broker-process.ts. Importing this module
 * (every broker-starting helper does) installs a root `afterEach` hook in the test file:
 * after each test it fails that test with the lines no `allowErrorLogs()` of the test
 * matched, and a root `after` hook fails the file on lines logged after its last test.
 *
 * Allow a line where the error is the point, with a comment saying why:
 *   allowErrorLogs(/log dir offline/) // the test fails the disk on purpose
 */
import { after, afterEach } from 'node:test'
import { type Logger, pino } from 'pino'

interface ErrorLine {
  readonly source: string
  readonly line: string
}

const ERROR_LEVEL = 50
const LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 }
/** At most this many unexpected lines in a failure message, each cut to LINE_CHARS_MAX. */
const REPORTED_LINES_MAX = 20
const LINE_CHARS_MAX = 600

const captured: ErrorLine[] = []
const allowed: RegExp[] = []

/**
 * Lets error lines matching any of `patterns` (tested against the whole JSON line) pass in
 * the current test. Call it inside the test, before or after the brokers log.
 */
export function allowErrorLogs(...patterns: RegExp[]): void {
  allowed.push(...patterns)
}

/** Keeps one log line of `source` if its level is error or fatal (a JSON line or a parsed one). */
export function recordErrorLine(source: string, line: string | { readonly level?: unknown }): void {
  let level: unknown
  let text: string
  if (typeof line === 'string') {
    if (!line.startsWith('{')) return
    try {
      level = (JSON.parse(line) as { level?: unknown }).level
    } catch {
      // A line cut by a kill -9: not a log record.
      return
    }
    text = line
  } else {
    level = line.level
    text = JSON.stringify(line)
  }
  if (typeof level === 'number' && level >= ERROR_LEVEL) captured.push({ source, line: text })
}

/**
 * The logger of an in-process broker under test: prints what TIDELOG_LOG_LEVEL asks for (as
 * createLogger does), and always captures error and fatal lines, even when printing is off.
 */
export function guardedLogger(name: string): Logger {
  const printLevel = LEVELS[process.env['TIDELOG_LOG_LEVEL'] ?? 'info'] ?? Number.POSITIVE_INFINITY
  return pino(
    { name, level: printLevel < ERROR_LEVEL ? levelName(printLevel) : 'error', base: undefined },
    {
      write(line: string): void {
        recordErrorLine(name, line)
        const level = (JSON.parse(line) as { level: number }).level
        if (level >= printLevel) process.stdout.write(line)
      },
    },
  )
}

function levelName(value: number): string {
  return Object.entries(LEVELS).find(([, v]) => v === value)?.[0] ?? 'info'
}

/** Takes the lines captured so far that no allowed pattern matches, and forgets the allow-list. */
function takeUnexpected(): ErrorLine[] {
  const lines = captured.splice(0)
  const patterns = allowed.splice(0)
  return lines.filter(({ line }) => !patterns.some((pattern) => pattern.test(line)))
}

function failOn(lines: readonly ErrorLine[], when: string): void {
  if (lines.length === 0) return
  const shown = lines
    .slice(0, REPORTED_LINES_MAX)
    .map(
      ({ source, line }) =>
        `  ${source}: ${line.length > LINE_CHARS_MAX ? `${line.slice(0, LINE_CHARS_MAX)}…` : line}`,
    )
  const more =
    lines.length > REPORTED_LINES_MAX ? `\n  ... and ${lines.length - REPORTED_LINES_MAX} more` : ''
  throw new Error(
    `${lines.length} unexpected error-level broker log line(s) ${when} (allow expected ones with allowErrorLogs in the test, saying why):\n${shown.join('\n')}${more}`,
  )
}

// Not in the fault suite's CLI (test/fault/run.ts) nor in a benchmark (bench/*.ts), which import
// the helpers outside any test: a hook there would start node:test's runner, which prints its
// TAP report into the benchmark's output.
if (!/[\\/](fault[\\/]run|bench[\\/][^\\/]+)\.[jt]s$/.test(process.argv[1] ?? '')) {
  afterEach(() => failOn(takeUnexpected(), 'during this test'))
  after(() => failOn(takeUnexpected(), 'after the last test of this file'))
}

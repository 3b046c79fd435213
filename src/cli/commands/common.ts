/**
 * What every client command shares: the --bootstrap-server flag, output (aligned tables,
 * colours only on a terminal, --json), and one mapping from errors to messages and exit
 * codes:
 *   0 success · 1 the operation failed (a Kafka error) · 2 usage · 3 cluster unreachable
 *   · 4 not supported by the broker (e.g. consumer groups)
 */

import {
  ConnectionError,
  InvalidArgumentError,
  KafkaClientError,
  KafkaProtocolError,
  RequestTimeoutError,
  UnsupportedApiError,
} from '../../client/errors.js'
import { TidelogError } from '../../common/errors.js'
import { loadCommandConfig } from '../command-config.js'

export const EXIT_OK = 0
export const EXIT_FAILED = 1
export const EXIT_USAGE = 2
export const EXIT_UNREACHABLE = 3
export const EXIT_UNSUPPORTED = 4

export const DEFAULT_BOOTSTRAP = '127.0.0.1:9092'

/** `help`, `--help` or `-h` in a subcommand's place asks for the usage text. */
export function isHelp(word: string): boolean {
  return word === 'help' || word === '--help' || word === '-h'
}

/** Flags every client command accepts, for node:util parseArgs. */
export const COMMON_OPTIONS = {
  'bootstrap-server': { type: 'string', short: 'b', default: DEFAULT_BOOTSTRAP },
  'command-config': { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const

export class UsageError extends TidelogError {
  constructor(message: string) {
    super('ERR_USAGE', message)
    this.name = 'UsageError'
  }
}

/**
 * Client settings for a command-line tool: fail fast when nothing listens; TLS and SASL from
 * the --command-config properties file when given.
 */
export function clientOptions(bootstrap: string, clientId: string, commandConfig?: string) {
  return {
    bootstrapServers: bootstrap,
    clientId,
    connectTimeoutMs: 5000,
    requestTimeoutMs: 30000,
    ...(commandConfig === undefined ? {} : loadCommandConfig(commandConfig)),
  }
}

const useColour = (): boolean => process.stdout.isTTY === true && !process.env['NO_COLOR']
const errColour = (): boolean => process.stderr.isTTY === true && !process.env['NO_COLOR']

function paint(code: string, text: string, on: boolean): string {
  return on ? `\u001b[${code}m${text}\u001b[0m` : text
}

export const colour = {
  bold: (t: string) => paint('1', t, useColour()),
  dim: (t: string) => paint('2', t, useColour()),
  red: (t: string) => paint('31', t, useColour()),
  green: (t: string) => paint('32', t, useColour()),
  yellow: (t: string) => paint('33', t, useColour()),
}

export function out(text = ''): void {
  process.stdout.write(`${text}\n`)
}

export function printJson(value: unknown): void {
  out(JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), 2))
}

/** Colour escape sequences (ESC [ ... m), built from a string so the regex holds no control character. */
const ANSI_SGR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g')

/** Columns padded to their widest cell; colour codes do not count toward width. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const visible = (s: string) => s.replace(ANSI_SGR, '').length
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => visible(r[i] ?? ''))))
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c + ' '.repeat(widths[i] - visible(c))))
      .join('  ')
      .trimEnd()
  return [colour.bold(line(headers)), ...rows.map(line)].join('\n')
}

/**
 * The topics a command names, by one rule for every command that takes --topic: with
 * --topic T (repeatable where several are allowed) or as arguments, or both if they name
 * the same topics.
 */
export function namedTopics(
  flag: string | readonly string[] | undefined,
  positionals: readonly string[],
): string[] {
  const flagged = flag === undefined ? [] : typeof flag === 'string' ? [flag] : [...flag]
  if (flagged.length === 0) return [...positionals]
  if (positionals.length === 0) return flagged
  const same =
    new Set(flagged).size === new Set(positionals).size &&
    positionals.every((topic) => flagged.includes(topic))
  if (!same)
    throw new UsageError(
      `--topic ${flagged.join(' --topic ')} and the argument ${positionals.join(' ')} disagree: name the topic once`,
    )
  return flagged
}

/** The one topic a command needs, by namedTopics' rule. */
export function oneTopic(
  flag: string | readonly string[] | undefined,
  positionals: readonly string[],
): string {
  const topics = [...new Set(namedTopics(flag, positionals))]
  if (topics.length === 0) throw new UsageError('name exactly one topic: --topic T, or T as the argument')
  if (topics.length > 1) throw new UsageError(`name exactly one topic, not ${topics.join(', ')}`)
  return topics[0]
}

/** `--header k=v` / `--config k=v` pairs. */
export function parsePairs(values: readonly string[] | undefined, flag: string): [string, string][] {
  return (values ?? []).map((item) => {
    const eq = item.indexOf('=')
    if (eq <= 0) throw new UsageError(`${flag} expects key=value, got '${item}'`)
    return [item.slice(0, eq), item.slice(eq + 1)]
  })
}

export function parseInteger(value: string | undefined, flag: string, min = 0): number | undefined {
  if (value === undefined) return undefined
  if (!/^-?\d+$/.test(value) || Number(value) < min)
    throw new UsageError(`${flag} expects an integer >= ${min}, got '${value}'`)
  return Number(value)
}

/** Prints an error the way a user can act on and returns the exit code for it. */
export function reportError(error: unknown, context = ''): number {
  const prefix = `tidelog${context ? ` ${context}` : ''}: `
  const write = (text: string) =>
    process.stderr.write(`${paint('31', 'error', errColour())}: ${prefix}${text}\n`)
  if (
    error instanceof UsageError ||
    (error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS'))
  ) {
    write(`${error.message} (see --help)`)
    return EXIT_USAGE
  }
  if (error instanceof InvalidArgumentError) {
    write(error.message)
    return EXIT_USAGE
  }
  if (error instanceof UnsupportedApiError) {
    write(error.message)
    return EXIT_UNSUPPORTED
  }
  if (error instanceof ConnectionError || error instanceof RequestTimeoutError) {
    write(`cannot reach the cluster: ${error.message}`)
    return EXIT_UNREACHABLE
  }
  if (error instanceof KafkaProtocolError) {
    write(error.message)
    return EXIT_FAILED
  }
  if (error instanceof KafkaClientError || error instanceof TidelogError) {
    write(`${error.message} [${error.code}]`)
    return EXIT_FAILED
  }
  throw error
}

/** Runs a command body, turning its errors into messages and exit codes. */
export async function guarded(context: string, body: () => Promise<number>): Promise<number> {
  try {
    return await body()
  } catch (error) {
    return reportError(error, context)
  }
}

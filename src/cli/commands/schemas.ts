/**
 * `tidelog schemas list|get|register|check|config`: the schema registry's REST API
 * (Confluent's, served by tidelog on 8081 or by a Confluent registry) from the terminal.
 * A registry error prints its message and Confluent error code and exits 1; a registry that
 * does not answer exits 3; an incompatible schema in `check` exits 1.
 */
import { readFile } from 'node:fs/promises'
import { parseArgs } from 'node:util'
import { TidelogError } from '../../common/errors.js'
import {
  EXIT_FAILED,
  EXIT_OK,
  EXIT_UNREACHABLE,
  EXIT_USAGE,
  guarded,
  isHelp,
  out,
  printJson,
  table,
  UsageError,
} from './common.js'

export const SCHEMAS_USAGE = `Usage: tidelog schemas <subcommand> [--registry URL] [--json]
  list [--deleted]                           subjects with their latest version and id
  get SUBJECT [--version V]                  a version's schema (default: latest)
  register SUBJECT (--file F | --schema S) [--type AVRO|JSON|PROTOBUF]
                                             register a schema; prints its id
  check SUBJECT (--file F | --schema S) [--type T] [--version V]
                                             compatible with the subject's versions as its
                                             level says (or with version V)? exit 1 if not
  config [SUBJECT] [--set LEVEL]             the compatibility level (global without SUBJECT)
--registry defaults to http://127.0.0.1:8081 (tidelog start's registry); --user USER:PASSWORD
sends basic auth (a registry with security on), --ca FILE trusts that PEM CA for https://.
`

const OPTIONS = {
  registry: { type: 'string', default: 'http://127.0.0.1:8081' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
  deleted: { type: 'boolean', default: false },
  version: { type: 'string' },
  file: { type: 'string' },
  schema: { type: 'string' },
  type: { type: 'string', default: 'AVRO' },
  set: { type: 'string' },
  user: { type: 'string' },
  ca: { type: 'string' },
} as const

const CONTENT_TYPE = 'application/vnd.schemaregistry.v1+json'

/** A Confluent error answer, or a registry that cannot be reached. */
class RegistryCallError extends TidelogError {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super('ERR_SCHEMA_REGISTRY', message)
  }
}

/** Where the registry is: its URL, basic auth's `USER:PASSWORD` and the CAs of an https:// one. */
interface Registry {
  readonly url: string
  readonly user: string | undefined
  readonly ca: string | undefined
}

/** One request with node:http(s) (fetch cannot be given CAs): the status and body text. */
async function send(
  registry: Registry,
  method: string,
  path: string,
  body: string | undefined,
): Promise<{ status: number; text: string }> {
  const url = new URL(`${registry.url.replace(/\/$/, '')}${path}`)
  const { request } = url.protocol === 'https:' ? await import('node:https') : await import('node:http')
  const headers: Record<string, string> = { 'Content-Type': CONTENT_TYPE, Accept: CONTENT_TYPE }
  if (registry.user !== undefined)
    headers.Authorization = `Basic ${Buffer.from(registry.user).toString('base64')}`
  const ca = registry.ca === undefined ? undefined : await readFile(registry.ca, 'utf8')
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers, ...(ca === undefined ? {} : { ca }) }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
      )
      res.on('error', reject)
    })
    req.setTimeout(30_000, () => req.destroy(new Error('no answer in 30 s')))
    req.on('error', reject)
    req.end(body)
  })
}

async function call(base: Registry, method: string, path: string, body?: unknown): Promise<unknown> {
  let response: { status: number; text: string }
  try {
    response = await send(base, method, path, body === undefined ? undefined : JSON.stringify(body))
  } catch (error) {
    throw new RegistryCallError(
      `cannot reach the schema registry at ${base.url}: ${(error as Error).message}`,
      EXIT_UNREACHABLE,
    )
  }
  const text = response.text
  let value: unknown
  try {
    value = text === '' ? null : JSON.parse(text)
  } catch {
    throw new RegistryCallError(`the schema registry answered ${response.status} with no JSON`, EXIT_FAILED)
  }
  if (response.status < 200 || response.status > 299) {
    const error = value as { error_code?: number; message?: string } | null
    throw new RegistryCallError(
      `${error?.message ?? `HTTP ${response.status}`} (error code ${error?.error_code ?? response.status})`,
      EXIT_FAILED,
    )
  }
  return value
}

const subjectPath = (subject: string) => `/subjects/${encodeURIComponent(subject)}`

async function schemaBody(values: { file?: string; schema?: string; type: string }) {
  if ((values.file === undefined) === (values.schema === undefined))
    throw new UsageError('give one of --file and --schema')
  const schema = values.file !== undefined ? await readFile(values.file, 'utf8') : (values.schema as string)
  return { schema, schemaType: values.type.toUpperCase() }
}

function needSubject(subject: string | undefined, sub: string): string {
  if (subject === undefined) throw new UsageError(`schemas ${sub} needs a SUBJECT`)
  return subject
}

export async function schemasCommand(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv
  return guarded('schemas', async () => {
    const { values, positionals } = parseArgs({
      args: rest,
      options: OPTIONS,
      strict: true,
      allowPositionals: true,
    })
    if (values.help || sub === undefined || isHelp(sub)) {
      process.stdout.write(SCHEMAS_USAGE)
      return sub === undefined ? EXIT_USAGE : EXIT_OK
    }
    const base: Registry = { url: values.registry, user: values.user, ca: values.ca }
    const [subject] = positionals
    try {
      switch (sub) {
        case 'list': {
          const subjects = (await call(
            base,
            'GET',
            `/subjects${values.deleted ? '?deleted=true' : ''}`,
          )) as string[]
          const latest = await Promise.all(
            subjects.map(
              (s) =>
                call(
                  base,
                  'GET',
                  `${subjectPath(s)}/versions/latest${values.deleted ? '?deleted=true' : ''}`,
                ).catch(() => null) as Promise<{ version: number; id: number; schemaType?: string } | null>,
            ),
          )
          const rows = subjects.map((s, i) => ({
            subject: s,
            version: latest[i]?.version ?? null,
            id: latest[i]?.id ?? null,
            type: latest[i] ? (latest[i]?.schemaType ?? 'AVRO') : null,
          }))
          if (values.json) printJson(rows)
          else
            out(
              table(
                ['SUBJECT', 'VERSION', 'ID', 'TYPE'],
                rows.map((r) => [r.subject, String(r.version ?? '-'), String(r.id ?? '-'), r.type ?? '-']),
              ),
            )
          return EXIT_OK
        }
        case 'get': {
          const version = values.version ?? 'latest'
          const found = (await call(
            base,
            'GET',
            `${subjectPath(needSubject(subject, sub))}/versions/${encodeURIComponent(version)}`,
          )) as { schema: string }
          if (values.json) printJson(found)
          else out(found.schema)
          return EXIT_OK
        }
        case 'register': {
          const body = await schemaBody(values)
          const { id } = (await call(
            base,
            'POST',
            `${subjectPath(needSubject(subject, sub))}/versions`,
            body,
          )) as {
            id: number
          }
          if (values.json) printJson({ id })
          else out(`registered: id ${id}`)
          return EXIT_OK
        }
        case 'check': {
          const body = await schemaBody(values)
          const path = `/compatibility${subjectPath(needSubject(subject, sub))}/versions${
            values.version === undefined ? '' : `/${encodeURIComponent(values.version)}`
          }?verbose=true`
          const result = (await call(base, 'POST', path, body)) as {
            is_compatible: boolean
            messages?: string[]
          }
          if (values.json) printJson(result)
          else {
            out(result.is_compatible ? 'compatible' : 'incompatible')
            for (const message of result.messages ?? []) out(`  ${message}`)
          }
          return result.is_compatible ? EXIT_OK : EXIT_FAILED
        }
        case 'config': {
          const path = subject === undefined ? '/config' : `/config/${encodeURIComponent(subject)}`
          const result =
            values.set === undefined
              ? await call(base, 'GET', subject === undefined ? path : `${path}?defaultToGlobal=true`)
              : await call(base, 'PUT', path, { compatibility: values.set })
          if (values.json) printJson(result)
          else {
            const level = result as { compatibilityLevel?: string; compatibility?: string }
            out(level.compatibilityLevel ?? level.compatibility ?? '')
          }
          return EXIT_OK
        }
        default:
          throw new UsageError(`unknown schemas subcommand '${sub}'`)
      }
    } catch (error) {
      if (!(error instanceof RegistryCallError)) throw error
      process.stderr.write(`tidelog schemas: ${error.message}\n`)
      return error.exitCode
    }
  })
}

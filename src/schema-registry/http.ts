/**
 * Confluent Schema Registry's REST API (v1) over node:http. Requests and answers are JSON
 * with Confluent's content types (`application/vnd.schemaregistry.v1+json`,
 * `application/vnd.schemaregistry+json`, `application/json`; `application/octet-stream`
 * is accepted too, as Confluent does); errors are `{"error_code": N, "message": "..."}`.
 * A body larger than BODY_MAX_BYTES is refused with 413 and its connection closed; nothing
 * a request sends reaches the registry's state unless it is a valid request.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Errors, NotWriterError, RegistryError } from './errors.js'
import { parseVersion, type SchemaRegistry, type SchemaRequest, type VersionSpec } from './registry.js'
import { SCHEMA_TYPES, type SchemaReference, type SchemaType } from './types.js'

/** Largest request body: schemas are text, a few KiB typically; Confluent sets no lower bound. */
export const BODY_MAX_BYTES = 1024 * 1024
const CONTENT_TYPE = 'application/vnd.schemaregistry.v1+json'
const ACCEPTED_TYPES = [
  'application/vnd.schemaregistry.v1+json',
  'application/vnd.schemaregistry+json',
  'application/json',
  'application/octet-stream',
]

type Query = URLSearchParams
type Handler = (registry: SchemaRegistry, params: string[], query: Query, body: unknown) => Promise<unknown>

interface Route {
  readonly method: string
  /** Segments; '*' matches one segment, given to the handler in order. */
  readonly pattern: readonly string[]
  readonly handler: Handler
}

const flag = (query: Query, name: string) => query.get(name) === 'true'

function intParam(text: string, notFound: () => RegistryError): number {
  if (!/^\d{1,10}$/.test(text)) throw notFound()
  return Number(text)
}

function version(text: string): VersionSpec {
  return parseVersion(text)
}

/** Confluent's RegisterSchemaRequest, checked: 42201 for a missing schema or an unknown type. */
function schemaRequest(body: unknown): SchemaRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw Errors.unprocessable('The request body must be a JSON object')
  const b = body as Record<string, unknown>
  if (typeof b.schema !== 'string' || b.schema.trim() === '') throw Errors.invalidSchema('Empty schema')
  const schemaType = b.schemaType ?? 'AVRO'
  if (
    typeof schemaType !== 'string' ||
    !(SCHEMA_TYPES as readonly string[]).includes(schemaType.toUpperCase())
  )
    throw Errors.invalidSchema(`Unknown schema type ${String(schemaType)}`)
  const references = b.references ?? []
  if (!Array.isArray(references)) throw Errors.invalidSchema('references must be an array')
  const checked: SchemaReference[] = references.map((r: unknown) => {
    const ref = (r ?? {}) as Record<string, unknown>
    if (typeof ref.name !== 'string' || typeof ref.subject !== 'string' || !Number.isInteger(ref.version))
      throw Errors.invalidSchema('a reference needs a name, a subject and an integer version')
    return { name: ref.name, subject: ref.subject, version: ref.version as number }
  })
  const id = Number.isInteger(b.id) ? (b.id as number) : undefined
  const version = Number.isInteger(b.version) ? (b.version as number) : undefined
  return {
    schema: b.schema,
    schemaType: schemaType.toUpperCase() as SchemaType,
    references: checked,
    ...(id === undefined ? {} : { id }),
    ...(version === undefined ? {} : { version }),
  }
}

function field(body: unknown, name: string): unknown {
  return typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[name] : undefined
}

const ROUTES: readonly Route[] = [
  { method: 'GET', pattern: [], handler: async () => ({}) },
  { method: 'GET', pattern: ['schemas', 'types'], handler: async (r) => r.schemaTypes() },
  {
    method: 'GET',
    pattern: ['schemas', 'ids', '*'],
    handler: (r, [id]) => r.schemaById(intParam(id, () => Errors.schemaNotFound())),
  },
  {
    method: 'GET',
    pattern: ['schemas', 'ids', '*', 'schema'],
    handler: async (r, [id]) => (await r.schemaById(intParam(id, () => Errors.schemaNotFound()))).schema,
  },
  {
    method: 'GET',
    pattern: ['schemas', 'ids', '*', 'subjects'],
    handler: (r, [id], q) =>
      r.subjectsOfId(
        intParam(id, () => Errors.schemaNotFound()),
        flag(q, 'deleted'),
      ),
  },
  {
    method: 'GET',
    pattern: ['schemas', 'ids', '*', 'versions'],
    handler: (r, [id], q) =>
      r.versionsOfId(
        intParam(id, () => Errors.schemaNotFound()),
        flag(q, 'deleted'),
      ),
  },
  {
    method: 'GET',
    pattern: ['subjects'],
    handler: (r, _, q) => r.subjects({ deleted: flag(q, 'deleted'), prefix: q.get('subjectPrefix') ?? '' }),
  },
  {
    method: 'POST',
    pattern: ['subjects', '*'],
    handler: (r, [s], q, body) =>
      r.lookup(s, schemaRequest(body), { normalize: flag(q, 'normalize'), deleted: flag(q, 'deleted') }),
  },
  {
    method: 'DELETE',
    pattern: ['subjects', '*'],
    handler: (r, [s], q) => r.deleteSubject(s, flag(q, 'permanent')),
  },
  {
    method: 'GET',
    pattern: ['subjects', '*', 'versions'],
    handler: (r, [s], q) => r.versions(s, flag(q, 'deleted')),
  },
  {
    method: 'POST',
    pattern: ['subjects', '*', 'versions'],
    handler: (r, [s], q, body) => r.register(s, schemaRequest(body), { normalize: flag(q, 'normalize') }),
  },
  {
    method: 'GET',
    pattern: ['subjects', '*', 'versions', '*'],
    handler: (r, [s, v], q) => r.version(s, version(v), flag(q, 'deleted')),
  },
  {
    method: 'GET',
    pattern: ['subjects', '*', 'versions', '*', 'schema'],
    handler: async (r, [s, v], q) => (await r.version(s, version(v), flag(q, 'deleted'))).schema,
  },
  {
    method: 'GET',
    pattern: ['subjects', '*', 'versions', '*', 'referencedby'],
    handler: (r, [s, v]) => r.referencedBy(s, version(v)),
  },
  {
    method: 'DELETE',
    pattern: ['subjects', '*', 'versions', '*'],
    handler: (r, [s, v], q) => r.deleteVersion(s, version(v), flag(q, 'permanent')),
  },
  { method: 'GET', pattern: ['config'], handler: (r) => r.config(null) },
  {
    method: 'PUT',
    pattern: ['config'],
    handler: (r, _, _q, body) => r.setConfig(null, field(body, 'compatibility')),
  },
  { method: 'DELETE', pattern: ['config'], handler: (r) => r.deleteConfig(null) },
  {
    method: 'GET',
    pattern: ['config', '*'],
    handler: (r, [s], q) => r.config(s, flag(q, 'defaultToGlobal')),
  },
  {
    method: 'PUT',
    pattern: ['config', '*'],
    handler: (r, [s], _q, body) => r.setConfig(s, field(body, 'compatibility')),
  },
  { method: 'DELETE', pattern: ['config', '*'], handler: (r, [s]) => r.deleteConfig(s) },
  { method: 'GET', pattern: ['mode'], handler: (r) => r.mode(null) },
  {
    method: 'PUT',
    pattern: ['mode'],
    handler: (r, _, q, body) => r.setMode(null, field(body, 'mode'), flag(q, 'force')),
  },
  { method: 'GET', pattern: ['mode', '*'], handler: (r, [s], q) => r.mode(s, flag(q, 'defaultToGlobal')) },
  {
    method: 'PUT',
    pattern: ['mode', '*'],
    handler: (r, [s], q, body) => r.setMode(s, field(body, 'mode'), flag(q, 'force')),
  },
  { method: 'DELETE', pattern: ['mode', '*'], handler: (r, [s]) => r.deleteMode(s) },
  {
    method: 'POST',
    pattern: ['compatibility', 'subjects', '*', 'versions', '*'],
    handler: (r, [s, v], q, body) =>
      verbose(q, r.testCompatibility(s, version(v), schemaRequest(body), normalize(q))),
  },
  {
    method: 'POST',
    pattern: ['compatibility', 'subjects', '*', 'versions'],
    handler: (r, [s], q, body) => verbose(q, r.testCompatibility(s, null, schemaRequest(body), normalize(q))),
  },
  { method: 'GET', pattern: ['contexts'], handler: async () => ['.'] },
]

const normalize = (q: Query) => ({ normalize: flag(q, 'normalize') })

async function verbose(
  query: Query,
  result: Promise<{ is_compatible: boolean; messages: string[] }>,
): Promise<{ is_compatible: boolean; messages?: string[] }> {
  const { is_compatible, messages } = await result
  return flag(query, 'verbose') ? { is_compatible, messages } : { is_compatible }
}

function match(
  method: string,
  segments: readonly string[],
): { route: Route; params: string[] } | 'method' | null {
  let pathMatched = false
  for (const route of ROUTES) {
    if (route.pattern.length !== segments.length) continue
    const params: string[] = []
    if (!route.pattern.every((p, i) => (p === '*' ? params.push(segments[i]) > 0 : p === segments[i])))
      continue
    pathMatched = true
    if (route.method === method) return { route, params }
  }
  return pathMatched ? 'method' : null
}

function send(res: ServerResponse, status: number, value: unknown, close = false): void {
  const body = typeof value === 'string' ? value : JSON.stringify(value)
  res.writeHead(status, {
    'Content-Type': CONTENT_TYPE,
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
    ...(close ? { Connection: 'close' } : {}),
  })
  res.end(body)
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const type = (req.headers['content-type'] ?? 'application/json').split(';')[0].trim().toLowerCase()
  if (!ACCEPTED_TYPES.includes(type)) throw Errors.unsupportedMediaType()
  const declared = Number(req.headers['content-length'] ?? 0)
  if (declared > BODY_MAX_BYTES) throw Errors.bodyTooLarge(BODY_MAX_BYTES)
  const chunks: Buffer[] = []
  let length = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    length += chunk.length
    if (length > BODY_MAX_BYTES) throw Errors.bodyTooLarge(BODY_MAX_BYTES)
    chunks.push(chunk)
  }
  const text = Buffer.concat(chunks).toString('utf8')
  if (text.trim() === '') return {}
  try {
    return JSON.parse(text)
  } catch (error) {
    throw Errors.badRequest(`Unrecognized JSON body: ${(error as Error).message}`)
  }
}

/** Marks a request one registry forwarded to the writer's. */
const FORWARDED_HEADER = 'x-tidelog-forwarded'
const FORWARD_TIMEOUT_MS = 30_000

/** Sends a write to the writer's registry and relays its answer; 50003 when that fails. */
async function forward(
  res: ServerResponse,
  writerUrl: string,
  method: string,
  path: string,
  query: URLSearchParams,
  body: unknown,
): Promise<void> {
  const search = query.size > 0 ? `?${query}` : ''
  let status: number
  let text: string
  try {
    const response = await fetch(`${writerUrl.replace(/\/$/, '')}${path}${search}`, {
      method,
      headers: { 'Content-Type': CONTENT_TYPE, Accept: CONTENT_TYPE, [FORWARDED_HEADER]: '1' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
    })
    status = response.status
    text = await response.text()
  } catch (error) {
    throw Errors.forwardingFailed(
      `Error while forwarding the request to the leader at ${writerUrl}: ${(error as Error).message}`,
      error,
    )
  }
  send(res, status, text)
}

/**
 * Serves one request. `path` is the raw (percent-encoded) path below the registry's root;
 * `registry` opens the registry on first use. Never throws: every failure is an answer.
 */
export async function handleRegistryRequest(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  query: URLSearchParams,
  registry: () => Promise<SchemaRegistry>,
  onUnexpected: (error: unknown) => void,
): Promise<void> {
  try {
    let segments: string[]
    try {
      segments = path
        .split('/')
        .filter((s) => s !== '')
        .map((s) => decodeURIComponent(s))
    } catch {
      throw Errors.badRequest('Malformed URL')
    }
    const method = req.method === 'HEAD' ? 'GET' : (req.method ?? '')
    const found = match(method, segments)
    if (found === null) throw Errors.notFound()
    if (found === 'method') throw Errors.methodNotAllowed()
    const body = method === 'POST' || method === 'PUT' ? await readBody(req) : undefined
    let result: unknown
    try {
      result = await found.route.handler(await registry(), found.params, query, body)
    } catch (error) {
      // One hop only: a forwarded request that meets a non-writer again is answered 50004.
      if (!(error instanceof NotWriterError) || req.headers[FORWARDED_HEADER] !== undefined) throw error
      return await forward(res, error.writerUrl, method, path, query, body)
    }
    send(res, 200, result)
  } catch (error) {
    const known = error instanceof RegistryError
    if (!known) onUnexpected(error)
    const failure = known ? error : Errors.storeError(`Internal error: ${(error as Error).message}`, error)
    // A refused body may still be arriving: the connection cannot carry another request.
    if (res.headersSent) res.destroy()
    else send(res, failure.status, failure.body, failure.status === 413)
  } finally {
    req.resume()
  }
}

/**
 * Confluent Schema Registry's REST API (v1) over node:http. Requests and answers are JSON
 * with Confluent's content types (`application/vnd.schemaregistry.v1+json`,
 * `application/vnd.schemaregistry+json`, `application/json`; `application/octet-stream`
 * is accepted too, as Confluent does); errors are `{"error_code": N, "message": "..."}`.
 * A body larger than BODY_MAX_BYTES is refused with 413 and its connection closed; nothing
 * a request sends reaches the registry's state unless it is a valid request.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import {
  authenticate,
  BASIC_REALM,
  checkGlobal,
  checkSubject,
  maySubject,
  type RegistryCaller,
  type RegistrySecurity,
  type SubjectAccess,
} from './auth.js'
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

/**
 * What a route needs of the caller where security is on (auth.ts has the mapping): nothing
 * more than being authenticated, an access to the subject of its first parameter, the
 * global config, a schema id (its first parameter) held by a subject the caller may read;
 * `filter` routes answer only what the caller may read.
 */
type Access =
  | { readonly kind: 'any' }
  | { readonly kind: 'subject'; readonly access: SubjectAccess }
  | { readonly kind: 'global'; readonly access: 'readConfig' | 'writeConfig' }
  | { readonly kind: 'id'; readonly filter?: 'subjects' | 'versions' }
  | { readonly kind: 'filter' }

interface Route {
  readonly method: string
  /** Segments; '*' matches one segment, given to the handler in order. */
  readonly pattern: readonly string[]
  readonly handler: Handler
  readonly access: Access
}

const ANY: Access = { kind: 'any' }
const subjectAccess = (access: SubjectAccess): Access => ({ kind: 'subject', access })
const globalAccess = (access: 'readConfig' | 'writeConfig'): Access => ({ kind: 'global', access })

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
  { method: 'GET', pattern: [], handler: async () => ({}), access: ANY },
  { method: 'GET', pattern: ['schemas', 'types'], handler: async (r) => r.schemaTypes(), access: ANY },
  {
    method: 'GET',
    pattern: ['schemas', 'ids', '*'],
    handler: async (r, [id], q) =>
      r.formatted(await r.schemaById(intParam(id, () => Errors.schemaNotFound())), q.get('format')),
    access: { kind: 'id' },
  },
  {
    method: 'GET',
    pattern: ['schemas', 'ids', '*', 'schema'],
    handler: async (r, [id], q) =>
      (await r.formatted(await r.schemaById(intParam(id, () => Errors.schemaNotFound())), q.get('format')))
        .schema,
    access: { kind: 'id' },
  },
  {
    method: 'GET',
    pattern: ['schemas', 'ids', '*', 'subjects'],
    handler: (r, [id], q) =>
      r.subjectsOfId(
        intParam(id, () => Errors.schemaNotFound()),
        flag(q, 'deleted'),
      ),
    access: { kind: 'id', filter: 'subjects' },
  },
  {
    method: 'GET',
    pattern: ['schemas', 'ids', '*', 'versions'],
    handler: (r, [id], q) =>
      r.versionsOfId(
        intParam(id, () => Errors.schemaNotFound()),
        flag(q, 'deleted'),
      ),
    access: { kind: 'id', filter: 'versions' },
  },
  {
    method: 'GET',
    pattern: ['subjects'],
    handler: (r, _, q) => r.subjects({ deleted: flag(q, 'deleted'), prefix: q.get('subjectPrefix') ?? '' }),
    access: { kind: 'filter' },
  },
  {
    method: 'POST',
    pattern: ['subjects', '*'],
    handler: (r, [s], q, body) =>
      r.lookup(s, schemaRequest(body), { normalize: flag(q, 'normalize'), deleted: flag(q, 'deleted') }),
    access: subjectAccess('read'),
  },
  {
    method: 'DELETE',
    pattern: ['subjects', '*'],
    handler: (r, [s], q) => r.deleteSubject(s, flag(q, 'permanent')),
    access: subjectAccess('delete'),
  },
  {
    method: 'GET',
    pattern: ['subjects', '*', 'versions'],
    handler: (r, [s], q) => r.versions(s, flag(q, 'deleted')),
    access: subjectAccess('read'),
  },
  {
    method: 'POST',
    pattern: ['subjects', '*', 'versions'],
    handler: (r, [s], q, body) => r.register(s, schemaRequest(body), { normalize: flag(q, 'normalize') }),
    access: subjectAccess('write'),
  },
  {
    method: 'GET',
    pattern: ['subjects', '*', 'versions', '*'],
    handler: async (r, [s, v], q) =>
      r.formatted(await r.version(s, version(v), flag(q, 'deleted')), q.get('format')),
    access: subjectAccess('read'),
  },
  {
    method: 'GET',
    pattern: ['subjects', '*', 'versions', '*', 'schema'],
    handler: async (r, [s, v], q) =>
      (await r.formatted(await r.version(s, version(v), flag(q, 'deleted')), q.get('format'))).schema,
    access: subjectAccess('read'),
  },
  {
    method: 'GET',
    pattern: ['subjects', '*', 'versions', '*', 'referencedby'],
    handler: (r, [s, v]) => r.referencedBy(s, version(v)),
    access: subjectAccess('read'),
  },
  {
    method: 'DELETE',
    pattern: ['subjects', '*', 'versions', '*'],
    handler: (r, [s, v], q) => r.deleteVersion(s, version(v), flag(q, 'permanent')),
    access: subjectAccess('delete'),
  },
  { method: 'GET', pattern: ['config'], handler: (r) => r.config(null), access: globalAccess('readConfig') },
  {
    method: 'PUT',
    pattern: ['config'],
    handler: (r, _, _q, body) => r.setConfig(null, field(body, 'compatibility')),
    access: globalAccess('writeConfig'),
  },
  {
    method: 'DELETE',
    pattern: ['config'],
    handler: (r) => r.deleteConfig(null),
    access: globalAccess('writeConfig'),
  },
  {
    method: 'GET',
    pattern: ['config', '*'],
    handler: (r, [s], q) => r.config(s, flag(q, 'defaultToGlobal')),
    access: subjectAccess('readConfig'),
  },
  {
    method: 'PUT',
    pattern: ['config', '*'],
    handler: (r, [s], _q, body) => r.setConfig(s, field(body, 'compatibility')),
    access: subjectAccess('writeConfig'),
  },
  {
    method: 'DELETE',
    pattern: ['config', '*'],
    handler: (r, [s]) => r.deleteConfig(s),
    access: subjectAccess('writeConfig'),
  },
  { method: 'GET', pattern: ['mode'], handler: (r) => r.mode(null), access: globalAccess('readConfig') },
  {
    method: 'PUT',
    pattern: ['mode'],
    handler: (r, _, q, body) => r.setMode(null, field(body, 'mode'), flag(q, 'force')),
    access: globalAccess('writeConfig'),
  },
  {
    method: 'GET',
    pattern: ['mode', '*'],
    handler: (r, [s], q) => r.mode(s, flag(q, 'defaultToGlobal')),
    access: subjectAccess('readConfig'),
  },
  {
    method: 'PUT',
    pattern: ['mode', '*'],
    handler: (r, [s], q, body) => r.setMode(s, field(body, 'mode'), flag(q, 'force')),
    access: subjectAccess('writeConfig'),
  },
  {
    method: 'DELETE',
    pattern: ['mode', '*'],
    handler: (r, [s]) => r.deleteMode(s),
    access: subjectAccess('writeConfig'),
  },
  {
    method: 'POST',
    pattern: ['compatibility', 'subjects', '*', 'versions', '*'],
    handler: (r, [s, v], q, body) =>
      verbose(q, r.testCompatibility(s, version(v), schemaRequest(body), normalize(q))),
    access: subjectAccess('read'),
  },
  {
    method: 'POST',
    pattern: ['compatibility', 'subjects', '*', 'versions'],
    handler: (r, [s], q, body) => verbose(q, r.testCompatibility(s, null, schemaRequest(body), normalize(q))),
    access: subjectAccess('read'),
  },
  { method: 'GET', pattern: ['contexts'], handler: async () => ['.'], access: ANY },
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
    // RFC 7235: a 401 names the scheme to answer with.
    ...(status === 401 ? { 'WWW-Authenticate': `Basic realm="${BASIC_REALM}"` } : {}),
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

/** How this registry reaches the writer's over HTTPS: the CAs it trusts (null: Node's). */
export interface ForwardOptions {
  readonly ca: string | readonly string[] | null
}

/** One HTTP(S) request with node:http(s) (fetch cannot be given CAs): the status and body. */
async function request(
  url: URL,
  init: { method: string; headers: Record<string, string>; body?: string },
  forwarding: ForwardOptions,
): Promise<{ status: number; text: string }> {
  const https = url.protocol === 'https:'
  const { request: send } = https ? await import('node:https') : await import('node:http')
  return new Promise((resolve, reject) => {
    const req = send(
      url,
      {
        method: init.method,
        headers: init.headers,
        timeout: FORWARD_TIMEOUT_MS,
        ...(https && forwarding.ca !== null ? { ca: forwarding.ca as string | string[] } : {}),
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 500, text: Buffer.concat(chunks).toString('utf8') }),
        )
        res.on('error', reject)
      },
    )
    req.on('timeout', () => req.destroy(new Error(`no answer in ${FORWARD_TIMEOUT_MS} ms`)))
    req.on('error', reject)
    req.end(init.body)
  })
}

/** Sends a write to the writer's registry and relays its answer; 50003 when that fails. */
async function forward(
  res: ServerResponse,
  writerUrl: string,
  method: string,
  path: string,
  query: URLSearchParams,
  body: unknown,
  authorization: string | undefined,
  forwarding: ForwardOptions,
): Promise<void> {
  const search = query.size > 0 ? `?${query}` : ''
  let answer: { status: number; text: string }
  try {
    answer = await request(
      new URL(`${writerUrl.replace(/\/$/, '')}${path}${search}`),
      {
        method,
        headers: {
          'Content-Type': CONTENT_TYPE,
          Accept: CONTENT_TYPE,
          [FORWARDED_HEADER]: '1',
          // The writer authenticates and authorizes the caller again, as Confluent's leader does.
          ...(authorization === undefined ? {} : { Authorization: authorization }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      },
      forwarding,
    )
  } catch (error) {
    throw Errors.forwardingFailed(
      `Error while forwarding the request to the leader at ${writerUrl}: ${(error as Error).message}`,
      error,
    )
  }
  send(res, answer.status, answer.text)
}

/** 403 unless the route's access is the caller's; what a `filter` route answers is filtered after. */
async function authorize(
  security: RegistrySecurity,
  caller: RegistryCaller,
  access: Access,
  params: readonly string[],
  registry: () => Promise<SchemaRegistry>,
): Promise<void> {
  switch (access.kind) {
    case 'any':
    case 'filter':
      return
    case 'subject':
      return checkSubject(security, caller, params[0], access.access)
    case 'global':
      return checkGlobal(security, caller, access.access)
    case 'id': {
      // The id's subjects, deleted ones too: readable through any of them (Confluent's rule).
      const id = intParam(params[0], () => Errors.schemaNotFound())
      const subjects = await (await registry()).subjectsOfId(id, true)
      if (subjects.length > 0 && !subjects.some((s) => maySubject(security, caller, s, 'read')))
        checkSubject(security, caller, subjects[0], 'read')
    }
  }
}

/** The part of a listing the caller may read. */
function filtered(
  security: RegistrySecurity,
  caller: RegistryCaller,
  access: Access,
  result: unknown,
): unknown {
  const readable = (subject: string) => maySubject(security, caller, subject, 'read')
  if (access.kind === 'filter' || (access.kind === 'id' && access.filter === 'subjects'))
    return (result as string[]).filter(readable)
  if (access.kind === 'id' && access.filter === 'versions')
    return (result as { subject: string }[]).filter((v) => readable(v.subject))
  return result
}

/**
 * Serves one request. `path` is the raw (percent-encoded) path below the registry's root;
 * `registry` opens the registry on first use; `security`, where the broker's is on,
 * authenticates and authorizes it (auth.ts); a write forwarded to another process's writer
 * trusts `forwarding.ca` over HTTPS. Never throws: every failure is an answer.
 */
export async function handleRegistryRequest(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  query: URLSearchParams,
  registry: () => Promise<SchemaRegistry>,
  onUnexpected: (error: unknown) => void,
  security: RegistrySecurity | null = null,
  forwarding: ForwardOptions = { ca: null },
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
    // Who asks comes first: an unauthenticated caller learns nothing, not even which paths exist.
    const caller =
      security === null
        ? null
        : await authenticate(security, req.headers.authorization, req.socket.remoteAddress ?? '')
    const found = match(method, segments)
    if (found === null) throw Errors.notFound()
    if (found === 'method') throw Errors.methodNotAllowed()
    const body = method === 'POST' || method === 'PUT' ? await readBody(req) : undefined
    if (security !== null && caller !== null)
      await authorize(security, caller, found.route.access, found.params, registry)
    let result: unknown
    try {
      result = await found.route.handler(await registry(), found.params, query, body)
    } catch (error) {
      // One hop only: a forwarded request that meets a non-writer again is answered 50004.
      if (!(error instanceof NotWriterError) || req.headers[FORWARDED_HEADER] !== undefined) throw error
      return await forward(
        res,
        error.writerUrl,
        method,
        path,
        query,
        body,
        req.headers.authorization,
        forwarding,
      )
    }
    send(
      res,
      200,
      security !== null && caller !== null ? filtered(security, caller, found.route.access, result) : result,
    )
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

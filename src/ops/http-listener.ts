/**
 * The broker's HTTP listener (node:http): `/metrics`, `/healthz`, `/readyz`, the console at
 * `/` and its JSON API under `/api/`. It shares nothing with the Kafka listener but the
 * process: bad HTTP input (a malformed request line or URL, oversized headers, an unknown
 * path, a wrong method, a body too large) gets a 4xx and a closed or reused HTTP
 * connection, and never reaches a Kafka connection.
 */
import { readFile } from 'node:fs/promises'
import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerOptions,
  type ServerResponse,
} from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import type { SecureContextOptions } from 'node:tls'
import type { Logger } from '../common/logger.js'

/** Largest request body accepted (topic creation only). */
const BODY_MAX_BYTES = 64 * 1024
/** Request line plus headers; larger gets 431 (Node's own limit, stated here). */
const HEADERS_MAX_BYTES = 16 * 1024
const REQUEST_TIMEOUT_MS = 30_000

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message)
  }
}

export interface HttpRequest {
  readonly method: string
  readonly path: string
  readonly query: URLSearchParams
  /** Parsed JSON body, for POST. */
  readonly body: unknown
}

export interface HttpReply {
  readonly status?: number
  readonly contentType: string
  readonly body: string | Buffer
}

export type HttpRoute = (request: HttpRequest) => Promise<HttpReply> | HttpReply

export interface RouteTable {
  /** path → method → handler; a path prefix ends with `/*`. */
  readonly [path: string]: Readonly<Record<string, HttpRoute>>
}

/**
 * Requests under `prefix` (ending in `/`; the prefix without its slash too) go to `handle`
 * unparsed: it reads the body and answers itself (the schema registry's own formats and
 * errors). `path` is the raw, still percent-encoded path below the prefix, from `/`.
 */
export interface RawPrefixRoute {
  readonly prefix: string
  handle(req: IncomingMessage, res: ServerResponse, path: string, query: URLSearchParams): Promise<void>
}

type ServerFactory = (
  options: ServerOptions,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
) => Server

/** What an HTTPS listener serves with: node:tls's context options and client-certificate policy. */
export interface HttpsOptions extends SecureContextOptions {
  readonly requestCert?: boolean
  readonly rejectUnauthorized?: boolean
}

export class HttpListener {
  private readonly server: Server
  private readonly sockets = new Set<Socket>()

  private constructor(
    private readonly routes: RouteTable,
    private readonly logger: Logger,
    private readonly raw: RawPrefixRoute | null,
    makeServer: ServerFactory,
    readonly scheme: 'http' | 'https',
  ) {
    this.server = makeServer(
      {
        maxHeaderSize: HEADERS_MAX_BYTES,
        requestTimeout: REQUEST_TIMEOUT_MS,
        headersTimeout: REQUEST_TIMEOUT_MS,
      },
      (req, res) => {
        this.handle(req, res).catch((error: unknown) => {
          this.logger.error({ err: error }, 'http request failed')
          if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', 'internal error\n')
          else res.destroy()
        })
      },
    )
    // Unparseable requests (bad request line, header overflow): answer and close, as Node
    // does by default, but with a body that says why.
    this.server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
      if (!socket.writable) return socket.destroy()
      const status =
        error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
      const reason =
        status === 431
          ? 'Request Header Fields Too Large'
          : status === 408
            ? 'Request Timeout'
            : 'Bad Request'
      const body = `${reason}\n`
      socket.end(
        `HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      )
    })
    this.server.on('connection', (socket) => {
      this.sockets.add(socket)
      socket.on('close', () => this.sockets.delete(socket))
    })
  }

  /**
   * Listens on `host:port` (port 0 picks one); HTTPS with `tls` (the key, certificates and
   * client-certificate policy of one of the broker's TLS listeners).
   */
  static async start(
    host: string,
    port: number,
    routes: RouteTable,
    logger: Logger,
    raw: RawPrefixRoute | null = null,
    tls: HttpsOptions | null = null,
  ): Promise<HttpListener> {
    let makeServer: ServerFactory = (options, handler) => createServer(options, handler)
    if (tls !== null) {
      // node:https is loaded only by an HTTPS listener (start-up cost, docs/notes/startup.md).
      const https = await import('node:https')
      makeServer = (options, handler) => https.createServer({ ...options, ...tls }, handler)
    }
    const listener = new HttpListener(routes, logger, raw, makeServer, tls === null ? 'http' : 'https')
    await new Promise<void>((resolve, reject) => {
      listener.server.once('error', reject)
      listener.server.listen({ host, port }, () => {
        listener.server.off('error', reject)
        resolve()
      })
    })
    listener.server.on('error', (error) => logger.error({ err: error }, 'http listener error'))
    return listener
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port
  }

  get host(): string {
    return (this.server.address() as AddressInfo).address
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve())
      for (const socket of this.sockets) socket.destroy()
    })
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL
    try {
      if (!req.url?.startsWith('/')) throw new Error('not an origin-form path')
      url = new URL(req.url, 'http://tidelog')
      decodeURIComponent(url.pathname)
    } catch {
      return send(res, 400, 'text/plain; charset=utf-8', 'malformed URL\n')
    }
    if (this.raw) {
      const { prefix } = this.raw
      if (url.pathname === prefix.slice(0, -1) || url.pathname.startsWith(prefix))
        return this.raw.handle(req, res, url.pathname.slice(prefix.length - 1) || '/', url.searchParams)
    }
    const path = decodeURIComponent(url.pathname)
    const methods = this.routes[path] ?? this.prefixRoute(path)
    if (!methods) {
      req.resume()
      return sendJson(res, 404, { error: `no such path: ${path}` })
    }
    const method = req.method === 'HEAD' ? 'GET' : (req.method ?? '')
    const route = methods[method]
    if (!route) {
      req.resume()
      const allow = Object.keys(methods).join(', ')
      return sendJson(res, 405, { error: `method ${req.method} not allowed on ${path}` }, { Allow: allow })
    }
    try {
      if (method !== 'POST') req.resume()
      const body = method === 'POST' ? await readJsonBody(req) : undefined
      const reply = await route({ method, path, query: url.searchParams, body })
      send(res, reply.status ?? 200, reply.contentType, req.method === 'HEAD' ? '' : reply.body)
    } catch (error) {
      if (error instanceof HttpError)
        return sendJson(res, error.status, { error: error.message }, error.headers)
      throw error
    }
  }

  private prefixRoute(path: string): Readonly<Record<string, HttpRoute>> | undefined {
    for (const key of Object.keys(this.routes)) {
      if (key.endsWith('/*') && path.startsWith(key.slice(0, -1)) && path.length > key.length - 1)
        return this.routes[key]
    }
    return undefined
  }
}

async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const type = req.headers['content-type'] ?? ''
  if (!type.startsWith('application/json'))
    throw new HttpError(415, 'expected Content-Type: application/json')
  const chunks: Buffer[] = []
  let length = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    length += chunk.length
    if (length > BODY_MAX_BYTES) throw new HttpError(413, `body larger than ${BODY_MAX_BYTES} bytes`)
    chunks.push(chunk)
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch {
    throw new HttpError(400, 'body is not valid JSON')
  }
}

function send(
  res: ServerResponse,
  status: number,
  contentType: string,
  body: string | Buffer,
  headers: Readonly<Record<string, string>> = {},
): void {
  res.writeHead(status, {
    'Content-Type': contentType,
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    ...headers,
  })
  res.end(body)
}

function sendJson(
  res: ServerResponse,
  status: number,
  value: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  send(res, status, 'application/json; charset=utf-8', `${JSON.stringify(value)}\n`, headers)
}

/** A static file of the console, read once. */
export function staticFile(path: URL, contentType: string): HttpRoute {
  let cached: Promise<Buffer> | null = null
  return async () => {
    cached ??= readFile(path)
    return { contentType, body: await cached }
  }
}

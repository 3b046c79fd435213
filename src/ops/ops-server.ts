/**
 * Operations for one broker: its metrics registry, the request observer, and the HTTP
 * listener serving `/metrics`, `/healthz`, `/readyz` and the console. Started by the broker
 * when `tidelog.http.listener` is set, before its logs load, so `/healthz` answers and
 * `/readyz` says "recovering" during a long recovery; `attach` hands it the broker's state.
 */
import type { Logger } from '../common/logger.js'
import { parseListener } from '../server/broker-config.js'
import type { BrokerMetricsSource } from './broker-metrics-source.js'
import { ConsoleApi, ConsoleApiError } from './console-api.js'
import { readiness } from './health.js'
import { HttpError, HttpListener, type HttpReply, type RouteTable, staticFile } from './http-listener.js'
import { BrokerMetrics } from './metrics.js'
import type { RequestObserver } from './request-observer.js'

export interface OpsSettings {
  /** tidelog.http.listener: HOST:PORT (port 0 picks a free one). */
  readonly listener: string
  /** tidelog.request.log.slow.ms: -1 turns the slow-request log off. */
  readonly slowRequestMs: number
  /** tidelog.console.topic.admin.enable: the console may create and delete topics. */
  readonly topicAdminEnabled: boolean
}

/** The console's files ship in the package beside dist (package.json "files"). */
const CONSOLE_DIR = new URL('../../../src/ops/console/', import.meta.url)

export class OpsServer {
  private source: BrokerMetricsSource | null = null

  private constructor(
    readonly metrics: BrokerMetrics,
    private readonly api: ConsoleApi,
    private readonly http: HttpListener,
  ) {}

  static async start(settings: OpsSettings, logger: Logger): Promise<OpsServer> {
    const { host, port } = parseListener(settings.listener)
    let self: OpsServer | null = null
    const source = () => self?.source ?? null
    const metrics: BrokerMetrics = new BrokerMetrics({
      logger,
      slowRequestMs: settings.slowRequestMs,
      highWatermarks: (partitions) => highWatermarks(api, partitions),
    })
    const api: ConsoleApi = new ConsoleApi(source, metrics.requests, settings.topicAdminEnabled)
    const http = await HttpListener.start(host, port, routes(metrics, api, source), logger)
    self = new OpsServer(metrics, api, http)
    logger.info({ url: self.url }, 'http listener: /metrics, /healthz, /readyz and the console')
    return self
  }

  /** The metrics' view of the request path (Connection calls it). */
  get requestObserver(): RequestObserver {
    return this.metrics.requests
  }

  get url(): string {
    const host = this.http.host.includes(':') ? `[${this.http.host}]` : this.http.host
    return `http://${host}:${this.http.port}/`
  }

  get port(): number {
    return this.http.port
  }

  attach(source: BrokerMetricsSource): void {
    this.source = source
    this.metrics.attach(source)
  }

  async close(): Promise<void> {
    this.api.close()
    await this.http.close()
    this.metrics.close()
  }
}

async function highWatermarks(
  api: ConsoleApi,
  partitions: readonly { topic: string; partition: number }[],
): Promise<Map<string, number>> {
  const listed = await api.admin.listOffsets(partitions.map((p) => ({ ...p, spec: 'latest' as const })))
  return new Map(listed.map((o) => [`${o.topic}\0${o.partition}`, o.offset]))
}

function json(value: unknown, status = 200): HttpReply {
  return { status, contentType: 'application/json; charset=utf-8', body: `${JSON.stringify(value)}\n` }
}

/** Console API errors as HTTP errors; Kafka errors (a missing topic...) as 400/503 with their message. */
async function apiCall(call: () => Promise<unknown> | unknown): Promise<HttpReply> {
  try {
    return json(await call())
  } catch (error) {
    if (error instanceof ConsoleApiError) throw new HttpError(error.status, error.message)
    if (error instanceof Error && 'code' in error) {
      const retriable = (error as { retriable?: boolean }).retriable === true
      throw new HttpError(retriable ? 503 : 400, error.message)
    }
    throw error
  }
}

function routes(
  metrics: BrokerMetrics,
  api: ConsoleApi,
  source: () => BrokerMetricsSource | null,
): RouteTable {
  const file = (name: string, type: string) => staticFile(new URL(name, CONSOLE_DIR), type)
  return {
    '/metrics': {
      GET: async () => ({
        contentType: metrics.registry.contentType,
        body: await metrics.metrics(),
      }),
    },
    '/healthz': { GET: () => ({ contentType: 'text/plain; charset=utf-8', body: 'ok\n' }) },
    '/readyz': {
      GET: () => {
        const ready = readiness(source())
        return json(ready, ready.ready ? 200 : 503)
      },
    },
    '/': { GET: file('index.html', 'text/html; charset=utf-8') },
    '/console.js': { GET: file('console.js', 'text/javascript; charset=utf-8') },
    '/console.css': { GET: file('console.css', 'text/css; charset=utf-8') },
    '/api/cluster': { GET: () => apiCall(() => api.cluster()) },
    '/api/topics': {
      GET: (r) => apiCall(() => api.topics(r.query.get('internal') === 'true')),
      POST: (r) => apiCall(() => api.createTopic(r.body)),
    },
    '/api/topics/*': { DELETE: (r) => apiCall(() => api.deleteTopic(r.path.slice('/api/topics/'.length))) },
    '/api/groups': { GET: () => apiCall(() => api.groups()) },
    '/api/rates': { GET: () => apiCall(() => api.rates()) },
    '/api/messages': { GET: (r) => apiCall(() => api.messages(r.query)) },
  }
}

/**
 * `tidelog top`: the brokers' /metrics in the terminal, refreshed: per-topic produce and
 * fetch rates (summed over the brokers given), under-replicated and offline partitions,
 * and consumer group lag. Rates are the counters' growth between two scrapes, so the
 * first screen appears after one interval.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { type MetricFamily, parsePrometheusText, sumSamples } from '../../ops/prometheus-text.js'
import {
  colour,
  EXIT_FAILED,
  EXIT_OK,
  EXIT_UNREACHABLE,
  out,
  printJson,
  table,
  UsageError,
} from './common.js'

export const TOP_USAGE = `Usage: tidelog top [--http URL[,URL...]] [--interval-ms N] [--iterations N] [--json]

Shows, every interval, from each broker's /metrics (the HTTP listener of tidelog start,
or tidelog.http.listener):
  per topic   produce bytes/s and records/s, consumer fetch bytes/s (all brokers summed)
  cluster     under-replicated and offline partitions, active controller
  groups      lag per consumer group and topic (from the coordinators)

Options:
  --http URLS         Brokers' HTTP listeners (default http://127.0.0.1:9644)
  --interval-ms N     Refresh interval (default 2000)
  --iterations N      Stop after N screens (default: until Ctrl-C)
  --json              One JSON object per screen instead of tables
`

interface Scrape {
  readonly atMs: number
  readonly families: Map<string, MetricFamily>[]
}

export async function topCommand(argv: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      http: { type: 'string', default: 'http://127.0.0.1:9644' },
      'interval-ms': { type: 'string', default: '2000' },
      iterations: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  })
  if (values.help) {
    process.stdout.write(TOP_USAGE)
    return EXIT_OK
  }
  const intervalMs = Number(values['interval-ms'])
  if (!Number.isInteger(intervalMs) || intervalMs < 100) throw new UsageError('--interval-ms must be >= 100')
  const iterations = values.iterations === undefined ? Number.POSITIVE_INFINITY : Number(values.iterations)
  if (!(iterations >= 1)) throw new UsageError('--iterations must be >= 1')
  const urls = values.http.split(',').map((u) => metricsUrl(u.trim()))
  let previous: Scrape
  try {
    previous = await scrape(urls)
  } catch (error) {
    process.stderr.write(`tidelog top: ${(error as Error).message}\n`)
    return EXIT_UNREACHABLE
  }
  let stop = false
  const onSignal = (): void => {
    stop = true
  }
  process.once('SIGINT', onSignal)
  try {
    for (let shown = 0; shown < iterations && !stop; shown++) {
      await sleep(intervalMs)
      let current: Scrape
      try {
        current = await scrape(urls)
      } catch (error) {
        process.stderr.write(`tidelog top: ${(error as Error).message}\n`)
        return EXIT_FAILED
      }
      const screen = summarise(previous, current)
      if (values.json) printJson(screen)
      else render(screen, urls.length)
      previous = current
    }
  } finally {
    process.off('SIGINT', onSignal)
  }
  return EXIT_OK
}

function metricsUrl(base: string): string {
  let url: URL
  try {
    url = new URL(base.includes('://') ? base : `http://${base}`)
  } catch {
    throw new UsageError(`--http: not a URL: '${base}'`)
  }
  if (url.pathname === '/' || url.pathname === '') url.pathname = '/metrics'
  return url.toString()
}

async function scrape(urls: readonly string[]): Promise<Scrape> {
  const families = await Promise.all(
    urls.map(async (url) => {
      let response: Response
      try {
        response = await fetch(url, { signal: AbortSignal.timeout(5000) })
      } catch (error) {
        throw new Error(`cannot reach ${url}: ${(error as Error).message}`)
      }
      if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`)
      return parsePrometheusText(await response.text())
    }),
  )
  return { atMs: Date.now(), families }
}

interface Screen {
  intervalMs: number
  underReplicatedPartitions: number
  offlinePartitions: number
  activeControllers: number
  topics: { topic: string; bytesInPerSec: number; messagesInPerSec: number; bytesOutPerSec: number }[]
  groups: { group: string; topic: string; lag: number }[]
}

function summarise(previous: Scrape, current: Scrape): Screen {
  const seconds = Math.max(0.001, (current.atMs - previous.atMs) / 1000)
  const total = (scrape: Scrape, name: string, match: Record<string, string> = {}) =>
    scrape.families.reduce((sum, f) => sum + sumSamples(f, name, match), 0)
  const topicNames = new Set<string>()
  for (const f of current.families)
    for (const name of [
      'kafka_server_brokertopicmetrics_bytesin_total',
      'kafka_server_brokertopicmetrics_bytesout_total',
    ])
      for (const s of f.get(name)?.samples ?? []) topicNames.add(s.labels.topic)
  const rate = (name: string, topic: string) =>
    Math.max(0, total(current, name, { topic }) - total(previous, name, { topic })) / seconds
  const lag = new Map<string, number>()
  for (const f of current.families)
    for (const s of f.get('kafka_consumergroup_lag')?.samples ?? []) {
      const key = `${s.labels.group}\0${s.labels.topic}`
      lag.set(key, (lag.get(key) ?? 0) + s.value)
    }
  return {
    intervalMs: current.atMs - previous.atMs,
    underReplicatedPartitions: total(current, 'kafka_server_replicamanager_underreplicatedpartitions'),
    offlinePartitions: total(current, 'kafka_controller_kafkacontroller_offlinepartitionscount'),
    activeControllers: total(current, 'kafka_controller_kafkacontroller_activecontrollercount'),
    topics: [...topicNames].sort().map((topic) => ({
      topic,
      bytesInPerSec: rate('kafka_server_brokertopicmetrics_bytesin_total', topic),
      messagesInPerSec: rate('kafka_server_brokertopicmetrics_messagesin_total', topic),
      bytesOutPerSec: rate('kafka_server_brokertopicmetrics_bytesout_total', topic),
    })),
    groups: [...lag].map(([key, value]) => {
      const [group, topic] = key.split('\0')
      return { group, topic, lag: value }
    }),
  }
}

function render(screen: Screen, brokers: number): void {
  if (process.stdout.isTTY) process.stdout.write('\x1b[2J\x1b[H')
  const under = screen.underReplicatedPartitions
  const offline = screen.offlinePartitions
  out(
    `${colour.bold('tidelog top')}  ${brokers} broker(s)  ` +
      `${under > 0 ? colour.yellow(`${under} under-replicated`) : '0 under-replicated'}  ` +
      `${offline > 0 ? colour.red(`${offline} offline`) : '0 offline'}  ` +
      `controller ${screen.activeControllers === 1 ? 'active' : colour.red(`count ${screen.activeControllers}`)}`,
  )
  out()
  out(
    table(
      ['TOPIC', 'IN B/S', 'IN REC/S', 'OUT B/S'],
      screen.topics.map((t) => [
        t.topic,
        t.bytesInPerSec.toFixed(0),
        t.messagesInPerSec.toFixed(1),
        t.bytesOutPerSec.toFixed(0),
      ]),
    ),
  )
  out()
  out(
    table(
      ['GROUP', 'TOPIC', 'LAG'],
      screen.groups.map((g) => [g.group, g.topic, String(g.lag)]),
    ),
  )
}

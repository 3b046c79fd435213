/**
 * Health for orchestrators. `/healthz` (liveness): the process answers, so restarting it
 * would not help. `/readyz` (readiness): the broker can serve its share of the cluster —
 * its logs are loaded (not recovering), it is registered with a live metadata session
 * (not fenced: a broker without one must not lead), and every log directory is online.
 */
import type { BrokerMetricsSource } from './broker-metrics-source.js'

export interface Readiness {
  readonly ready: boolean
  readonly checks: {
    readonly recovered: boolean
    readonly registered: boolean
    readonly logDirsOnline: boolean
  }
  readonly offlineLogDirs: readonly string[]
}

/** `source` is null while the broker still loads (and recovers) its logs. */
export function readiness(source: BrokerMetricsSource | null): Readiness {
  if (!source)
    return {
      ready: false,
      checks: { recovered: false, registered: false, logDirsOnline: false },
      offlineLogDirs: [],
    }
  const offlineLogDirs = source.logManager.offlineLogDirs
  const checks = {
    recovered: true,
    registered: source.isRegistered(),
    logDirsOnline: offlineLogDirs.length === 0,
  }
  return { ready: checks.registered && checks.logDirsOnline, checks, offlineLogDirs }
}

/**
 * The rate a quota held a client to, measured over whole quota periods.
 *
 * Kafka's Rate divides by at least quota.window.num - 1 windows, so a client with room
 * sends up to 10 s worth at once; one sending as fast as it is let then settles into a
 * burst about every quota.window.num windows (the burst's sample expiring) with little
 * between, and a 10 s stretch holds one burst or none: off by up to 80% by design. Over
 * the time from one burst to a later one the quota holds, and that is what is measured.
 */
export interface Delivery {
  /** Since the client started. */
  readonly atMs: number
  readonly bytes: number
}

export interface PeriodRate {
  readonly bytesPerSecond: number
  readonly periods: number
  readonly fromMs: number
  readonly toMs: number
}

/**
 * Bursts are the seconds carrying at least 2x the quota (runs of them count once); the first
 * (the initial allowance) is skipped. A burst is quota.window.num - 1 seconds' worth, so with
 * at least 6 windows one that straddles a second boundary still leaves 2.5x in one of them. Null when fewer than `minPeriods` periods were seen.
 */
export function periodRate(
  deliveries: readonly Delivery[],
  quotaBytesPerSecond: number,
  minPeriods: number,
): PeriodRate | null {
  const perSecond = new Map<number, number>()
  for (const d of deliveries) {
    const second = Math.floor(d.atMs / 1000)
    perSecond.set(second, (perSecond.get(second) ?? 0) + d.bytes)
  }
  const burstSeconds = [...perSecond]
    .filter(([, bytes]) => bytes >= 2 * quotaBytesPerSecond)
    .map(([second]) => second)
    .sort((a, b) => a - b)
  const burstStarts = burstSeconds.filter((second, i) => i === 0 || burstSeconds[i - 1] !== second - 1)
  const starts = burstStarts.slice(1).map((second) => deliveries.find((d) => d.atMs >= second * 1000)!.atMs)
  if (starts.length < minPeriods + 1) return null
  const fromMs = starts[0]
  const toMs = starts[starts.length - 1]
  const bytes = deliveries
    .filter((d) => d.atMs >= fromMs && d.atMs < toMs)
    .reduce((sum, d) => sum + d.bytes, 0)
  return { bytesPerSecond: bytes / ((toMs - fromMs) / 1000), periods: starts.length - 1, fromMs, toMs }
}

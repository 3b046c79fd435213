/**
 * Memory and CPU of the processes a benchmark started, from /proc: resident set size
 * (VmRSS) and user + system CPU seconds. Linux only, as the benchmarks are.
 */
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'

let ticksPerSecond: number | null = null

function clockTicks(): number {
  ticksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
  return ticksPerSecond
}

export interface ProcessStats {
  /** The largest resident set of the processes (one broker's). */
  readonly maxRssBytes: number
  /** User + system CPU seconds of all of them since they started. */
  readonly cpuSeconds: number
}

/** Reads the processes' figures now; a process that is gone counts as nothing. */
export function processStats(pids: readonly number[]): ProcessStats {
  let maxRssBytes = 0
  let ticks = 0
  for (const pid of pids) {
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8')
      const rssKiB = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0)
      maxRssBytes = Math.max(maxRssBytes, rssKiB * 1024)
      // Fields after the command name, which may hold spaces, in parentheses: utime and
      // stime are the 14th and 15th of the whole line.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // Exited meanwhile (a follower being restarted): nothing to add.
    }
  }
  return { maxRssBytes, cpuSeconds: ticks / clockTicks() }
}

/**
 * CPU seconds of the processes' main threads (the event loops) and of all their other
 * threads (V8's compiler and GC helpers, libuv's pool): a warm-up shows in the second.
 */
export function threadCpuSeconds(pids: readonly number[]): { main: number; others: number } {
  let main = 0
  let others = 0
  for (const pid of pids) {
    let tids: string[] = []
    try {
      tids = readdirSync(`/proc/${pid}/task`)
    } catch {
      continue
    }
    for (const tid of tids) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
        const ticks = Number(fields[11]) + Number(fields[12])
        if (tid === String(pid)) main += ticks
        else others += ticks
      } catch {
        // The thread ended meanwhile.
      }
    }
  }
  return { main: main / clockTicks(), others: others / clockTicks() }
}

/**
 * CPU seconds of one process's threads grouped by kind: the main thread (the event loop),
 * then by thread name (V8's workers, which do much of a garbage collection's marking and
 * sweeping, libuv's pool, which does the file system's calls, the allocator's background
 * thread), so an idle process's CPU can be told apart from its event loop's.
 */
export function threadCpuSecondsByName(pid: number): Map<string, number> {
  const byName = new Map<string, number>()
  let tids: string[] = []
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {
    return byName
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
      const name = tid === String(pid) ? 'main' : stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      const seconds = (Number(fields[11]) + Number(fields[12])) / clockTicks()
      byName.set(name, (byName.get(name) ?? 0) + seconds)
    } catch {
      // The thread ended meanwhile.
    }
  }
  return byName
}

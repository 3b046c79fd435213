/**
 * Test-only faults for a `tidelog broker` process (test/netfault: brokers as processes in
 * network namespaces), which tidelog/testing injects into in-process brokers through its
 * fault parts: a power loss (what was not fsynced is gone), a wall clock jumped forward or
 * back, a slow disk and a full disk. Off unless the environment variable
 * TIDELOG_TEST_FAULT_CONTROL names a control file: the harness writes one command (JSON)
 * there and sends SIGUSR2; the broker applies it and logs `test fault <seq> applied`. A
 * production broker never sets it, and without it nothing here is loaded (cli/main.ts).
 */
import { readFileSync, writeSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { type Clock, systemClock, type TimerHandle } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import { nodeFileSystem } from '../runtime/node-file-system.js'
import type { BrokerDependencies } from '../server/broker.js'
import { FaultyFileSystem, ProcessState } from './fault-parts.js'

export const FAULT_CONTROL_ENV = 'TIDELOG_TEST_FAULT_CONTROL'

/** One command of the control file; `seq` is echoed in the log line that confirms it. */
export type ProcessFaultCommand =
  | { readonly seq: number; readonly op: 'power-loss' }
  /** The wall clock's offset from the system's, set (not added): 0 puts it back. */
  | { readonly seq: number; readonly op: 'clock-offset'; readonly offsetMs: number }
  /** Extra latency of every disk call; 0 heals. */
  | { readonly seq: number; readonly op: 'disk-slow'; readonly delayMs: number }
  /** Writes fail with ENOSPC while true. */
  | { readonly seq: number; readonly op: 'disk-full'; readonly full: boolean }

/**
 * The wall clock (`nowMs`: record timestamps, retention, transaction and session
 * deadlines kept as wall time) moved by an offset; the monotonic clock and the timers are
 * the system's, as a jump of the system clock (settimeofday, NTP stepping) leaves
 * CLOCK_MONOTONIC and so Node's timers alone.
 */
class OffsetClock implements Clock {
  offsetMs = 0

  nowMs(): number {
    return systemClock.nowMs() + this.offsetMs
  }
  monotonicMs(): number {
    return systemClock.monotonicMs()
  }
  setTimeout(callback: () => void, delayMs: number): TimerHandle {
    return systemClock.setTimeout(callback, delayMs)
  }
}

/** How long a power loss waits for disk calls already handed to the OS before cutting files. */
const IN_FLIGHT_DRAIN_MS = 200

/**
 * The broker parts the faults act on, and the SIGUSR2 handler that applies the control
 * file's command. Throws when the environment variable is not set: it is never a default.
 */
export function processFaultParts(logger: Logger): Partial<BrokerDependencies> {
  const controlPath = process.env[FAULT_CONTROL_ENV]
  if (!controlPath) throw new Error(`${FAULT_CONTROL_ENV} is not set: test faults are off`)
  const state = new ProcessState()
  const fileSystem = new FaultyFileSystem(nodeFileSystem, state, (ms) => sleep(ms))
  const clock = new OffsetClock()
  logger.warn({ controlPath }, 'TEST FAULT HOOK ON: SIGUSR2 applies the command in the control file')

  const apply = async (command: ProcessFaultCommand): Promise<void> => {
    switch (command.op) {
      case 'power-loss': {
        // From here on no disk call of this process completes, as at the instant power goes.
        state.kill()
        await sleep(IN_FLIGHT_DRAIN_MS)
        // A cut that fails halfway is still a power loss: the process dies either way.
        const lost = await fileSystem
          .losePageCache()
          .catch((error: unknown) => ({ cutFailed: String(error) }))
        // pino writes stdout asynchronously and a SIGKILL drops what it holds: the
        // confirmation goes out synchronously, or the harness cannot tell a power loss from a
        // crash. The broker's own buffered lines are lost, as after a kill -9.
        writeLineSync({
          level: 40,
          time: Date.now(),
          name: 'test-faults',
          ...lost,
          msg: `test fault ${command.seq} applied: power loss, unsynced bytes cut`,
        })
        process.kill(process.pid, 'SIGKILL')
        return
      }
      case 'clock-offset': {
        const fromMs = clock.offsetMs
        clock.offsetMs = command.offsetMs
        logger.warn(
          { fromMs, offsetMs: command.offsetMs },
          `test fault ${command.seq} applied: wall clock jumped by ${command.offsetMs - fromMs} ms`,
        )
        return
      }
      case 'disk-slow':
        fileSystem.slowMs = command.delayMs
        logger.warn({ delayMs: command.delayMs }, `test fault ${command.seq} applied: disk slow`)
        return
      case 'disk-full':
        fileSystem.full = command.full
        logger.warn({ full: command.full }, `test fault ${command.seq} applied: disk full`)
        return
    }
  }
  process.on('SIGUSR2', () => {
    let command: ProcessFaultCommand
    try {
      command = JSON.parse(readFileSync(controlPath, 'utf8')) as ProcessFaultCommand
    } catch (error) {
      logger.warn({ err: error, controlPath }, 'test fault: unreadable control file, ignored')
      return
    }
    apply(command).catch((error: unknown) => logger.warn({ err: error }, 'test fault failed'))
  })
  return { clock, fileSystem }
}

/** One JSON log line on stdout, written before this returns (a pipe may ask to try again). */
function writeLineSync(record: Record<string, unknown>): void {
  const bytes = Buffer.from(`${JSON.stringify(record)}\n`)
  let written = 0
  for (let attempt = 0; written < bytes.length && attempt < 1000; attempt++) {
    try {
      written += writeSync(1, bytes, written)
    } catch (error) {
      if ((error as { code?: string }).code !== 'EAGAIN') return
    }
  }
}

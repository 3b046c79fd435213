/**
 * Time as an injected dependency: core modules never call Date.now() or timers directly,
 * so the deterministic simulation can drive them with a virtual clock.
 */
export interface TimerHandle {
  cancel(): void
}

export interface Clock {
  /** Wall-clock milliseconds since the epoch (record timestamps, retention). */
  nowMs(): number
  /** Monotonic milliseconds (timeouts, lag measurement). */
  monotonicMs(): number
  setTimeout(callback: () => void, delayMs: number): TimerHandle
}

export const systemClock: Clock = {
  nowMs: () => Date.now(),
  monotonicMs: () => performance.now(),
  setTimeout(callback, delayMs) {
    const timer = setTimeout(callback, delayMs)
    timer.unref?.()
    return { cancel: () => clearTimeout(timer) }
  },
}

/**
 * The one polling wait of the tests. A condition may throw while the system settles (a
 * broker restarting, an assertion not true yet): polling goes on, and at the deadline the
 * last error thrown is rethrown as it was, so an assertion's own message and diff are what
 * the test reports, not a bare "timed out".
 */
import { setTimeout as sleep } from 'node:timers/promises'

export async function waitUntil(
  what: string,
  timeoutMs: number,
  condition: () => boolean | Promise<boolean>,
  intervalMs = 50,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    let lastError: unknown
    let thrown = false
    try {
      if (await condition()) return
    } catch (error) {
      lastError = error
      thrown = true
    }
    if (Date.now() > deadline) {
      if (thrown) throw lastError
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    }
    await sleep(intervalMs)
  }
}

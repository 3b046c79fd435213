/**
 * The one polling wait of the tests. A condition may throw while the system settles (a
 * broker restarting, an assertion not true yet): polling goes on, and at the deadline the
 * error names what was awaited and carries the last error the condition threw, as its
 * `cause` and in its message, so an assertion's own message and diff are what the test
 * reports, not a bare "timed out".
 */
import { setTimeout as sleep } from 'node:timers/promises'

/** Thrown at a wait's deadline; `cause` is the condition's last error, when it threw one. */
export class WaitTimeoutError extends Error {
  override readonly name = 'WaitTimeoutError'
}

export async function waitUntil(
  what: string,
  timeoutMs: number,
  condition: () => boolean | Promise<boolean>,
  intervalMs = 50,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let lastError: unknown
  let thrown = false
  // Whether the last poll threw: if it returned false after an earlier throw, the earlier
  // error is still the best clue, but the message says it is not the latest state.
  let lastPollThrew = false
  for (;;) {
    try {
      lastPollThrew = false
      if (await condition()) return
    } catch (error) {
      lastError = error
      thrown = true
      lastPollThrew = true
    }
    if (Date.now() > deadline) {
      if (!thrown) throw new WaitTimeoutError(`timed out after ${timeoutMs} ms waiting for ${what}`)
      const when = lastPollThrew ? 'last poll threw' : 'last poll returned false; an earlier poll threw'
      throw new WaitTimeoutError(
        `timed out after ${timeoutMs} ms waiting for ${what} (${when}): ${describe(lastError)}`,
        { cause: lastError },
      )
    }
    await sleep(intervalMs)
  }
}

/**
 * `waitUntil` for a probe that returns a value: polls until it returns something other than
 * undefined and returns that.
 */
export async function waitForValue<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined> | T | undefined,
  intervalMs = 50,
): Promise<T> {
  let value: T | undefined
  await waitUntil(
    what,
    timeoutMs,
    async () => {
      value = await probe()
      return value !== undefined
    },
    intervalMs,
  )
  return value as T
}

/** An error's message (an AssertionError's includes its diff), or the thrown value as text. */
function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

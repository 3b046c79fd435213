/**
 * The conformance tests' outcomes for the generated compatibility table (issue 32,
 * scripts/compat-table.mjs -> docs/compatibility.md). When TIDELOG_COMPAT_RESULTS names a
 * file, each check's outcome is appended to it as one JSON line; otherwise nothing is written.
 * Test files run in parallel processes: each line is one append of well under 4 KiB, which
 * O_APPEND keeps whole.
 */
import { appendFileSync } from 'node:fs'

/** Where the check ran: tidelog, or Apache Kafka (the reference broker). */
export type CompatTarget = 'tidelog' | 'kafka'

export interface CompatOutcome {
  readonly check: string
  readonly pass: boolean
  readonly ms: number
  readonly detail?: string
}

export interface CompatResultLine extends CompatOutcome {
  /** The client or framework, e.g. `kafka-clients (Java)`. */
  readonly client: string
  /** Its version as the test pins or reads it. */
  readonly version: string
  readonly target: CompatTarget
}

export function recordCompatResults(
  client: string,
  version: string,
  target: CompatTarget,
  outcomes: Iterable<CompatOutcome>,
): void {
  const file = process.env.TIDELOG_COMPAT_RESULTS
  if (!file) return
  for (const o of outcomes) {
    const line: CompatResultLine = {
      client,
      version,
      target,
      check: o.check,
      pass: o.pass,
      ms: o.ms,
      // A reason is for reading, not for the table: cut so the line stays one small append.
      ...(o.pass || o.detail === undefined ? {} : { detail: o.detail.slice(0, 500) }),
    }
    appendFileSync(file, `${JSON.stringify(line)}\n`)
  }
}

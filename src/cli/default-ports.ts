/**
 * Ports `tidelog start` chooses on the user's behalf (Kafka's 9092, the HTTP listener's
 * 9644): when one is taken (a second `tidelog start` on this machine, another test
 * suite's broker), the broker takes a free port instead of dying on EADDRINUSE, and the
 * banner names the one it took. A port the user gave stays theirs: taken, it is an error
 * of one line (addressInUse).
 */
import { createServer } from 'node:net'

/** True when nothing listens on host:port now (a probe: it may be taken right after). */
function isFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(true)))
  })
}

/**
 * `base` for broker 0, base + i for broker i, when all are free; 0 (each broker picks a free
 * port) when any is taken.
 */
export async function defaultPortOrFree(host: string, base: number, brokers: number): Promise<number> {
  for (let i = 0; i < brokers; i++) if (!(await isFree(host, base + i))) return 0
  return base
}

/** The listen() failure of a taken address, however deep in an error's causes; else null. */
export function addressInUse(error: unknown): { address: string; port: number } | null {
  for (let cause = error; cause instanceof Error; cause = cause.cause) {
    const failure = cause as Error & { code?: unknown; address?: unknown; port?: unknown }
    if (failure.code === 'EADDRINUSE')
      return { address: String(failure.address ?? '?'), port: Number(failure.port ?? -1) }
  }
  return null
}

/**
 * parseArgs reads `--http-port -1` as an unknown option -1: the value is joined to its
 * flag (`--http-port=-1`), the form parseArgs takes.
 */
export function joinNegativeValues(args: readonly string[], flags: readonly string[]): string[] {
  const joined: string[] = []
  for (let i = 0; i < args.length; i++) {
    const next = args[i + 1]
    if (flags.includes(args[i]) && next !== undefined && /^-\d+$/.test(next)) {
      joined.push(`${args[i]}=${next}`)
      i++
    } else joined.push(args[i])
  }
  return joined
}

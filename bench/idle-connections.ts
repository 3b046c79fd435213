/**
 * Idle client connections for bench:scale's connections section and bench:scale-deployed's
 * many-clients section (issue 38 item 3): each connects and sends ApiVersions v0, as a
 * client does first, then stays open doing nothing.
 */
import { connect, type Socket } from 'node:net'
import { encodeRequestFrame } from '../src/protocol/frame-encoder.js'
import { ApiKey, loadApiCodec } from '../src/protocol/generated/index.js'

const OPEN_AT_ONCE = 50
/** How long the broker gets to settle after the last connection opened before its RSS is read. */
const SETTLE_MS = 2000

/** One raw connection that has sent ApiVersions v0 and read the answer. */
export async function apiVersionsConnection(
  host: string,
  port: number,
  correlationId: number,
): Promise<Socket> {
  await loadApiCodec(ApiKey.ApiVersions)
  const frame = encodeRequestFrame(ApiKey.ApiVersions, 0, correlationId, 'scale-bench', {})
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port })
    socket.once('error', reject)
    socket.once('connect', () => socket.write(Buffer.concat(frame)))
    socket.once('data', () => {
      socket.off('error', reject)
      socket.on('error', () => {})
      resolve(socket)
    })
  })
}

/**
 * Opens `count` such connections, OPEN_AT_ONCE at a time, into `sockets` as they open (so
 * that the caller closes those already open when a later one fails).
 */
export async function openApiVersionsConnections(
  host: string,
  port: number,
  count: number,
  sockets: Socket[],
): Promise<void> {
  for (let i = 0; i < count; i += OPEN_AT_ONCE) {
    const batch = []
    for (let j = i; j < Math.min(count, i + OPEN_AT_ONCE); j++)
      batch.push(apiVersionsConnection(host, port, j))
    sockets.push(...(await Promise.all(batch)))
  }
}

/**
 * Opens `count` idle connections to host:port, reads `rssBytes()` (the broker's) before and
 * after, closes them and returns how much the RSS grew.
 */
export async function idleConnectionsRssBytes(
  host: string,
  port: number,
  count: number,
  rssBytes: () => number,
): Promise<number> {
  const before = rssBytes()
  const sockets: Socket[] = []
  try {
    await openApiVersionsConnections(host, port, count, sockets)
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
    return rssBytes() - before
  } finally {
    for (const socket of sockets) socket.destroy()
  }
}

/**
 * kill -9 in the middle of appends, again and again: after every restart each batch the
 * child reported as appended is readable with the same bytes (same CRC) and the log ends on
 * a batch boundary. Half the rounds fsync every append (flush.messages=1); the other half
 * rely on the page cache, which survives a process kill.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import type { Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { readAll, withTempDir } from './helpers.js'

const CHILD = fileURLToPath(new URL('./crash-child.js', import.meta.url))
const KILLS = 15

interface Ack {
  readonly firstOffset: number
  readonly lastOffset: number
  readonly crc: number
}

/** Runs the child until `killAfterMs` after its first ack, then SIGKILLs it; returns its acks. */
function runAndKill(dir: string, flush: boolean, killAfterMs: number): Promise<Ack[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, dir, flush ? 'flush' : 'nosync'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    let err = ''
    let timer: NodeJS.Timeout | undefined
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk
      if (timer === undefined && out.includes('ack '))
        timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs)
    })
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk))
    child.on('error', reject)
    child.on('exit', (_code, signal) => {
      if (timer !== undefined) clearTimeout(timer)
      if (signal !== 'SIGKILL') {
        reject(new Error(`child exited without being killed: ${err}`))
        return
      }
      const acks = out
        .split('\n')
        .slice(0, -1) // the last line may be cut by the kill
        .filter((line) => line.startsWith('ack '))
        .map((line) => {
          const [, first, last, crc] = line.split(' ')
          return { firstOffset: Number(first), lastOffset: Number(last), crc: Number(crc) }
        })
      resolve(acks)
    })
  })
}

async function logFileBytes(dir: string): Promise<number> {
  let total = 0
  for (const name of await readdir(dir))
    if (name.endsWith('.log')) total += (await stat(join(dir, name))).size
  return total
}

describe('crash recovery', () => {
  it(`every acknowledged append survives ${KILLS} SIGKILLs at random moments`, {
    timeout: 60_000,
  }, async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 'crash-0')
      const acked = new Map<number, Ack>()
      let seed = 12345
      const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
      for (let round = 0; round < KILLS; round++) {
        const acks = await runAndKill(dir, round % 2 === 0, 20 + Math.floor(random() * 300))
        assert.ok(acks.length > 0, `round ${round}: the child acknowledged nothing`)
        for (const ack of acks) acked.set(ack.firstOffset, ack)
        const log = await UnifiedLog.open({
          fs: nodeFileSystem,
          dir,
          hadCleanShutdown: false,
          recoveryPoint: 0 as Offset,
        })
        const batches = await readAll(log, 0 as Offset, 1 << 20)
        const byBase = new Map(batches.map((b) => [b.baseOffset, b]))
        for (const ack of acked.values()) {
          const batch = byBase.get(ack.firstOffset)
          assert.ok(
            batch !== undefined,
            `round ${round}: acknowledged batch at ${ack.firstOffset} is missing`,
          )
          assert.equal(batch.lastOffset, ack.lastOffset)
          assert.equal(
            batch.bytes.readUInt32BE(17),
            ack.crc,
            `round ${round}: batch ${ack.firstOffset} changed`,
          )
        }
        for (let i = 1; i < batches.length; i++)
          assert.equal(batches[i].baseOffset, batches[i - 1].lastOffset + 1)
        const bytesRead = batches.reduce((n, b) => n + b.bytes.length, 0)
        assert.equal(await logFileBytes(dir), bytesRead, 'the log ends on a batch boundary')
        assert.equal(log.logEndOffset, batches.at(-1)!.lastOffset + 1)
        await log.closeHandlers()
      }
      assert.ok(acked.size > KILLS)
    })
  })
})

/**
 * Child process of crash.test.ts: appends batches to a log in a loop and prints
 * `ack <firstOffset> <lastOffset> <crc>` for each append whose promise resolved. The parent
 * kills it with SIGKILL at random moments. Does nothing without arguments, so a test runner
 * that picks this file up by its folder name finishes at once.
 */

import type { LeaderEpoch } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { fromProperties } from '../../src/storage/log-config.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { simpleBatch } from './helpers.js'

async function main(dir: string, flushEveryMessage: boolean): Promise<void> {
  const config = fromProperties({
    'segment.bytes': 64 * 1024,
    'index.interval.bytes': 1024,
    'retention.ms': -1,
    ...(flushEveryMessage ? { 'flush.messages': 1 } : {}),
  })
  const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config })
  process.stdout.write(`ready ${log.logEndOffset}\n`)
  for (let round = 0; ; round++) {
    const appends = Array.from({ length: 1 + (round % 4) }, (_, i) => {
      const buffer = simpleBatch(1 + ((round * 7 + i) % 20), 100, round + i)
      return log
        .append(buffer, { assignOffsets: true, leaderEpoch: 0 as LeaderEpoch })
        .then((info) => ({ info, buffer }))
    })
    for (const { info, buffer } of await Promise.all(appends)) {
      process.stdout.write(`ack ${info.firstOffset} ${info.lastOffset} ${buffer.readUInt32BE(17)}\n`)
    }
  }
}

const [dir, mode] = process.argv.slice(2)
if (dir !== undefined) {
  main(dir, mode === 'flush').catch((err: unknown) => {
    process.stderr.write(`crash child failed: ${String(err)}\n`)
    process.exit(1)
  })
}

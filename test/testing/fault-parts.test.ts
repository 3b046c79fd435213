/**
 * tidelog/testing's kill is a kill -9 (issue 41): the OS releases the dead broker's locks, so
 * its restart on the same log dirs is not refused, while a live broker's locks hold.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { DirectoryLockedError, lockDirectory } from '../../src/common/file-system.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { FaultyFileSystem, ProcessState } from '../../src/testing/fault-parts.js'

test("FaultyFileSystem: a killed process's locks are released; a live one's hold", async () => {
  const dir = await mkdtemp(join(tmpdir(), 'tidelog-fault-lock-'))
  try {
    const process = new ProcessState()
    const disk = new FaultyFileSystem(nodeFileSystem, process, async () => undefined)
    await lockDirectory(disk, dir)
    const next = new FaultyFileSystem(nodeFileSystem, new ProcessState(), async () => undefined)
    await assert.rejects(lockDirectory(next, dir), DirectoryLockedError)
    process.kill()
    await disk.kill()
    const lock = await lockDirectory(next, dir)
    await lock.release()
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
})

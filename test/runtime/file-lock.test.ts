/**
 * runtime/file-lock.ts: flock(2) through util-linux's flock, or perl's flock where flock is
 * not installed. One holder at a time, in this process too (a second descriptor is a second
 * open file description); release frees it; without either helper the lock fails and says
 * what to install rather than running unlocked.
 */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { lockFile } from '../../src/runtime/file-lock.js'

const hasCode = (code: string) => (err: unknown) => (err as { code?: unknown }).code === code

/** Runs `body` with PATH set to `path` (the helpers are found through PATH at each lock). */
async function withPath<T>(path: string, body: () => Promise<T>): Promise<T> {
  const saved = process.env.PATH
  process.env.PATH = path
  try {
    return await body()
  } finally {
    process.env.PATH = saved
  }
}

async function oneHolderAtATime(file: string): Promise<void> {
  const first = await lockFile(file)
  await assert.rejects(lockFile(file), hasCode('EWOULDBLOCK'))
  await first.release()
  await first.release() // a second release does nothing
  const second = await lockFile(file)
  await second.release()
}

describe('lockFile', () => {
  let dir = ''
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tidelog-file-lock-'))
  })
  after(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it('with flock: one holder at a time in this process, free again once released', async () => {
    await oneHolderAtATime(join(dir, 'flock.lock'))
  })

  it("with perl's flock where flock is not installed: the same", async () => {
    const bin = join(dir, 'perl-only')
    await mkdir(bin)
    await symlink(execFileSync('sh', ['-c', 'command -v perl']).toString().trim(), join(bin, 'perl'))
    await withPath(bin, () => oneHolderAtATime(join(dir, 'perl.lock')))
  })

  it('with neither: fails, naming what to install, and leaves nothing locked', async () => {
    const file = join(dir, 'none.lock')
    await withPath(join(dir, 'empty'), () =>
      assert.rejects(lockFile(file), (err: unknown) => {
        assert.ok(hasCode('ELOCK')(err))
        assert.match((err as Error).message, /util-linux provides flock/)
        return true
      }),
    )
    const lock = await lockFile(file)
    await lock.release()
  })
})

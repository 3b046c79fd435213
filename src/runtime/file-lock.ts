/**
 * flock(2) for Node, which has no such call in core: NodeFileSystem.lockExclusive's lock.
 *
 * The file is opened here and the descriptor handed to a short-lived `flock -x -n 3` (util-
 * linux; busybox has it too) as its fd 3. flock(2) locks belong to the open file description,
 * which the child shares with this process: the child exits at once and the lock stays with
 * our descriptor. So it is the kernel's lock, released when the descriptor closes: by
 * release(), or by the kernel when the process ends, kill -9 included, with no helper process
 * left behind. Two descriptors of one process are two open file descriptions, so a second
 * lock in the same process is refused as well. Node opens files close-on-exec: processes the
 * broker spawns later do not inherit (and keep) the lock.
 *
 * Why not another way: a PID file is not released by the kernel and racy to check; fs-ext
 * builds a native addon with node-gyp, and its prebuilt fork is a one-release fork that
 * fetches binaries at install; a long-lived `flock FILE cat` child would outlive a kill -9 of
 * the broker until it read EOF. Where `flock` is missing (macOS) the same is done with perl's
 * flock, which calls flock(2) too. Cost: one process spawn (5-10 ms) per lock, at startup.
 */
import { spawn } from 'node:child_process'
import { close, open } from 'node:fs'
import type { FileLock } from '../common/file-system.js'

/** Helpers tried in turn; each locks its fd 3 without waiting, exiting 1 when it is held. */
const LOCKERS: readonly (readonly [string, readonly string[]])[] = [
  ['flock', ['-x', '-n', '3']],
  [
    'perl',
    [
      '-e',
      'use Fcntl ":flock"; open(my $f, ">>&=3") or die "fd 3: $!"; flock($f, LOCK_EX | LOCK_NB) or exit 1',
    ],
  ],
]

/** Locks `path` (created empty if missing) for this process; code 'EWOULDBLOCK' while another holds it. */
export async function lockFile(path: string): Promise<FileLock> {
  const fd = await new Promise<number>((resolve, reject) =>
    open(path, 'a', (err, opened) => (err ? reject(err) : resolve(opened))),
  )
  try {
    await flockNonBlocking(fd, path)
  } catch (err) {
    await closeFd(fd)
    throw err
  }
  // A plain descriptor, not a FileHandle: nothing closes it on garbage collection.
  let released: Promise<void> | undefined
  return {
    path,
    release: () => {
      released ??= closeFd(fd)
      return released
    },
  }
}

async function flockNonBlocking(fd: number, path: string): Promise<void> {
  const missing: string[] = []
  for (const [command, args] of LOCKERS) {
    const outcome = await run(command, args, fd)
    if (outcome === 'missing') {
      missing.push(command)
      continue
    }
    if (outcome.status === 0) return
    if (outcome.status === 1 && outcome.stderr === '')
      throw Object.assign(new Error(`EWOULDBLOCK: ${path} is locked by another owner`), {
        code: 'EWOULDBLOCK',
      })
    throw Object.assign(
      new Error(`locking ${path} with ${command} failed (exit ${outcome.status}): ${outcome.stderr.trim()}`),
      { code: 'ELOCK' },
    )
  }
  throw Object.assign(
    new Error(`cannot lock ${path}: none of ${missing.join(', ')} is installed (util-linux provides flock)`),
    { code: 'ELOCK' },
  )
}

function run(
  command: string,
  args: readonly string[],
  fd: number,
): Promise<'missing' | { status: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe', fd] })
    let stderr = ''
    const errors = child.stderr!
    errors.setEncoding('utf8')
    errors.on('data', (chunk: string) => {
      stderr += chunk
    })
    child.on('error', (err: NodeJS.ErrnoException) =>
      err.code === 'ENOENT' ? resolve('missing') : reject(err),
    )
    child.on('close', (status) => resolve({ status, stderr }))
  })
}

function closeFd(fd: number): Promise<void> {
  return new Promise((resolve, reject) => close(fd, (err) => (err ? reject(err) : resolve())))
}

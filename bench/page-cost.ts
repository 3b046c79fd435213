/**
 * What a fresh page of memory costs on this machine, printed beside the figures of a
 * benchmark: writes 256 MiB to a tmpfs file (/dev/shm, else the temp dir), deletes it, and
 * reports the system time per GiB.
 *
 * Why: the machines here are Firecracker VMs with free page reporting (virtio_balloon,
 * /sys/module/page_reporting): memory the guest frees goes back to the host within seconds,
 * and the next use of such a page faults on the host. Writing 1 GiB with dd cost 1.3-1.5 s of
 * system time on such pages against 0.2 s on pages freed a moment before (0.87 s 5 s after
 * they were freed, 1.5 s after 20 s). Every byte a broker writes into the page cache, and
 * every fresh buffer a client maps, can pay it: a 3-broker RF 3 run went from about 200 to
 * 110 MB/s with its system time 2-4x once its writes passed the memory earlier runs had
 * just freed (docs/notes/performance.md). The figure tells a reader which case a report ran in.
 */
import { closeSync, existsSync, openSync, unlinkSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const CHUNK_BYTES = 1 << 20
const PROBE_MIB = 256

/** System seconds per GiB written to fresh tmpfs pages, measured over PROBE_MIB MiB. */
export function freshPageSystemSecondsPerGiB(): number {
  const dir = existsSync('/dev/shm') ? '/dev/shm' : tmpdir()
  const path = join(dir, `tidelog-page-cost-${process.pid}`)
  const chunk = Buffer.alloc(CHUNK_BYTES, 1)
  const before = process.cpuUsage()
  const fd = openSync(path, 'w')
  try {
    for (let i = 0; i < PROBE_MIB; i++) writeSync(fd, chunk)
  } finally {
    closeSync(fd)
    unlinkSync(path)
  }
  return process.cpuUsage(before).system / 1e6 / (PROBE_MIB / 1024)
}

/** One line for a report. */
export function describePageCost(secondsPerGiB: number): string {
  return (
    `Writing fresh memory cost ${secondsPerGiB.toFixed(2)} s of system time per GiB at the start ` +
    `(${PROBE_MIB} MiB to tmpfs; about 0.2 on pages the guest used a moment before, 1.3-1.5 on pages the ` +
    "VM's free page reporting has given back to the host: bench/page-cost.ts). Page-cache writes " +
    'pay the same, so a high figure lowers the write-heavy rows.'
  )
}

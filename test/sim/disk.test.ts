/**
 * The simulated disk's locks do what flock(2) does for the real broker (issue 41): one holder
 * at a time, a second lock refused even from the same process, and a killed process's locks
 * released with it, so a restarted incarnation takes them again.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { DirectoryLockedError, lockDirectory } from '../../src/common/file-system.js'
import { ProcessDisk, SimDisk } from '../../src/sim/disk.js'
import { SimRandom } from '../../src/sim/random.js'

test('a simulated lock has one holder; a kill releases it for the next incarnation', async () => {
  const disk = new SimDisk(new SimRandom(1), () => 0)
  const first = new ProcessDisk(disk)
  const lock = await lockDirectory(first, '/broker-0/data')
  assert.deepEqual(await first.readdir('/broker-0/data'), ['.lock'])
  await assert.rejects(lockDirectory(first, '/broker-0/data'), DirectoryLockedError)
  const second = new ProcessDisk(disk)
  await assert.rejects(lockDirectory(second, '/broker-0/data'), DirectoryLockedError)
  await lock.release()
  await lock.release() // a second release does nothing
  const again = await lockDirectory(second, '/broker-0/data')
  second.kill()
  const third = new ProcessDisk(disk)
  await lockDirectory(third, '/broker-0/data')
  // The dead process's late release leaves the new holder's lock alone.
  void again.release()
  await assert.rejects(lockDirectory(new ProcessDisk(disk), '/broker-0/data'), DirectoryLockedError)
})

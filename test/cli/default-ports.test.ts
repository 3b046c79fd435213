/**
 * Issue 40 items 1 and 2: a second `tidelog start` whose default ports (9092, 9644) are
 * taken takes free ones and says which; a port the user chose that is taken ends the
 * command with one line and exit status 1; `--http-port -1`, as the README writes it,
 * turns the HTTP listener off. Unit checks of the helpers, then the real command.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { addressInUse, defaultPortOrFree, joinNegativeValues } from '../../src/cli/default-ports.js'
import { freePort, spawnTidelog } from '../helpers/broker-process.js'

function listenOn(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve(server))
  })
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()))
}

describe('default ports', () => {
  it('joins a negative value to its flag only for the flags named', () => {
    assert.deepEqual(joinNegativeValues(['--http-port', '-1', '--port', '0'], ['--http-port']), [
      '--http-port=-1',
      '--port',
      '0',
    ])
    assert.deepEqual(joinNegativeValues(['--http-port', '9000'], ['--http-port']), ['--http-port', '9000'])
    assert.deepEqual(joinNegativeValues(['--port', '-1'], ['--http-port']), ['--port', '-1'])
  })

  it('keeps a free default port and gives 0 when any broker would find its port taken', async () => {
    const port = await freePort()
    assert.equal(await defaultPortOrFree('127.0.0.1', port, 1), port)
    const taken = await listenOn(port + 1)
    try {
      assert.equal(await defaultPortOrFree('127.0.0.1', port, 2), 0)
    } finally {
      await close(taken)
    }
  })

  it('finds EADDRINUSE among the causes', () => {
    const listen = Object.assign(new Error('listen EADDRINUSE'), {
      code: 'EADDRINUSE',
      address: '127.0.0.1',
      port: 9644,
    })
    assert.deepEqual(addressInUse(new Error('start failed', { cause: listen })), {
      address: '127.0.0.1',
      port: 9644,
    })
    assert.equal(addressInUse(new Error('other')), null)
  })

  it('`tidelog start` with its HTTP port taken takes a free one; a chosen port taken exits 1 in one line', async () => {
    const dataDirs = [
      await mkdtemp(join(tmpdir(), 'tidelog-ports-a-')),
      await mkdtemp(join(tmpdir(), 'tidelog-ports-b-')),
    ]
    const httpPort = await freePort()
    const blocker = await listenOn(httpPort)
    try {
      // The HTTP port is chosen here: taken, it is the user's error.
      const refused = spawnTidelog([
        'start',
        '--port',
        '0',
        '--http-port',
        String(httpPort),
        '--data-dir',
        dataDirs[0],
      ])
      const { code } = await refused.exited
      assert.equal(code, 1)
      const stderr = refused.lines.filter((line) => line.startsWith('tidelog:'))
      assert.deepEqual(stderr, [
        `tidelog: 127.0.0.1:${httpPort} is already in use (another broker?): choose another port`,
      ])
      assert.ok(
        !refused.lines.some((line) => /^\s+at /.test(line)),
        `a stack trace: ${refused.lines.join('\n')}`,
      )
      // 9644, the default, taken (here by the test, unless something else holds it already):
      // the broker starts on a free HTTP port and prints it.
      const defaultBlocker = await listenOn(9644).catch(() => null)
      const fallback = spawnTidelog(['start', '--port', String(await freePort()), '--data-dir', dataDirs[0]])
      try {
        const { line } = await fallback.waitForLine(/console and metrics: http:/, 20_000)
        assert.match(line, /http:\/\/127\.0\.0\.1:(?!9644\b)\d+/)
      } finally {
        await fallback.terminate()
        if (defaultBlocker) await close(defaultBlocker)
      }
      // --http-port -1 (the README's form) turns the listener off.
      const kafkaPort = await freePort()
      const noHttp = spawnTidelog([
        'start',
        '--port',
        String(kafkaPort),
        '--http-port',
        '-1',
        '--data-dir',
        dataDirs[1],
      ])
      try {
        await noHttp.waitForLine(/bootstrap servers: 127\.0\.0\.1:/, 20_000)
        assert.ok(!noHttp.lines.some((line) => line.includes('console and metrics')), noHttp.lines.join('\n'))
      } finally {
        await noHttp.terminate()
      }
    } finally {
      await close(blocker)
      for (const dir of dataDirs) await rm(dir, { recursive: true, force: true })
    }
  })
})

/**
 * Issue 16: `tidelog start --secure` makes a development CA, a broker certificate and a
 * SCRAM user, serves SASL_SSL only, and prints client properties that kcat can use as they
 * are to produce and consume; a plaintext client is refused; its schema registry is HTTPS
 * and takes the same user's password (basic auth). A restart on the same data
 * directory keeps the CA and the password, so clients keep working.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'
import { type ChildOutput, spawnTidelog, tidelogBin } from '../helpers/broker-process.js'

const run = promisify(execFile)

async function start(
  dataDir: string,
): Promise<{ cli: ChildOutput; bootstrap: string; librdkafka: string[] }> {
  const cli = spawnTidelog(['start', '--secure', '--port', '0', '--data-dir', dataDir], {
    TIDELOG_LOG_LEVEL: 'warn',
  })
  const { line } = await cli.waitForLine(/^bootstrap servers: /, 30_000)
  const { line: propertiesLine } = await cli.waitForLine(/client properties \(also in /, 30_000)
  const file = /also in (.*)\):$/.exec(propertiesLine)![1]
  const text = await readFile(file, 'utf8')
  assert.match(text, /^security\.protocol=SASL_SSL$/m)
  assert.match(text, /^sasl\.mechanism=SCRAM-SHA-512$/m)
  const librdkafka = [
    'security.protocol=SASL_SSL',
    ...[
      ...text.matchAll(/^# (sasl\.mechanisms|sasl\.username|sasl\.password|ssl\.ca\.location)=(.*)$/gm),
    ].map((m) => `${m[1]}=${m[2]}`),
  ]
  assert.equal(librdkafka.length, 5, text)
  return { cli, bootstrap: line.replace(/^bootstrap servers: /, '').trim(), librdkafka }
}

async function stop(cli: ChildOutput): Promise<void> {
  cli.signal('SIGTERM')
  const { code } = await cli.exited
  assert.equal(code, 0, cli.tail())
}

test('tidelog start --secure: SASL_SSL SCRAM-SHA-512 with printed client properties that kcat uses as they are', {
  timeout: 90_000,
}, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-secure-'))
  try {
    let { cli, bootstrap, librdkafka } = await start(dataDir)
    const kcat = (args: string[], input?: string) => {
      const child = execFile('kcat', ['-b', bootstrap, ...librdkafka.flatMap((p) => ['-X', p]), ...args], {
        timeout: 30_000,
      })
      if (input !== undefined) child.stdin!.end(input)
      let stdout = ''
      child.stdout!.on('data', (chunk) => {
        stdout += chunk
      })
      return new Promise<string>((resolve, reject) =>
        child.on('exit', (code) =>
          code === 0 ? resolve(stdout) : reject(new Error(`kcat ${args.join(' ')} exited ${code}`)),
        ),
      )
    }
    await kcat(['-P', '-t', 'secure-topic'], 's1\ns2\n')
    assert.deepEqual(
      (await kcat(['-C', '-t', 'secure-topic', '-o', 'beginning', '-e', '-q'])).trim().split('\n'),
      ['s1', 's2'],
    )
    await assert.rejects(
      run('kcat', ['-b', bootstrap, '-L', '-m', '3'], { timeout: 20_000 }),
      'plaintext is refused',
    )
    // The schema registry is HTTPS with the same certificate and asks for the same user.
    const { line: registryLine } = await cli.waitForLine(/schema registry: /, 30_000)
    const registry = /(https:\/\/\S+)/.exec(registryLine)?.[1]
    assert.ok(registry, registryLine)
    const setting = (name: string) => librdkafka.find((p) => p.startsWith(`${name}=`))!.slice(name.length + 1)
    const curl = (...args: string[]) =>
      run(
        'curl',
        ['-s', '-o', '/dev/null', '-w', '%{http_code}', '--cacert', setting('ssl.ca.location'), ...args],
        {
          timeout: 20_000,
        },
      )
    assert.equal((await curl(`${registry}/subjects`)).stdout, '401')
    const user = `${setting('sasl.username')}:${setting('sasl.password')}`
    assert.equal((await curl('-u', user, `${registry}/subjects`)).stdout, '200')
    // A registration: the registry's own client writes `_schemas` over SASL_SSL.
    const registered = await curl(
      '-u',
      user,
      '-H',
      'Content-Type: application/vnd.schemaregistry.v1+json',
      '-d',
      JSON.stringify({ schema: '"string"' }),
      `${registry}/subjects/secure-topic-value/versions`,
    )
    assert.equal(registered.stdout, '200')
    // `tidelog schemas` with the same user and CA.
    const listed = await run(process.execPath, [
      tidelogBin(),
      'schemas',
      'list',
      '--json',
      '--registry',
      registry,
      '--user',
      user,
      '--ca',
      setting('ssl.ca.location'),
    ])
    assert.deepEqual(
      (JSON.parse(listed.stdout) as { subject: string }[]).map((r) => r.subject),
      ['secure-topic-value'],
    )
    const firstPassword = librdkafka.find((p) => p.startsWith('sasl.password='))
    await stop(cli)
    ;({ cli, bootstrap, librdkafka } = await start(dataDir))
    assert.equal(
      librdkafka.find((p) => p.startsWith('sasl.password=')),
      firstPassword,
      'the password survives a restart',
    )
    assert.deepEqual(
      (await kcat(['-C', '-t', 'secure-topic', '-o', 'beginning', '-e', '-q'])).trim().split('\n'),
      ['s1', 's2'],
    )
    await stop(cli)
  } finally {
    await rm(dataDir, { recursive: true, force: true })
  }
})

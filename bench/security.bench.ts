/**
 * Security benchmark (issue 16): produce throughput through one broker over PLAINTEXT, SSL
 * and SASL_SSL (SCRAM-SHA-512) in one run, each with kcat (librdkafka) sending the same
 * file of 1 KiB records, acks=1; then TLS handshakes per second against the SSL listener
 * (8 concurrent node:tls clients, full handshakes, no session resumption).
 *
 *   node dist/bench/security.bench.js [--records N] [--seconds S]
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { connect } from 'node:tls'
import { parseArgs, promisify } from 'node:util'
import { startBroker } from '../src/index.js'
import { credentialFromSaltedPassword, saltedPassword } from '../src/security/scram.js'
import { makeTestCerts } from '../test/helpers/certs.js'

const { values } = parseArgs({
  options: { records: { type: 'string', default: '200000' }, seconds: { type: 'string', default: '5' } },
})
const records = Number(values.records)
const handshakeSeconds = Number(values.seconds)
const run = promisify(execFile)

const certs = await makeTestCerts()
const cluster = await startBroker({
  port: 0,
  properties: {
    listeners: 'PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0',
    'ssl.keystore.type': 'PEM',
    'ssl.keystore.location': certs.brokerKeystore,
    'sasl.enabled.mechanisms': 'SCRAM-SHA-512',
    'log.flush.interval.messages': '9223372036854775807',
  },
})
const broker = cluster.brokers[0]
const salt = randomBytes(16)
await broker.scramCredentials.alter([
  {
    type: 'upsert',
    user: 'bench',
    mechanism: 'SCRAM-SHA-512',
    credential: credentialFromSaltedPassword(
      'SCRAM-SHA-512',
      saltedPassword('SCRAM-SHA-512', 'bench', salt, 4096),
      salt,
      4096,
    ),
  },
])
const file = join(certs.dir, 'records.txt')
const line = `${'x'.repeat(1023)}\n`
writeFileSync(file, line.repeat(records))

const modes: [string, string, string[]][] = [
  ['PLAINTEXT', 'PLAINTEXT', []],
  ['SSL', 'SSL', ['-X', 'security.protocol=SSL', '-X', `ssl.ca.location=${certs.caFile}`]],
  [
    'SASL_SSL SCRAM-SHA-512',
    'SASL_SSL',
    [
      '-X',
      'security.protocol=SASL_SSL',
      '-X',
      `ssl.ca.location=${certs.caFile}`,
      '-X',
      'sasl.mechanisms=SCRAM-SHA-512',
      '-X',
      'sasl.username=bench',
      '-X',
      'sasl.password=bench',
    ],
  ],
]
const results: Record<string, number> = {}
try {
  for (const [name, listener, security] of modes) {
    const topic = `bench-${listener.toLowerCase()}`
    const started = performance.now()
    await run(
      'kcat',
      [
        '-b',
        broker.listenerAddress(listener),
        ...security,
        '-P',
        '-t',
        topic,
        '-X',
        'acks=1',
        '-X',
        'linger.ms=5',
        '-l',
        file,
      ],
      {
        maxBuffer: 1 << 20,
        timeout: 60_000,
      },
    )
    const seconds = (performance.now() - started) / 1000
    results[name] = records / seconds
    console.log(
      `produce over ${name}: ${(records / seconds).toFixed(0)} records/s, ${((records * 1024) / seconds / 1e6).toFixed(1)} MB/s (${seconds.toFixed(2)} s)`,
    )
  }
  for (const name of ['SSL', 'SASL_SSL SCRAM-SHA-512'])
    console.log(
      `${name} / PLAINTEXT: ${((100 * results[name]) / results.PLAINTEXT).toFixed(0)}% (goal >= 70%)`,
    )
  const [host, port] = broker.listenerAddress('SSL').split(':')
  const deadline = performance.now() + handshakeSeconds * 1000
  let handshakes = 0
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      await new Promise<void>((resolve, reject) => {
        const socket = connect({ host, port: Number(port), ca: [certs.caPem] }, () => {
          handshakes++
          socket.destroy()
          resolve()
        })
        socket.once('error', reject)
      })
    }
  }
  await Promise.all(Array.from({ length: 8 }, worker))
  console.log(
    `TLS handshakes: ${(handshakes / handshakeSeconds).toFixed(0)}/s (8 concurrent clients, ${handshakeSeconds} s)`,
  )
} finally {
  await cluster.stop()
  await certs.cleanup()
}

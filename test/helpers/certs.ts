/**
 * A throwaway CA, a broker certificate for 127.0.0.1/localhost and a client certificate,
 * made with the openssl command in a temporary directory (removed by `cleanup`).
 */
import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

export interface TestCerts {
  readonly dir: string
  readonly caPem: string
  /** The broker's key and chain in one PEM file (ssl.keystore.location with ssl.keystore.type=PEM). */
  readonly brokerKeystore: string
  readonly brokerKeyPem: string
  readonly brokerCertPem: string
  readonly caFile: string
  readonly clientKeyPem: string
  readonly clientCertPem: string
  readonly clientKeyFile: string
  readonly clientCertFile: string
  /** A client certificate from a CA the broker does not trust. */
  readonly strangerKeyPem: string
  readonly strangerCertPem: string
  cleanup(): Promise<void>
}

async function openssl(dir: string, ...args: string[]): Promise<void> {
  await run('openssl', args, { cwd: dir })
}

async function signed(
  dir: string,
  name: string,
  subject: string,
  ca: string,
  extensions: string,
): Promise<void> {
  await openssl(
    dir,
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-subj',
    subject,
    '-out',
    `${name}.csr`,
  )
  await writeFile(join(dir, `${name}.ext`), extensions)
  await openssl(
    dir,
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.crt`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.crt`,
  )
}

export async function makeTestCerts(): Promise<TestCerts> {
  const dir = await mkdtemp(join(tmpdir(), 'tidelog-certs-'))
  for (const ca of ['ca', 'other-ca'])
    await openssl(
      dir,
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      `${ca}.key`,
      '-out',
      `${ca}.crt`,
      '-days',
      '2',
      '-subj',
      `/CN=tidelog test ${ca}`,
    )
  await signed(dir, 'broker', '/CN=localhost', 'ca', 'subjectAltName=IP:127.0.0.1,DNS:localhost\n')
  await signed(dir, 'client', '/C=NO/O=Tide Org/OU=Ops/CN=alice', 'ca', 'extendedKeyUsage=clientAuth\n')
  await signed(dir, 'stranger', '/CN=mallory', 'other-ca', 'extendedKeyUsage=clientAuth\n')
  const text = (name: string): Promise<string> => readFile(join(dir, name), 'utf8')
  const brokerKeyPem = await text('broker.key')
  const brokerCertPem = await text('broker.crt')
  const caPem = await text('ca.crt')
  const brokerKeystore = join(dir, 'broker-keystore.pem')
  await writeFile(brokerKeystore, `${brokerKeyPem}\n${brokerCertPem}\n${caPem}`)
  return {
    dir,
    caPem,
    brokerKeystore,
    brokerKeyPem,
    brokerCertPem,
    caFile: join(dir, 'ca.crt'),
    clientKeyPem: await text('client.key'),
    clientCertPem: await text('client.crt'),
    clientKeyFile: join(dir, 'client.key'),
    clientCertFile: join(dir, 'client.crt'),
    strangerKeyPem: await text('stranger.key'),
    strangerCertPem: await text('stranger.crt'),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  }
}

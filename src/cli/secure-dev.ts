/**
 * `tidelog start --secure`: a development setup of SASL_SSL with SCRAM-SHA-512. Makes (once,
 * kept in `<data-dir>/secure/` so clients keep trusting it across restarts) a CA and a broker
 * certificate for the listener host, 127.0.0.1 and localhost with the openssl command, a
 * user `tidelog` with a random password, and the client properties to use. For development
 * only: the CA key sits beside the data and the password in a file (mode 0600).
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { access, chmod, mkdir, readFile, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { TidelogError } from '../common/errors.js'
import { credentialFromSaltedPassword, saltedPassword } from '../security/scram.js'
import type { Cluster } from '../server/cluster.js'

const run = promisify(execFile)

export const SECURE_USER = 'tidelog'
const SCRAM_ITERATIONS = 8192

export interface DevSecurity {
  readonly dir: string
  readonly caFile: string
  readonly password: string
  /** Broker properties: one SASL_SSL listener, SCRAM-SHA-512 (and PLAIN between brokers). */
  brokerProperties(host: string, port: number): Map<string, string>
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path)
    return true
  } catch {
    return false
  }
}

async function openssl(dir: string, args: string[]): Promise<void> {
  try {
    await run('openssl', args, { cwd: dir })
  } catch (error) {
    throw new TidelogError(
      'ERR_SECURE_SETUP',
      `--secure needs the openssl command: openssl ${args[0]} failed`,
      {
        cause: error,
      },
    )
  }
}

export async function devSecurity(dataDir: string, host: string): Promise<DevSecurity> {
  const dir = resolve(dataDir, 'secure')
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const caFile = join(dir, 'ca.pem')
  const keystore = join(dir, 'broker-keystore.pem')
  const passwordFile = join(dir, 'password')
  if (!(await exists(join(dir, 'ca.key'))))
    await openssl(dir, [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
      '-days',
      '825',
      '-subj',
      '/CN=tidelog development CA',
    ])
  if (!(await exists(keystore))) {
    const names = new Set([
      'IP:127.0.0.1',
      'DNS:localhost',
      /^[\d.]+$/.test(host) ? `IP:${host}` : `DNS:${host}`,
    ])
    await writeFile(join(dir, 'broker.ext'), `subjectAltName=${[...names].join(',')}\n`)
    await openssl(dir, [
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'broker.key',
      '-subj',
      `/CN=${host}`,
      '-out',
      'broker.csr',
    ])
    await openssl(dir, [
      'x509',
      '-req',
      '-in',
      'broker.csr',
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '825',
      '-extfile',
      'broker.ext',
      '-out',
      'broker.crt',
    ])
    const pem = `${await readFile(join(dir, 'broker.key'), 'utf8')}${await readFile(join(dir, 'broker.crt'), 'utf8')}`
    await writeFile(keystore, pem, { mode: 0o600 })
  }
  if (!(await exists(passwordFile)))
    await writeFile(passwordFile, randomBytes(18).toString('base64url'), { mode: 0o600 })
  await chmod(passwordFile, 0o600)
  const password = (await readFile(passwordFile, 'utf8')).trim()
  const jaas = `org.apache.kafka.common.security.plain.PlainLoginModule required username="${SECURE_USER}" password="${password}" user_${SECURE_USER}="${password}";`
  return {
    dir,
    caFile,
    password,
    brokerProperties: (listenerHost, port) =>
      new Map([
        [
          'listeners',
          `SASL_SSL://${listenerHost.includes(':') ? `[${listenerHost}]` : listenerHost}:${port}`,
        ],
        ['security.inter.broker.protocol', 'SASL_SSL'],
        ['sasl.enabled.mechanisms', 'SCRAM-SHA-512,SCRAM-SHA-256,PLAIN'],
        ['sasl.mechanism.inter.broker.protocol', 'PLAIN'],
        ['listener.name.sasl_ssl.plain.sasl.jaas.config', jaas],
        // The brokers dial each other as this user: with authorizer.class.name set it must be
        // allowed the inter-broker requests (CLUSTER_ACTION), and it administers the ACLs.
        ['super.users', `User:${SECURE_USER}`],
        ['ssl.keystore.type', 'PEM'],
        ['ssl.keystore.location', keystore],
        ['ssl.truststore.type', 'PEM'],
        ['ssl.truststore.location', caFile],
      ]),
  }
}

/** Gives the `tidelog` user SCRAM-SHA-512 and SCRAM-SHA-256 credentials, through the first broker. */
export async function addDevUser(cluster: Cluster, security: DevSecurity): Promise<void> {
  const store = cluster.brokers[0].scramCredentials
  await store.alter(
    (['SCRAM-SHA-512', 'SCRAM-SHA-256'] as const).map((mechanism) => {
      const salt = randomBytes(16)
      return {
        type: 'upsert' as const,
        user: SECURE_USER,
        mechanism,
        credential: credentialFromSaltedPassword(
          mechanism,
          saltedPassword(mechanism, security.password, salt, SCRAM_ITERATIONS),
          salt,
          SCRAM_ITERATIONS,
        ),
      }
    }),
  )
}

/** The client properties, in Java client and librdkafka forms; written to `<dir>/client.properties`. */
export async function writeClientProperties(security: DevSecurity): Promise<{ file: string; text: string }> {
  const text = [
    '# Java clients (kafka-console-producer --producer.config, --command-config)',
    'security.protocol=SASL_SSL',
    'sasl.mechanism=SCRAM-SHA-512',
    `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="${SECURE_USER}" password="${security.password}";`,
    'ssl.truststore.type=PEM',
    `ssl.truststore.location=${security.caFile}`,
    '# librdkafka (kcat -F, confluent-kafka): security.protocol as above, and',
    '# sasl.mechanisms=SCRAM-SHA-512',
    `# sasl.username=${SECURE_USER}`,
    `# sasl.password=${security.password}`,
    `# ssl.ca.location=${security.caFile}`,
    '',
  ].join('\n')
  const file = join(security.dir, 'client.properties')
  await writeFile(file, text, { mode: 0o600 })
  return { file, text }
}

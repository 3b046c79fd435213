/**
 * The Java programs of the conformance suite (test/compat/java/*.java), compiled with javac
 * against one folder of the cached Kafka 4.4 jars (clients/, streams/, connect/, and mirror/
 * with MirrorMaker 2 4.3.1: see scripts/kafka-reference.sh) into .build/java-<Name>, and run
 * with a small heap.
 */
import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { repoRoot } from './compat-clients.js'
import { installKafkaReference } from './kafka-reference.js'

/** Flags of every JVM the suite starts: the machine has 2 shared cores. */
export const JVM_FLAGS: readonly string[] = [
  '-Xmx384m',
  '-XX:TieredStopAtLevel=1',
  '-XX:+UseSerialGC',
  '-Dorg.slf4j.simpleLogger.defaultLogLevel=warn',
]

export function exec(
  command: string,
  args: readonly string[],
  timeoutMs: number,
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      [...args],
      { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${command} failed: ${error.message}\n${String(stderr).slice(-4000)}`))
        else resolve({ stdout: String(stdout), stderr: String(stderr) })
      },
    )
  })
}

/** The folders of cached Kafka jars a program is compiled against (scripts/kafka-reference.sh; server/ is the broker's). */
export type JarSet = 'clients' | 'streams' | 'connect' | 'mirror' | 'server'

/**
 * The programs of test/compat/java with the jars each is compiled against, for
 * scripts/test.sh to compile them all (`compileAllJava`) while it lints, on the core the
 * single-threaded linters leave idle, instead of one by one inside the tests. A program not
 * listed here is compiled by its test, as any is when its class is stale.
 */
export const JAVA_PROGRAMS: Readonly<Record<string, JarSet>> = {
  Conformance: 'clients',
  DelegationTokens: 'clients',
  GroupConfigs: 'clients',
  LogDirInterop: 'clients',
  ShareGroupOffsets: 'clients',
  ShareGroups: 'clients',
  Telemetry: 'clients',
  StreamsWordCount: 'streams',
  ConnectCheck: 'connect',
  MirrorCheck: 'mirror',
  GroupRecords: 'server',
}

/**
 * Compiles test/compat/java/<name>.java against the jars of `jars` (fetched first if need
 * be) unless its class is newer than the source; returns the classpath to run it with.
 */
export async function compileJava(name: string, jars: JarSet): Promise<string> {
  const listed = JAVA_PROGRAMS[name]
  if (listed !== undefined && listed !== jars) {
    throw new Error(`${name} is compiled against ${jars} here, against ${listed} in JAVA_PROGRAMS (java.ts)`)
  }
  const cache = await installKafkaReference()
  const classes = join(repoRoot(), '.build', `java-${name}`)
  const source = join(repoRoot(), 'test', 'compat', 'java', `${name}.java`)
  const classpath = `${classes}:${join(cache, jars, '*')}`
  const compiled = join(classes, `${name}.class`)
  if (existsSync(compiled) && statSync(compiled).mtimeMs > statSync(source).mtimeMs) return classpath
  mkdirSync(classes, { recursive: true })
  await exec(
    'javac',
    ['--release', '17', '-Xlint:-options', '-d', classes, '-cp', classpath, source],
    180_000,
  )
  return classpath
}

/** Compiles every program of JAVA_PROGRAMS that is not compiled already, one after another. */
export async function compileAllJava(): Promise<void> {
  for (const [name, jars] of Object.entries(JAVA_PROGRAMS)) await compileJava(name, jars)
}

export interface CheckOutcome {
  readonly pass: boolean
  readonly ms: number
  readonly reason: string
}

/** Parses `CHECK <name> PASS|FAIL <ms> [reason]` lines; fails unless `DONE` was printed. */
export function parseChecks(stdout: string, stderr: string): Map<string, CheckOutcome> {
  const outcomes = new Map<string, CheckOutcome>()
  for (const line of stdout.split('\n')) {
    const m = /^CHECK (\S+) (PASS|FAIL) (\d+) ?(.*)$/.exec(line)
    if (m) outcomes.set(m[1], { pass: m[2] === 'PASS', ms: Number(m[3]), reason: m[4] })
  }
  if (!/^DONE \d+ \d+$/m.test(stdout)) {
    throw new Error(`the checks did not finish:\n${stdout}\n${stderr.slice(-4000)}`)
  }
  return outcomes
}

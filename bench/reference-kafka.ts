/**
 * Apache Kafka 4.4 as the benches run it beside tidelog (bench:report, bench:scale): Kafka's
 * own JVM settings, whether it can run here, and its nodes' process ids.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { installKafkaReference, type KafkaReference } from '../test/helpers/kafka-reference.js'

/** Kafka's own JVM settings (bin/kafka-server-start.sh and kafka-run-class.sh), not the tests' small ones. */
export const KAFKA_JVM = {
  KAFKA_HEAP_OPTS: '-Xmx1G -Xms1G',
  KAFKA_JVM_PERFORMANCE_OPTS:
    '-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 ' +
    '-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true',
}

/** Whether `command` is on the PATH. */
export function have(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/** Apache Kafka 4.4 installed (jars fetched once), or why it is left out. */
export async function kafkaAvailable(noKafka: boolean): Promise<{ ok: true } | { missing: string }> {
  if (noKafka) return { missing: '--no-kafka was given' }
  if (!have('java') || !have('mvn'))
    return { missing: 'Java 17 and Maven are needed (Debian: openjdk-17-jdk-headless, maven)' }
  try {
    await installKafkaReference()
    return { ok: true }
  } catch (error) {
    return { missing: `scripts/kafka-reference.sh install failed: ${String(error).split('\n')[0]}` }
  }
}

/** The pids of `nodes` (1-based node ids) that are running now. */
export const kafkaNodePids = (kafka: KafkaReference, nodes: readonly number[]): number[] =>
  nodes.flatMap((n) => {
    try {
      const pid = Number(readFileSync(join(kafka.dir, `node-${n}`, 'pid'), 'utf8').trim())
      return existsSync(`/proc/${pid}`) ? [pid] : []
    } catch {
      return []
    }
  })

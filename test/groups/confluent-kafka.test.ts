/**
 * confluent-kafka (librdkafka 2.0.2) consumer groups: three members share six partitions,
 * a member that exits without leaving is expired after its session timeout and its
 * partitions consumed by the others, and a new member resumes from committed offsets.
 */
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { test } from 'node:test'
import { withBroker } from '../helpers/cluster.js'
import { repoRoot } from '../helpers/compat-clients.js'
import { createTopic } from '../helpers/topics.js'
import { FAST_GROUP_PROPERTIES, produce, waitFor } from './helpers.js'

const PYTHON = '/usr/bin/python3'
const SCRIPT = join(repoRoot(), 'test', 'groups', 'python', 'group_member.py')

interface PyMember {
  assignment: number[]
  readonly values: string[]
  readonly errors: string[]
  readonly exited: Promise<number | null>
  /** Ends the member now (by its ending) rather than at the end of its seconds. */
  readonly end: () => void
}

function member(
  bootstrap: string,
  group: string,
  topic: string,
  seconds: number,
  ending: 'close' | 'kill',
): PyMember {
  const child = spawn(PYTHON, [SCRIPT, bootstrap, group, topic, String(seconds), ending, 'stdin'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const m: PyMember = {
    assignment: [],
    values: [],
    errors: [],
    exited: new Promise((resolve) => child.on('exit', (code) => resolve(code))),
    end: () => child.stdin!.end(),
  }
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const event = JSON.parse(line) as { assignment?: number[]; value?: string; error?: string }
    if (process.env.GROUPS_DEBUG) console.log(line)
    if (event.assignment) m.assignment = event.assignment
    if (event.value !== undefined) m.values.push(event.value)
    if (event.error) m.errors.push(event.error)
  })
  return m
}

test('confluent-kafka: 3 members get 2 partitions each; a member gone without leaving is rebalanced away; offsets resume', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopic(cluster, 'py-topic', { partitions: 6 })
      const first = await produce(bootstrap, 'py-topic', 6, 4, 'first')
      const quitter = member(bootstrap, 'pyg', 'py-topic', 15, 'kill')
      const stayers = [
        member(bootstrap, 'pyg', 'py-topic', 28, 'close'),
        member(bootstrap, 'pyg', 'py-topic', 28, 'close'),
      ]
      const all = [quitter, ...stayers]
      await waitFor('2 partitions each', 30000, () => all.every((m) => m.assignment.length === 2))
      await waitFor(
        'first consumed',
        30000,
        () => new Set(all.flatMap((m) => m.values)).size === first.length,
      )
      quitter.end()
      await quitter.exited
      await waitFor(
        'stayers own all 6',
        30000,
        () =>
          stayers
            .flatMap((m) => m.assignment)
            .sort()
            .join() === '0,1,2,3,4,5',
      )
      const second = await produce(bootstrap, 'py-topic', 6, 2, 'second')
      await waitFor('second consumed', 30000, () =>
        second.every((v) => stayers.some((m) => m.values.includes(v))),
      )
      for (const m of stayers) m.end()
      for (const m of stayers) await m.exited
      // A new member of the group starts from the committed offsets: only new records.
      const third = await produce(bootstrap, 'py-topic', 6, 1, 'third')
      const late = member(bootstrap, 'pyg', 'py-topic', 10, 'close')
      await waitFor('third consumed', 30000, () => third.every((v) => late.values.includes(v)))
      late.end()
      await late.exited
      const replayed = late.values.filter((v) => !v.startsWith('third'))
      if (replayed.length > 0) throw new Error(`records consumed again after commit: ${replayed.join(',')}`)
    },
    { port: 0, properties: FAST_GROUP_PROPERTIES },
  )
})

/**
 * The faults inside a broker process that the network cannot make: a power loss (the
 * broker dies and every file loses what it wrote since its last fsync), its wall clock
 * jumped forward or back, its disk slowed or full. Each broker runs with the test-only
 * hook of src/testing/process-faults.ts on (TIDELOG_TEST_FAULT_CONTROL names its control
 * file): a command is written there, SIGUSR2 sent, and the broker's `test fault <seq>
 * applied` log line awaited.
 */
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ProcessFaultCommand } from '../../src/testing/process-faults.js'
import type { BrokerProcess } from '../helpers/broker-process.js'

type Command = ProcessFaultCommand extends infer C
  ? C extends { seq: number }
    ? Omit<C, 'seq'>
    : never
  : never

/** How long a running broker may take to log that it applied a command (a loaded machine). */
const APPLY_TIMEOUT_MS = 20000
/** How long the output of a process that killed itself may trail its exit. */
const EXIT_OUTPUT_WAIT_MS = 3000

export class BrokerFaultControl {
  private seq = 0

  constructor(private readonly root: string) {}

  /** The control file of broker `nodeId`, passed to its process in the environment. */
  controlPath(nodeId: number): string {
    return join(this.root, `broker-${nodeId}.fault-control.json`)
  }

  /**
   * Sends `command` to a running broker and waits until it says it applied it; false when
   * the process was not running (a broker whose full disk stopped it), or died first.
   */
  async send(broker: BrokerProcess, command: Command): Promise<boolean> {
    if (!broker.isRunning) return false
    const seq = ++this.seq
    const output = broker.current
    const from = output.lines.length
    await writeFile(this.controlPath(broker.nodeId), JSON.stringify({ ...command, seq }))
    output.signal('SIGUSR2')
    const applied = new RegExp(`test fault ${seq} applied`)
    if (command.op === 'power-loss') {
      // It logs, then SIGKILLs itself: the pipe's last lines may be read after the exit is seen.
      await output.exited
      const seen = () => output.lines.slice(from).some((line) => applied.test(line))
      for (let waitedMs = 0; !seen() && waitedMs < EXIT_OUTPUT_WAIT_MS; waitedMs += 50) await sleep(50)
      return seen()
    }
    try {
      await output.waitForLine(applied, APPLY_TIMEOUT_MS, from)
      return true
    } catch (error) {
      if (!broker.isRunning) return false
      throw error
    }
  }
}

/**
 * Partitions whose ISR (in the metadata store) is `nodeId` alone: a power loss of that
 * broker could take acknowledged records with it, since no other replica is known to hold
 * them. Kafka loses them too (its writes are not fsynced before the ack; KIP-966 is about
 * that case), so the suite makes such a power loss a kill -9 instead, as the simulator does
 * (src/sim/world-faults.ts).
 */
export function soleIsrOf(nodeId: number, partitions: readonly ({ isr: number[] } | undefined)[]): number[] {
  const sole: number[] = []
  for (const [index, partition] of partitions.entries())
    if (partition && partition.isr.length === 1 && partition.isr[0] === nodeId) sole.push(index)
  return sole
}

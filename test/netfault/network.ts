/**
 * A private network of Linux network namespaces for the netfault suite: a "switch"
 * namespace holds a bridge; every broker, etcd and (through one veth) the host hang off it
 * on 10.231.0.0/24, an address range that exists only on links made here.
 *
 *   host (clients, the harness)  tlnf-h0  10.231.0.1  <-> vh   ┐
 *   tlnf-etcd                    eth0     10.231.0.2  <-> ve   ├ br0 in tlnf-sw
 *   tlnf-b<N>                    eth0     10.231.0.<10+N> <-> vb<N> ┘
 *
 * Faults act on real packets:
 * - partitions and random loss are iptables DROP rules in the switch's FORWARD chain (the
 *   bridge hands its frames to iptables): the network drops, the hosts see nothing;
 * - bandwidth is a `tbf` qdisc on both ends of a broker's link;
 * - latency: the kernel's `netem` qdisc when it exists, else relay.py, which the switch puts
 *   between a broker's port and the bridge (its established connections keep running).
 *
 * Offloads are off on every link (relay.py offload): frames the relay copies must carry
 * finished checksums and fit the MTU, and loss and bandwidth then act on MTU-sized packets.
 *
 * Every name starts with `tlnf-` (or lives inside a tlnf- namespace): `cleanupSync()`
 * removes them, kills what still runs inside, and is run before a start (leftovers of a
 * crashed run) and on exit.
 */
import { execFile, execFileSync, spawn } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { ChildOutput } from '../helpers/broker-process.js'
import { PYTHON, repoRoot } from '../helpers/compat-clients.js'

const run = promisify(execFile)

export const NS_PREFIX = 'tlnf-'
const SWITCH_NS = 'tlnf-sw'
const ETCD_NS = 'tlnf-etcd'
const HOST_LINK = 'tlnf-h0'
const SUBNET = '10.231.0'
export const HOST_ADDRESS = `${SUBNET}.1`
export const ETCD_ADDRESS = `${SUBNET}.2`
const COMMAND_TIMEOUT_MS = 10000

export function brokerNamespace(nodeId: number): string {
  return `${NS_PREFIX}b${nodeId}`
}

export function brokerAddress(nodeId: number): string {
  return `${SUBNET}.${10 + nodeId}`
}

/** Prefix that runs a command inside a namespace (`ip netns exec` execs it: same pid). */
export function inNamespace(ns: string): string[] {
  return ['ip', 'netns', 'exec', ns]
}

export const ETCD_COMMAND = inNamespace(ETCD_NS)

function relayScript(): string {
  return join(repoRoot(), 'test', 'netfault', 'relay.py')
}

async function sh(command: string, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(command, args, { timeout: COMMAND_TIMEOUT_MS })
    return stdout
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? ''
    throw new Error(`${command} ${args.join(' ')} failed: ${stderr.trim() || (error as Error).message}`)
  }
}

function ip(...args: string[]): Promise<string> {
  return sh('ip', ...args)
}

function inNs(ns: string, command: string, ...args: string[]): Promise<string> {
  return sh('ip', 'netns', 'exec', ns, command, ...args)
}

function trySync(command: string, args: readonly string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
  } catch {
    // Cleanup of something already gone (or never made): nothing to undo.
    return ''
  }
}

/** Our namespaces that exist now (`ip netns list` prints "name (id: N)"). */
function ourNamespaces(): string[] {
  return trySync('ip', ['netns', 'list'])
    .split('\n')
    .map((line) => line.split(' ')[0])
    .filter((name) => name.startsWith(NS_PREFIX))
}

/** Holds the pid of the run that owns the tlnf- names (they are fixed: one run at a time). */
const LOCK_FILE = join(tmpdir(), 'tidelog-netfault.pid')

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: it exists but is not ours to signal; ESRCH: gone.
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** The pid of another live run owning the network, or null. */
function otherOwner(): number | null {
  let pid: number
  try {
    pid = Number(readFileSync(LOCK_FILE, 'utf8').trim())
  } catch {
    // No lock file: nobody owns the network.
    return null
  }
  return Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid) ? pid : null
}

/** Takes the network over: refuses while another run lives, removes a dead run's leftovers. */
function acquireNetwork(): void {
  const owner = otherOwner()
  if (owner !== null)
    throw new Error(
      `another netfault run (pid ${owner}) owns the ${NS_PREFIX} namespaces: wait for it to end (or, if that pid is not a netfault run, remove ${LOCK_FILE})`,
    )
  cleanupSync()
  writeFileSync(LOCK_FILE, String(process.pid))
}

/**
 * Removes every tlnf- namespace, what runs inside them (by pid: processes a run of this
 * suite started) and the host's end of the link, unless another live run owns them.
 * Synchronous so an exit handler can run it.
 */
export function cleanupSync(): void {
  if (otherOwner() !== null) return
  for (const ns of ourNamespaces()) {
    const pids = trySync('ip', ['netns', 'pids', ns]).split('\n').filter(Boolean)
    for (const pid of pids) {
      try {
        process.kill(Number(pid), 'SIGKILL')
      } catch {
        // Exited between the listing and the kill.
      }
    }
    trySync('ip', ['netns', 'del', ns])
  }
  // The namespaces go away asynchronously and take their veths along; the host's end of the
  // switch link is ours to remove now, so a new run can make it again at once.
  trySync('ip', ['link', 'del', HOST_LINK])
  rmSync(LOCK_FILE, { force: true })
}

/**
 * Why this machine cannot run the suite (not root, no iproute2 or iptables, no namespaces,
 * no bridge netfilter), or null when it can.
 */
export async function namespaceSupport(): Promise<string | null> {
  if (process.platform !== 'linux') return `network namespaces need Linux (this is ${process.platform})`
  if (typeof process.getuid === 'function' && process.getuid() !== 0)
    return 'network namespaces need root (uid 0)'
  const probe = `${NS_PREFIX}probe`
  try {
    trySync('ip', ['netns', 'del', probe])
    await ip('netns', 'add', probe)
    await inNs(probe, 'iptables', '-w', '-S')
    await inNs(probe, 'tc', 'qdisc', 'show')
    await inNs(probe, 'ip', 'link', 'add', 'br-probe', 'type', 'bridge')
    const bridged = await inNs(probe, 'sysctl', '-n', 'net.bridge.bridge-nf-call-iptables').catch(() => '')
    if (bridged.trim() === '')
      return 'bridge netfilter (br_netfilter) is missing: iptables cannot see bridged frames'
    return null
  } catch (error) {
    return (error as Error).message
  } finally {
    trySync('ip', ['netns', 'del', probe])
  }
}

/** True when this kernel has the netem qdisc (checked in a throwaway namespace). */
async function hasNetem(): Promise<boolean> {
  const probe = `${NS_PREFIX}netem`
  try {
    await ip('netns', 'add', probe)
    await inNs(probe, 'ip', 'link', 'set', 'lo', 'up')
    await inNs(probe, 'tc', 'qdisc', 'add', 'dev', 'lo', 'root', 'netem', 'delay', '1ms')
    return true
  } catch {
    // "Specified qdisc kind is unknown": no netem here, the relay delays instead.
    return false
  } finally {
    trySync('ip', ['netns', 'del', probe])
  }
}

/** A node of the network: a broker, etcd, or the clients (the host). */
export type Endpoint = { readonly broker: number } | 'etcd' | 'clients'

export function endpointAddress(endpoint: Endpoint): string {
  if (endpoint === 'etcd') return ETCD_ADDRESS
  if (endpoint === 'clients') return HOST_ADDRESS
  return brokerAddress(endpoint.broker)
}

export interface Delay {
  readonly delayMs: number
  readonly jitterMs: number
}

/** The namespaces, links and fault controls of one run. */
export class FaultNetwork {
  private readonly relays = new Map<number, ChildOutput>()
  private readonly shaped = new Set<number>()
  private readonly delayed = new Map<number, 'netem' | 'relay'>()

  private constructor(
    readonly brokers: readonly number[],
    /** Latency through netem (when the kernel has it) or through relay.py. */
    readonly latencyBy: 'netem' | 'relay',
  ) {}

  /** Builds the network (after removing leftovers of an earlier run). */
  static async create(brokers: readonly number[]): Promise<FaultNetwork> {
    acquireNetwork()
    const network = new FaultNetwork(brokers, (await hasNetem()) ? 'netem' : 'relay')
    try {
      await network.build()
      return network
    } catch (error) {
      cleanupSync()
      throw error
    }
  }

  private async build(): Promise<void> {
    const namespaces = [SWITCH_NS, ETCD_NS, ...this.brokers.map(brokerNamespace)]
    for (const ns of namespaces) {
      await ip('netns', 'add', ns)
      // No IPv6: no router solicitations or neighbour discovery noise on the links.
      await inNs(
        ns,
        'sysctl',
        '-qw',
        'net.ipv6.conf.all.disable_ipv6=1',
        'net.ipv6.conf.default.disable_ipv6=1',
      )
      await ip('-n', ns, 'link', 'set', 'lo', 'up')
    }
    await inNs(SWITCH_NS, 'sysctl', '-qw', 'net.bridge.bridge-nf-call-iptables=1')
    await ip('-n', SWITCH_NS, 'link', 'add', 'br0', 'type', 'bridge', 'forward_delay', '0')
    await ip('-n', SWITCH_NS, 'link', 'set', 'br0', 'up')
    const switchPorts: string[] = []

    const attach = async (ns: string, port: string, address: string) => {
      await ip('-n', SWITCH_NS, 'link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns)
      await ip('-n', SWITCH_NS, 'link', 'set', port, 'master', 'br0', 'up')
      await ip('-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0')
      await ip('-n', ns, 'link', 'set', 'eth0', 'up')
      await inNs(ns, PYTHON, relayScript(), 'offload', 'eth0')
      switchPorts.push(port)
    }
    await attach(ETCD_NS, 've', ETCD_ADDRESS)
    for (const nodeId of this.brokers) {
      await attach(brokerNamespace(nodeId), `vb${nodeId}`, brokerAddress(nodeId))
      if (this.latencyBy === 'relay') {
        // The spare link the relay forwards into: dl<N> stays off the bridge, dl<N>b is on it.
        await ip(
          '-n',
          SWITCH_NS,
          'link',
          'add',
          `dl${nodeId}`,
          'type',
          'veth',
          'peer',
          'name',
          `dl${nodeId}b`,
        )
        await ip('-n', SWITCH_NS, 'link', 'set', `dl${nodeId}b`, 'master', 'br0', 'up')
        await ip('-n', SWITCH_NS, 'link', 'set', `dl${nodeId}`, 'up')
        switchPorts.push(`dl${nodeId}`, `dl${nodeId}b`)
      }
    }
    await ip('link', 'add', HOST_LINK, 'type', 'veth', 'peer', 'name', 'vh', 'netns', SWITCH_NS)
    await ip('-n', SWITCH_NS, 'link', 'set', 'vh', 'master', 'br0', 'up')
    await ip('addr', 'add', `${HOST_ADDRESS}/24`, 'dev', HOST_LINK)
    await ip('link', 'set', HOST_LINK, 'up')
    await sh(PYTHON, relayScript(), 'offload', HOST_LINK)
    switchPorts.push('vh')
    await inNs(SWITCH_NS, PYTHON, relayScript(), 'offload', ...switchPorts)
  }

  /** Drops every packet from `from` to `to` (a one-way cut; call twice for two-way). */
  async drop(from: Endpoint, to: Endpoint): Promise<void> {
    await this.forward('-s', endpointAddress(from), '-d', endpointAddress(to), '-j', 'DROP')
  }

  /** Drops packets to and from a broker at random with probability `probability` each. */
  async loss(nodeId: number, probability: number): Promise<void> {
    const p = probability.toFixed(3)
    const address = brokerAddress(nodeId)
    for (const side of ['-s', '-d'])
      await this.forward(
        side,
        address,
        '-m',
        'statistic',
        '--mode',
        'random',
        '--probability',
        p,
        '-j',
        'DROP',
      )
  }

  private async forward(...rule: string[]): Promise<void> {
    await inNs(SWITCH_NS, 'iptables', '-w', '-A', 'FORWARD', ...rule)
  }

  /** Limits a broker's link to `rateKbit` in each direction (tbf on both ends). */
  async limitBandwidth(nodeId: number, rateKbit: number): Promise<void> {
    // A burst of at least one MTU packet (and ~10 ms at the rate); a queue of 300 ms, beyond
    // which tbf drops, as a saturated link does.
    const burstBytes = Math.max(3000, Math.round((rateKbit * 1000) / 8 / 100))
    const tbf = ['root', 'tbf', 'rate', `${rateKbit}kbit`, 'burst', `${burstBytes}`, 'latency', '300ms']
    this.shaped.add(nodeId)
    await inNs(brokerNamespace(nodeId), 'tc', 'qdisc', 'replace', 'dev', 'eth0', ...tbf)
    await inNs(SWITCH_NS, 'tc', 'qdisc', 'replace', 'dev', `vb${nodeId}`, ...tbf)
  }

  /** Delays every frame to and from a broker by `delayMs` (+ up to `jitterMs`) each way. */
  async addLatency(nodeId: number, delay: Delay, seed: number): Promise<void> {
    if (this.delayed.has(nodeId)) throw new Error(`broker ${nodeId} is already delayed`)
    if (this.latencyBy === 'netem') {
      const netem = ['root', 'netem', 'delay', `${delay.delayMs}ms`, `${delay.jitterMs}ms`]
      // netem and tbf both want the root: latency replaces a bandwidth limit on that link.
      this.shaped.delete(nodeId)
      await inNs(brokerNamespace(nodeId), 'tc', 'qdisc', 'replace', 'dev', 'eth0', ...netem)
      await inNs(SWITCH_NS, 'tc', 'qdisc', 'replace', 'dev', `vb${nodeId}`, ...netem)
      this.delayed.set(nodeId, 'netem')
      return
    }
    const relay = new ChildOutput(
      spawn(
        'ip',
        [
          ...inNamespace(SWITCH_NS).slice(1),
          PYTHON,
          relayScript(),
          'delay',
          `vb${nodeId}`,
          `dl${nodeId}`,
          String(delay.delayMs),
          String(delay.jitterMs),
          String(seed),
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      ),
    )
    this.relays.set(nodeId, relay)
    this.delayed.set(nodeId, 'relay')
    await relay.waitForLine(/^ready$/, COMMAND_TIMEOUT_MS)
    // Off the bridge, the broker's port reaches the bridge only through the relay; the
    // bridge learns the broker's MAC on dl<N>b from the first frame the relay forwards.
    await ip('-n', SWITCH_NS, 'link', 'set', `vb${nodeId}`, 'nomaster')
  }

  /** Removes every rule, limit and delay: all links as built. Returns what the relays forwarded. */
  async heal(): Promise<string[]> {
    const notes: string[] = []
    await inNs(SWITCH_NS, 'iptables', '-w', '-F', 'FORWARD')
    for (const nodeId of this.shaped) {
      await inNs(brokerNamespace(nodeId), 'tc', 'qdisc', 'del', 'dev', 'eth0', 'root').catch(() => '')
      await inNs(SWITCH_NS, 'tc', 'qdisc', 'del', 'dev', `vb${nodeId}`, 'root').catch(() => '')
    }
    this.shaped.clear()
    for (const [nodeId, kind] of this.delayed) {
      if (kind === 'netem') {
        await inNs(brokerNamespace(nodeId), 'tc', 'qdisc', 'del', 'dev', 'eth0', 'root').catch(() => '')
        await inNs(SWITCH_NS, 'tc', 'qdisc', 'del', 'dev', `vb${nodeId}`, 'root').catch(() => '')
        continue
      }
      await ip('-n', SWITCH_NS, 'link', 'set', `vb${nodeId}`, 'master', 'br0')
      // The relay delivers what it still holds (late, as the link was), then exits.
      const relay = this.relays.get(nodeId)!
      await relay.terminate(5000)
      this.relays.delete(nodeId)
      const forwarded = relay.lines.find((line) => line.startsWith('forwarded '))
      notes.push(`relay of broker ${nodeId}: ${forwarded ?? `no report (${relay.tail(3)})`}`)
    }
    this.delayed.clear()
    return notes
  }

  /** Counters of the switch's DROP rules (packets dropped by the faults active now). */
  async droppedPackets(): Promise<number> {
    const out = await inNs(SWITCH_NS, 'iptables', '-w', '-L', 'FORWARD', '-v', '-n', '-x')
    let total = 0
    for (const line of out.split('\n').slice(2)) {
      const packets = Number(line.trim().split(/\s+/)[0])
      if (Number.isFinite(packets)) total += packets
    }
    return total
  }

  /** Removes everything (also what a failure left half made). */
  close(): void {
    for (const relay of this.relays.values()) relay.signal('SIGKILL')
    this.relays.clear()
    cleanupSync()
  }
}

/**
 * Elle-style dependency cycles between committed transactions, as Jepsen's Kafka workload
 * draws them: T1 -ww-> T2 when T2's record follows T1's next in a partition's version
 * order, T1 -wr-> T2 when T2's last read of a partition is T1's record. Each cycle is
 * reported with the lines that justify each of its edges.
 *
 * Kafka does not isolate concurrent transactions' writes: an open transaction's records
 * interleave with others' in each partition, so a ww edge says which record came first, not
 * which transaction did. A cycle of ww edges only (G0) is therefore allowed, and so is a
 * cycle through a read that needs a ww edge to close: T2 writes p1, then reads T1's committed
 * record, while T1 had written p1 after T2 did; nothing a correct broker forbids. Only a
 * cycle of wr edges alone is G1c here (circular information flow: each transaction read
 * another's committed record, which no order of commits allows): Jepsen's Kafka workload
 * hunts those with `--no-ww-deps`, leaving write-write edges out of its graph.
 */
import type { AckEvent, ReadEvent, SendEvent } from './history.js'
import { lastReads, type Transaction, txnOf } from './transactions.js'
import type { VersionOrder } from './version-order.js'

export interface DependencyEdge {
  readonly from: Transaction
  readonly to: Transaction
  readonly kind: 'ww' | 'wr'
  /** ww: the two records, adjacent among transactional writes; wr: the record and the read. */
  readonly first: AckEvent | ReadEvent | SendEvent
  readonly second: AckEvent | ReadEvent
  readonly topic: string
  readonly partition: number
}

export interface DependencyCycle {
  readonly kind: 'G0' | 'G1c'
  /** from → to → ... back to the first edge's from. */
  readonly edges: readonly DependencyEdge[]
}

type Graph = Map<Transaction, DependencyEdge[]>

function addEdge(graph: Graph, edge: DependencyEdge): void {
  const out = graph.get(edge.from)
  if (!out) graph.set(edge.from, [edge])
  else if (!out.some((e) => e.to === edge.to && e.kind === edge.kind)) out.push(edge)
}

export function dependencyEdges(
  txns: ReadonlyMap<string, Transaction>,
  orders: ReadonlyMap<string, VersionOrder>,
  sendOfValue: (topic: string, value: string) => SendEvent | undefined,
): DependencyEdge[] {
  const committed = (topic: string, value: string): Transaction | undefined => {
    const send = sendOfValue(topic, value)
    const txn = send && txnOf(txns, send)
    return txn?.outcome === 'committed' ? txn : undefined
  }
  const edges: DependencyEdge[] = []
  for (const order of orders.values()) {
    let previous: { txn: Transaction; event: AckEvent | ReadEvent } | undefined
    for (const entry of order.entries) {
      const txn = committed(entry.event.topic, entry.value)
      if (!txn) continue
      if (previous && previous.txn !== txn)
        edges.push({
          from: previous.txn,
          to: txn,
          kind: 'ww',
          first: previous.event,
          second: entry.event,
          topic: entry.event.topic,
          partition: entry.event.partition,
        })
      previous = { txn, event: entry.event }
    }
  }
  for (const reader of txns.values()) {
    if (reader.outcome !== 'committed') continue
    for (const { read } of lastReads(reader, orders).values()) {
      const writer = committed(read.topic, read.value)
      if (writer && writer !== reader)
        edges.push({
          from: writer,
          to: reader,
          kind: 'wr',
          first: sendOfValue(read.topic, read.value)!,
          second: read,
          topic: read.topic,
          partition: read.partition,
        })
    }
  }
  return edges
}

/** Strongly connected components with more than one transaction (Tarjan, iterative). */
function components(graph: Graph): Set<Transaction>[] {
  const index = new Map<Transaction, number>()
  const low = new Map<Transaction, number>()
  const onStack = new Set<Transaction>()
  const stack: Transaction[] = []
  const found: Set<Transaction>[] = []
  let next = 0
  for (const root of graph.keys()) {
    if (index.has(root)) continue
    const work: { node: Transaction; edge: number }[] = [{ node: root, edge: 0 }]
    index.set(root, next)
    low.set(root, next++)
    stack.push(root)
    onStack.add(root)
    while (work.length > 0) {
      const frame = work[work.length - 1]
      const out = graph.get(frame.node) ?? []
      if (frame.edge < out.length) {
        const to = out[frame.edge++].to
        if (!index.has(to)) {
          index.set(to, next)
          low.set(to, next++)
          stack.push(to)
          onStack.add(to)
          work.push({ node: to, edge: 0 })
        } else if (onStack.has(to)) low.set(frame.node, Math.min(low.get(frame.node)!, index.get(to)!))
        continue
      }
      work.pop()
      if (work.length > 0) {
        const parent = work[work.length - 1].node
        low.set(parent, Math.min(low.get(parent)!, low.get(frame.node)!))
      }
      if (low.get(frame.node) !== index.get(frame.node)) continue
      const component = new Set<Transaction>()
      let member: Transaction
      do {
        member = stack.pop()!
        onStack.delete(member)
        component.add(member)
      } while (member !== frame.node)
      if (component.size > 1) found.push(component)
    }
  }
  return found
}

/** A shortest path of edges from `from` to `to` inside `within` (breadth first). */
function path(
  graph: Graph,
  from: Transaction,
  to: Transaction,
  within: ReadonlySet<Transaction>,
): DependencyEdge[] {
  const via = new Map<Transaction, DependencyEdge | null>([[from, null]])
  const queue = [from]
  while (queue.length > 0) {
    const node = queue.shift()!
    if (node === to) break
    for (const edge of graph.get(node) ?? [])
      if (within.has(edge.to) && !via.has(edge.to)) {
        via.set(edge.to, edge)
        queue.push(edge.to)
      }
  }
  const edges: DependencyEdge[] = []
  for (let edge = via.get(to); edge; edge = via.get(edge.from)) edges.unshift(edge)
  return edges
}

function graphOf(edges: readonly DependencyEdge[]): Graph {
  const graph: Graph = new Map()
  for (const edge of edges) addEdge(graph, edge)
  return graph
}

/**
 * One cycle per strongly connected component: G0 over ww edges alone, G1c over wr edges
 * alone (anomalies), and, allowed, the cycles through a read that need ww edges to close.
 */
export function findCycles(edges: readonly DependencyEdge[]): {
  writeCycles: DependencyCycle[]
  circularFlows: DependencyCycle[]
  cyclesThroughWrites: DependencyCycle[]
} {
  const ww = graphOf(edges.filter((e) => e.kind === 'ww'))
  const g0 = components(ww).map((component) => cycleIn(ww, component, 'G0', 'ww'))
  const wr = graphOf(edges.filter((e) => e.kind === 'wr'))
  const wrComponents = components(wr)
  const g1c = wrComponents.map((component) => cycleIn(wr, component, 'G1c', 'wr'))
  const inWrCycle = new Set(wrComponents.flatMap((component) => [...component]))
  const all = graphOf(edges)
  const g1cThroughWrites: DependencyCycle[] = []
  for (const component of components(all)) {
    if ([...component].some((t) => inWrCycle.has(t))) continue
    const hasWr = [...component].some((t) =>
      (all.get(t) ?? []).some((e) => e.kind === 'wr' && component.has(e.to)),
    )
    if (hasWr) g1cThroughWrites.push(cycleIn(all, component, 'G1c', 'wr'))
  }
  return { writeCycles: g0, circularFlows: g1c, cyclesThroughWrites: g1cThroughWrites }
}

/** A cycle within `component`, through an edge of kind `through`. */
function cycleIn(
  graph: Graph,
  component: ReadonlySet<Transaction>,
  kind: DependencyCycle['kind'],
  through: DependencyEdge['kind'],
): DependencyCycle {
  const first = [...component]
    .flatMap((t) => graph.get(t) ?? [])
    .find((e) => e.kind === through && component.has(e.to))!
  return { kind, edges: [first, ...path(graph, first.to, first.from, component)] }
}

/** A transaction as the reports name it. */
export const txnName = (t: Transaction): string => `${t.producer}/${t.txn}`

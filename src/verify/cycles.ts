/**
 * Elle-style dependency cycles between committed transactions, as Jepsen's Kafka workload
 * draws them: T1 -ww-> T2 when T2's record follows T1's next in a partition's version
 * order, T1 -wr-> T2 when T2's last read of a partition is T1's record. A cycle of ww edges
 * only is G0 (write cycle: Kafka does not isolate concurrent transactions' writes, so it is
 * listed as allowed); a cycle with a wr edge is G1c (circular information flow: a
 * transaction both before and after another). Each cycle is reported with the lines that
 * justify each of its edges.
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
function path(graph: Graph, from: Transaction, to: Transaction, within: Set<Transaction>): DependencyEdge[] {
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
 * One cycle per strongly connected component: G0 over ww edges alone; G1c over ww and wr
 * edges where the component holds a wr edge (the cycle then goes through one).
 */
export function findCycles(edges: readonly DependencyEdge[]): {
  g0: DependencyCycle[]
  g1c: DependencyCycle[]
} {
  const ww = graphOf(edges.filter((e) => e.kind === 'ww'))
  const g0 = components(ww).map((component) => {
    const start = [...component][0]
    const first = ww.get(start)!.find((e) => component.has(e.to))!
    return { kind: 'G0' as const, edges: [first, ...path(ww, first.to, start, component)] }
  })
  const all = graphOf(edges)
  const g1c: DependencyCycle[] = []
  for (const component of components(all)) {
    const wr = [...component]
      .flatMap((t) => all.get(t) ?? [])
      .find((e) => e.kind === 'wr' && component.has(e.to))
    if (wr) g1c.push({ kind: 'G1c', edges: [wr, ...path(all, wr.to, wr.from, component)] })
  }
  return { g0, g1c }
}

/** A transaction as the reports name it. */
export const txnName = (t: Transaction): string => `${t.producer}/${t.txn}`

/**
 * Topology descriptions of streams groups (KIP-1331, Kafka 4.4's
 * StreamsGroupTopologyDescriptionManager with its InMemoryTopologyDescriptionPlugin): a
 * member asked to (the heartbeat's TopologyDescriptionRequired) pushes its application's
 * processing graph with StreamsGroupTopologyDescriptionUpdate, and StreamsGroupDescribe v1
 * returns it to admins. Kafka keeps the description in a plugin
 * (`group.streams.topology.description.plugin.class`, none by default: the API then answers
 * UNSUPPORTED_VERSION); tidelog has the one store Kafka ships, the in-memory one, kept with
 * the group in the coordinator's memory: a new coordinator has none and asks again.
 *
 * What the update checks, in Kafka's order: the group is a streams group, the member is in
 * it, the epoch is the group's topology epoch; then the description converts as Kafka's
 * StreamsGroupTopologyDescriptionConverter converts it (a node keeps only its type's fields,
 * its lists without duplicates; an unknown node type, or a global store other than a source
 * and a processor, is INVALID_REQUEST).
 */
import { ErrorCode } from '../../protocol/error-codes.js'

/** Kafka's node types. */
export const NodeType = { SOURCE: 1, PROCESSOR: 2, SINK: 3 } as const

export interface TopologyDescriptionNode {
  readonly name: string
  readonly nodeType: number
  readonly sourceTopics: readonly string[]
  readonly sinkTopic: string | null
  readonly stores: readonly string[]
  readonly successors: readonly string[]
}

export interface TopologyDescription {
  readonly subtopologies: readonly { subtopologyId: string; nodes: readonly TopologyDescriptionNode[] }[]
  readonly globalStores: readonly { source: TopologyDescriptionNode; processor: TopologyDescriptionNode }[]
}

export interface StoredTopologyDescription {
  readonly topologyEpoch: number
  readonly description: TopologyDescription
}

/** An answer of the update: the error code and Kafka's message. */
export interface DescriptionUpdateOutcome {
  readonly errorCode: number
  readonly errorMessage: string | null
}

const unique = (values: readonly string[]): string[] => [...new Set(values)]

/** Kafka's convertNode and toResponseNode: only the fields of the node's type, without duplicates. */
function normalizedNode(node: TopologyDescriptionNode): TopologyDescriptionNode | string {
  const base = { name: node.name, nodeType: node.nodeType, successors: unique(node.successors) }
  switch (node.nodeType) {
    case NodeType.SOURCE:
      return { ...base, sourceTopics: unique(node.sourceTopics), sinkTopic: null, stores: [] }
    case NodeType.PROCESSOR:
      return { ...base, sourceTopics: [], sinkTopic: null, stores: unique(node.stores) }
    case NodeType.SINK:
      return { ...base, sourceTopics: [], sinkTopic: node.sinkTopic, stores: [] }
    default:
      return `Unknown topology node type: ${node.nodeType}`
  }
}

/** The description as Kafka stores and describes it, or the INVALID_REQUEST message. */
export function normalizeTopologyDescription(wire: TopologyDescription): TopologyDescription | string {
  const subtopologies: TopologyDescription['subtopologies'][number][] = []
  for (const subtopology of wire.subtopologies) {
    const nodes: TopologyDescriptionNode[] = []
    for (const node of subtopology.nodes) {
      const normalized = normalizedNode(node)
      if (typeof normalized === 'string') return normalized
      nodes.push(normalized)
    }
    subtopologies.push({ subtopologyId: subtopology.subtopologyId, nodes })
  }
  const globalStores: TopologyDescription['globalStores'][number][] = []
  for (const store of wire.globalStores) {
    const source = normalizedNode(store.source)
    if (typeof source === 'string') return source
    const processor = normalizedNode(store.processor)
    if (typeof processor === 'string') return processor
    if (source.nodeType !== NodeType.SOURCE || processor.nodeType !== NodeType.PROCESSOR)
      return 'Global store must be composed of a source and a processor node.'
    globalStores.push({ source, processor })
  }
  return { subtopologies, globalStores }
}

/** What the update reads and writes of a streams group (streams-group.ts's StreamsGroup). */
export interface DescribedStreamsGroup {
  readonly groupId: string
  readonly members: ReadonlyMap<string, unknown>
  readonly topology: { readonly epoch: number } | null
  topologyDescription: StoredTopologyDescription | null
}

/**
 * Kafka's validateStreamsGroupTopologyDescriptionUpdate and the conversion: stores the
 * description with the group, or says why not. The group is a streams group here.
 */
export function updateTopologyDescription(
  group: DescribedStreamsGroup,
  memberId: string,
  topologyEpoch: number,
  wire: TopologyDescription,
): DescriptionUpdateOutcome {
  if (!group.members.has(memberId))
    return {
      errorCode: ErrorCode.UNKNOWN_MEMBER_ID,
      errorMessage: `Member ${memberId} is not a member of group ${group.groupId}.`,
    }
  const currentEpoch = group.topology?.epoch ?? -1
  if (topologyEpoch !== currentEpoch)
    return {
      errorCode: ErrorCode.INVALID_REQUEST,
      errorMessage: `Topology epoch ${topologyEpoch} does not match the group's current topology epoch ${currentEpoch}.`,
    }
  const description = normalizeTopologyDescription(wire)
  if (typeof description === 'string')
    return { errorCode: ErrorCode.INVALID_REQUEST, errorMessage: description }
  group.topologyDescription = { topologyEpoch, description }
  return { errorCode: ErrorCode.NONE, errorMessage: null }
}

/** Kafka's StreamsGroupTopologyDescriptionBackoff: 30 s, doubling up to an hour. */
const INITIAL_REQUEST_BACKOFF_MS = 30_000
const MAX_REQUEST_BACKOFF_MS = 3_600_000

interface BackoffEntry {
  readonly topologyEpoch: number
  readonly attempts: number
  readonly nextAttemptMs: number
}

/**
 * When to ask a group's members for their description again: Kafka asks once, then waits
 * 30 s (doubling at each unanswered request of the same epoch, up to an hour) before asking
 * again; a stored description clears it. Kafka adds ±20% jitter; tidelog asks on the exact
 * schedule (no ambient randomness in the coordinator).
 */
export class TopologyDescriptionRequests {
  private readonly entries = new Map<string, BackoffEntry>()

  /** Kafka's armIfNotActive: true (and armed) when the members may be asked now. */
  ask(groupId: string, topologyEpoch: number, nowMs: number): boolean {
    const existing = this.entries.get(groupId)
    if (existing && existing.topologyEpoch === topologyEpoch && nowMs < existing.nextAttemptMs) return false
    const attempts = existing && existing.topologyEpoch === topologyEpoch ? existing.attempts + 1 : 0
    const delayMs = Math.min(INITIAL_REQUEST_BACKOFF_MS * 2 ** attempts, MAX_REQUEST_BACKOFF_MS)
    this.entries.set(groupId, { topologyEpoch, attempts, nextAttemptMs: nowMs + delayMs })
    return true
  }

  /** The description of this epoch is stored: no more asking for it. */
  clear(groupId: string, topologyEpoch: number): void {
    if (this.entries.get(groupId)?.topologyEpoch === topologyEpoch) this.entries.delete(groupId)
  }
}

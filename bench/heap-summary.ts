/**
 * What grew between two V8 heap snapshots (node:v8 writeHeapSnapshot), by constructor: the
 * self size and count of every node, grouped by its type and name (an object's constructor,
 * a closure's function, "(string)" for every string, V8's internal names for the rest), the
 * later snapshot minus the earlier. Self sizes only: what each kind of object costs itself,
 * not what it keeps alive.
 */
import { readFileSync } from 'node:fs'

interface Snapshot {
  readonly snapshot: {
    readonly meta: { readonly node_fields: string[]; readonly node_types: [string[], ...unknown[]] }
  }
  readonly nodes: number[]
  readonly strings: string[]
}

export interface HeapGroup {
  readonly group: string
  readonly count: number
  readonly selfBytes: number
}

/** Self bytes and count of every (type, name) group of one snapshot file. */
export function heapGroups(path: string): Map<string, { count: number; selfBytes: number }> {
  const parsed = JSON.parse(readFileSync(path, 'utf8')) as Snapshot
  const fields = parsed.snapshot.meta.node_fields
  const types = parsed.snapshot.meta.node_types[0]
  const stride = fields.length
  const typeAt = fields.indexOf('type')
  const nameAt = fields.indexOf('name')
  const sizeAt = fields.indexOf('self_size')
  const groups = new Map<string, { count: number; selfBytes: number }>()
  for (let i = 0; i < parsed.nodes.length; i += stride) {
    const type = types[parsed.nodes[i + typeAt]]
    const group = groupName(type, parsed.strings[parsed.nodes[i + nameAt]])
    const entry = groups.get(group) ?? { count: 0, selfBytes: 0 }
    entry.count++
    entry.selfBytes += parsed.nodes[i + sizeAt]
    groups.set(group, entry)
  }
  return groups
}

function groupName(type: string, name: string): string {
  switch (type) {
    case 'string':
    case 'concatenated string':
    case 'sliced string':
      return '(string)'
    case 'number':
      return '(heap number)'
    case 'closure':
      return `closure ${name || '(anonymous)'}`
    case 'object':
      return name
    default:
      // Hidden and code nodes carry per-instance names (a map's address, a script's source).
      return `(${type}) ${name.length > 40 ? `${name.slice(0, 40)}...` : name}`
  }
}

/** Groups that grew from `before` to `after`, largest growth first. */
export function heapGrowth(beforePath: string, afterPath: string): HeapGroup[] {
  const before = heapGroups(beforePath)
  const after = heapGroups(afterPath)
  const grown: HeapGroup[] = []
  for (const [group, a] of after) {
    const b = before.get(group) ?? { count: 0, selfBytes: 0 }
    if (a.selfBytes > b.selfBytes)
      grown.push({ group, count: a.count - b.count, selfBytes: a.selfBytes - b.selfBytes })
  }
  return grown.sort((x, y) => y.selfBytes - x.selfBytes)
}

/**
 * Protobuf through protobufjs: the schema and its references (imports, named by their
 * import path) are parsed into one Root and every type must resolve; the well-known
 * `google/protobuf/*.proto` imports need no reference (protobufjs ships them).
 *
 * Compatibility: the common part of Confluent's Protobuf rules, as Confluent checks them (a
 * diff from the original schema to the update; BACKWARD diffs old → new, FORWARD new →
 * old). Incompatible: PACKAGE_CHANGED, MESSAGE_REMOVED, FIELD_KIND_CHANGED (scalar, message
 * or enum), FIELD_SCALAR_KIND_CHANGED outside the wire-compatible groups (int32, uint32,
 * int64, uint64, bool; sint32, sint64; fixed32, sfixed32; fixed64, sfixed64; string,
 * bytes), FIELD_NAMED_TYPE_CHANGED, a field made repeated or no longer repeated,
 * REQUIRED_FIELD_ADDED and REQUIRED_FIELD_REMOVED (proto2), ONEOF_FIELD_REMOVED and
 * MULTIPLE_FIELDS_MOVED_TO_ONEOF. Fields are matched by number. Not checked: enums'
 * values, services, options, maps' key types.
 *
 * A schema may also be a base64 FileDescriptorProto (what confluent-kafka-python's and
 * confluent-kafka-go's serializers register; Confluent accepts both forms), and reads with
 * `format=serialized` answer that form (`serialize`).
 */
import protobuf from 'protobufjs'
// protobufjs's descriptor.proto types; loading it adds Root.fromDescriptor and toDescriptor.
import descriptorExt from 'protobufjs/ext/descriptor/index.js'
import type { ParsedSchema, ResolvedReference, SchemaFormat } from '../types.js'

interface ParsedProto {
  readonly root: protobuf.Root
  readonly packageName: string
  /** proto2 or proto3, as the file declares it. */
  readonly syntax: string
  /** The messages this schema defines (not its references'), by full name. */
  readonly messages: ReadonlyMap<string, protobuf.Type>
}

const PARSE_OPTIONS = { keepCase: true, alternateCommentMode: true }
const WELL_KNOWN = 'google/protobuf/'

/** Adds the well-known files among `imports` to `root`, each once. */
function addWellKnown(root: protobuf.Root, imports: readonly string[] | undefined, added: Set<string>): void {
  for (const name of imports ?? []) {
    if (!name.startsWith(WELL_KNOWN) || added.has(name)) continue
    const json = protobuf.common.get(name) as protobuf.INamespace | null | undefined
    if (!json?.nested) throw new Error(`imports ${name}, which is not a well-known file`)
    root.addJSON(json.nested)
    added.add(name)
  }
}

function messagesOf(namespace: protobuf.NamespaceBase, into: Map<string, protobuf.Type>): void {
  for (const nested of namespace.nestedArray) {
    if (nested instanceof protobuf.Type) into.set(nested.fullName, nested)
    if (nested instanceof protobuf.Namespace || nested instanceof protobuf.Type) messagesOf(nested, into)
  }
}

interface FileDescriptor {
  readonly name?: string
  readonly package?: string
  readonly dependency?: readonly string[]
  readonly weakDependency?: readonly number[]
  readonly syntax?: string
}

interface DescriptorTypes {
  readonly FileDescriptorProto: {
    decode(bytes: Uint8Array): FileDescriptor
    encode(message: FileDescriptor): { finish(): Uint8Array }
  }
}

const descriptors = descriptorExt as unknown as DescriptorTypes
const fromDescriptor = (protobuf.Root as unknown as { fromDescriptor(set: unknown): protobuf.Root })
  .fromDescriptor
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/

/** `text` as a base64 FileDescriptorProto, or null when it is not one (then it is .proto text). */
function fileDescriptor(text: string): FileDescriptor | null {
  const trimmed = text.trim()
  if (!BASE64.test(trimmed) || trimmed.length % 4 !== 0) return null
  try {
    return descriptors.FileDescriptorProto.decode(Buffer.from(trimmed, 'base64'))
  } catch {
    return null
  }
}

/**
 * Adds a schema (.proto text or a base64 FileDescriptorProto) to `root`: its package and
 * imports, as protobuf.parse answers them.
 */
function addSchema(
  root: protobuf.Root,
  text: string,
): { package?: string; imports?: string[]; weakImports?: string[]; syntax?: string } {
  const file = fileDescriptor(text)
  if (file === null) {
    const syntax = /^\s*syntax\s*=\s*["'](proto[23])["']/m.exec(text)?.[1] ?? 'proto2'
    return { ...protobuf.parse(text, root, PARSE_OPTIONS), syntax }
  }
  const parsed = fromDescriptor({ file: [file] })
  const json = parsed.toJSON().nested
  if (json) root.addJSON(json)
  return {
    ...(file.package ? { package: file.package } : {}),
    // descriptor.proto: an empty syntax is proto2.
    syntax: file.syntax || 'proto2',
    imports: [...(file.dependency ?? [])],
  }
}

export const protobufFormat: SchemaFormat = {
  type: 'PROTOBUF',

  parse(schema: string, references: readonly ResolvedReference[], _normalize: boolean): ParsedSchema {
    const root = new protobuf.Root()
    const provided = new Set<string>()
    const wellKnown = new Set<string>()
    for (const reference of references) {
      const result = addSchema(root, reference.schema)
      addWellKnown(root, result.imports, wellKnown)
      provided.add(reference.name)
    }
    const before = new Map<string, protobuf.Type>()
    messagesOf(root, before)
    const result = addSchema(root, schema)
    for (const name of [...(result.imports ?? []), ...(result.weakImports ?? [])])
      if (!name.startsWith(WELL_KNOWN) && !provided.has(name))
        throw new Error(`imports ${name}, which no reference provides`)
    addWellKnown(root, result.imports, wellKnown)
    root.resolveAll()
    const all = new Map<string, protobuf.Type>()
    messagesOf(root, all)
    const messages = new Map([...all].filter(([name]) => !before.has(name)))
    const parsed: ParsedProto = {
      root,
      packageName: result.package ?? '',
      syntax: result.syntax ?? 'proto2',
      messages,
    }
    // protobufjs prints no schema back; the text is kept, trimmed (normalize changes nothing more).
    return { type: 'PROTOBUF', canonical: schema.trim(), parsed }
  },

  /**
   * The schema as a base64 FileDescriptorProto (`format=serialized`): as registered when it
   * came in that form, else made by protobufjs from the parsed types (with references, their
   * types land in the same file).
   */
  serialize(schema: ParsedSchema): string {
    if (fileDescriptor(schema.canonical) !== null) return schema.canonical
    const proto = schema.parsed as ParsedProto
    const set = (
      proto.root as unknown as { toDescriptor(syntax: string): { file: FileDescriptor[] } }
    ).toDescriptor(proto.syntax)
    const file = set.file.find((f) => (f.package ?? '') === proto.packageName) ?? set.file[0]
    return Buffer.from(descriptors.FileDescriptorProto.encode(file).finish()).toString('base64')
  },

  readerCanRead(reader: ParsedSchema, writer: ParsedSchema): string[] {
    return diff(writer.parsed as ParsedProto, reader.parsed as ParsedProto)
  },

  /**
   * Confluent's Protobuf framing: before the message, the path of its type in the schema
   * file as zigzag varints (a count, then that many indexes; a lone 0 is the first message).
   */
  decode(schema: ParsedSchema, payload: Buffer): unknown {
    const proto = schema.parsed as ParsedProto
    const reader = protobuf.Reader.create(payload)
    const count = reader.sint32()
    if (count < 0 || count > MESSAGE_DEPTH_MAX) throw new Error(`bad message index count ${count}`)
    const indexes = count === 0 ? [0] : Array.from({ length: count }, () => reader.sint32())
    let candidates = topLevelMessages(proto)
    let type: protobuf.Type | undefined
    for (const index of indexes) {
      type = candidates[index]
      if (!type) throw new Error(`no message at index ${index}`)
      candidates = type.nestedArray.filter((n): n is protobuf.Type => n instanceof protobuf.Type)
    }
    return (type as protobuf.Type).toObject((type as protobuf.Type).decode(reader), PROTO_JSON)
  },
}

const MESSAGE_DEPTH_MAX = 100
const PROTO_JSON = { longs: String, enums: String, bytes: String, defaults: false } as const

/** The schema file's own top-level messages, in declaration order. */
function topLevelMessages(proto: ParsedProto): protobuf.Type[] {
  const parentName = proto.packageName === '' ? '' : `.${proto.packageName}`
  return [...proto.messages.values()].filter((t) => (t.parent?.fullName ?? '') === parentName)
}

const SCALAR_GROUPS: readonly (readonly string[])[] = [
  ['int32', 'uint32', 'int64', 'uint64', 'bool'],
  ['sint32', 'sint64'],
  ['fixed32', 'sfixed32'],
  ['fixed64', 'sfixed64'],
  ['string', 'bytes'],
]

function kindOf(field: protobuf.Field): 'scalar' | 'message' | 'enum' {
  if (field.resolvedType instanceof protobuf.Type) return 'message'
  if (field.resolvedType instanceof protobuf.Enum) return 'enum'
  return 'scalar'
}

function sameScalarGroup(a: string, b: string): boolean {
  return a === b || SCALAR_GROUPS.some((group) => group.includes(a) && group.includes(b))
}

function issue(out: string[], errorType: string, where: string): void {
  out.push(`{errorType:'${errorType}', description:'at ${where}'}`)
}

/** Confluent's diff from `original` to `update`: the incompatible differences. */
function diff(original: ParsedProto, update: ParsedProto): string[] {
  const out: string[] = []
  if (original.packageName !== update.packageName)
    issue(out, 'PACKAGE_CHANGED', `package ${original.packageName}`)
  for (const [name, message] of original.messages) {
    const updated = update.messages.get(name)
    if (!updated) issue(out, 'MESSAGE_REMOVED', name)
    else diffMessage(message, updated, out)
  }
  return out
}

function diffMessage(original: protobuf.Type, update: protobuf.Type, out: string[]): void {
  for (const field of original.fieldsArray) {
    const where = `${original.fullName}.${field.name} (#${field.id})`
    const updated = update.fieldsById[field.id]
    if (!updated) {
      if (field.partOf) issue(out, 'ONEOF_FIELD_REMOVED', where)
      else if (field.required) issue(out, 'REQUIRED_FIELD_REMOVED', where)
      continue
    }
    const kind = kindOf(field)
    if (kind !== kindOf(updated)) issue(out, 'FIELD_KIND_CHANGED', where)
    else if (kind === 'scalar' && !sameScalarGroup(field.type, updated.type))
      issue(out, 'FIELD_SCALAR_KIND_CHANGED', where)
    else if (kind !== 'scalar' && field.resolvedType?.fullName !== updated.resolvedType?.fullName)
      issue(out, 'FIELD_NAMED_TYPE_CHANGED', where)
    if (field.repeated !== updated.repeated || field.map !== updated.map)
      issue(out, 'FIELD_LABEL_CHANGED', where)
  }
  for (const field of update.fieldsArray)
    if (field.required && !original.fieldsById[field.id])
      issue(out, 'REQUIRED_FIELD_ADDED', `${update.fullName}.${field.name} (#${field.id})`)
  for (const oneof of update.oneofsArray) {
    const moved = oneof.fieldsArray.filter((f) => {
      const before = original.fieldsById[f.id]
      return before !== undefined && !before.partOf
    })
    if (moved.length > 1) issue(out, 'MULTIPLE_FIELDS_MOVED_TO_ONEOF', `${update.fullName}.${oneof.name}`)
  }
}

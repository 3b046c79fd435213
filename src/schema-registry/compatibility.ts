/**
 * Compatibility levels as Confluent defines them. BACKWARD: consumers using the new schema
 * read data written with the previous one (new is the reader); FORWARD: consumers using
 * the previous schema read data written with the new one; FULL: both. The plain levels
 * check against the latest version, the _TRANSITIVE ones against every version. NONE checks
 * nothing. Versions are compared by the schema format's `readerCanRead`.
 */
import type { CompatibilityLevel, ParsedSchema, SchemaFormat } from './types.js'

/**
 * Why `candidate` is not compatible with `previous` (oldest first) under `level`: empty
 * when it is. Each message names the version it fails against.
 */
export function checkCompatibility(
  format: SchemaFormat,
  level: CompatibilityLevel,
  candidate: ParsedSchema,
  previous: readonly { version: number; schema: ParsedSchema }[],
): string[] {
  if (level === 'NONE' || previous.length === 0) return []
  const transitive = level.endsWith('_TRANSITIVE')
  const against = transitive ? previous : previous.slice(-1)
  const backward = level.startsWith('BACKWARD') || level.startsWith('FULL')
  const forward = level.startsWith('FORWARD') || level.startsWith('FULL')
  const messages: string[] = []
  // Newest first, as Confluent reports them.
  for (const { version, schema } of [...against].reverse()) {
    const found: string[] = []
    if (backward) found.push(...format.readerCanRead(candidate, schema))
    if (forward) found.push(...format.readerCanRead(schema, candidate))
    for (const message of found) messages.push(`${message}, {oldSchemaVersion: ${version}}`)
  }
  if (messages.length > 0) messages.push(`{compatibility: '${level}'}`)
  return messages
}

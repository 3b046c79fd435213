/**
 * The message definitions the codecs are generated from, as the generator sees them: Kafka
 * 4.4's JSON (protocol-schemas/4.4/) with the lower versions Kafka 4 removed taken from the
 * 3.9 JSON (protocol-schemas/), merged by scripts/protocol-schema-merge.mjs, which proves
 * the merged layout equals each source's at every version. The codec tests build random
 * messages from these definitions independently of the generated code.
 */
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

export interface MergedSchema {
  /** The newer file when there is one, e.g. "4.4/FetchRequest.json", else the 3.9 file. */
  readonly file: string
  readonly json: unknown
}

function repoRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url))
  while (!fs.existsSync(path.join(dir, 'protocol-schemas', 'ProduceRequest.json'))) {
    if (path.dirname(dir) === dir) throw new Error('protocol-schemas not found above the test file')
    dir = path.dirname(dir)
  }
  return dir
}

export async function loadMergedSchemas(): Promise<MergedSchema[]> {
  const root = repoRoot()
  const merge = (await import(
    pathToFileURL(path.join(root, 'scripts', 'protocol-schema-merge.mjs')).href
  )) as {
    mergedSchemas(dir: string, subdir: string): MergedSchema[]
  }
  return merge.mergedSchemas(path.join(root, 'protocol-schemas'), '4.4')
}

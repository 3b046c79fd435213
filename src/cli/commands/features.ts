/**
 * `tidelog features describe|upgrade|downgrade|disable`, after Kafka's kafka-features.sh
 * (its options and its output lines, so scripts written for one read the other):
 *   describe    every feature: supported range, finalized level, epoch (ApiVersions v4+)
 *   upgrade     --feature NAME=LEVEL (repeatable) raises levels (UpdateFeatures, UPGRADE)
 *   downgrade   --feature NAME=LEVEL lowers them (SAFE_DOWNGRADE, or UNSAFE_DOWNGRADE with --unsafe)
 *   disable     --feature NAME sets level 0 (a downgrade)
 * --dry-run validates without changing anything. The updates of one command succeed or fail
 * together (Kafka 4.4 refuses the whole request when one is refused): each line says so.
 */
import { parseArgs } from 'node:util'
import { Admin } from '../../client/admin.js'
import { KafkaProtocolError } from '../../client/errors.js'
import {
  describeFeatures,
  type FeatureLevelUpdate,
  type FeatureUpgradeType,
  updateFeatures,
} from '../../client/features.js'
import {
  COMMON_OPTIONS,
  clientOptions,
  EXIT_FAILED,
  EXIT_OK,
  EXIT_USAGE,
  guarded,
  isHelp,
  out,
  printJson,
  UsageError,
} from './common.js'

export const FEATURES_USAGE = `Usage: tidelog features <describe|upgrade|downgrade|disable> [options]

  describe
  upgrade     --feature NAME=LEVEL [--feature NAME=LEVEL ...] [--dry-run]
  downgrade   --feature NAME=LEVEL [--feature NAME=LEVEL ...] [--unsafe] [--dry-run]
  disable     --feature NAME [--feature NAME ...] [--unsafe] [--dry-run]

Features tidelog runs: group.version 0-1 (1: KIP-848 consumer groups), and at 0 only
transaction.version, share.version, streams.version, kraft.version (docs/client.md).
Common: --bootstrap-server HOST:PORT (default 127.0.0.1:9092), --command-config FILE, --json
`

const OPTIONS = {
  ...COMMON_OPTIONS,
  feature: { type: 'string', short: 'f', multiple: true },
  'dry-run': { type: 'boolean', default: false },
  unsafe: { type: 'boolean', default: false },
} as const

type Operation = 'upgrade' | 'downgrade' | 'disable'

export async function featuresCommand(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv
  return guarded(`features ${sub ?? ''}`.trim(), async () => {
    const { values, positionals } = parseArgs({ args: rest, options: OPTIONS, allowPositionals: true })
    if (values.help || sub === undefined || isHelp(sub)) {
      process.stdout.write(FEATURES_USAGE)
      return sub === undefined ? EXIT_USAGE : EXIT_OK
    }
    if (sub !== 'describe' && sub !== 'upgrade' && sub !== 'downgrade' && sub !== 'disable')
      throw new UsageError(`unknown features subcommand '${sub}'`)
    if (positionals.length > 0)
      throw new UsageError(`features ${sub} takes no argument, got '${positionals.join(' ')}'`)
    const updates = sub === 'describe' ? [] : parseUpdates(sub, values.feature ?? [], values.unsafe)
    const admin = new Admin(
      clientOptions(values['bootstrap-server'], 'tidelog-cli', values['command-config']),
    )
    try {
      if (sub === 'describe') return await describe(admin, values.json)
      return await update(admin, sub, updates, values['dry-run'], values.json)
    } finally {
      admin.close()
    }
  })
}

async function describe(admin: Admin, json: boolean): Promise<number> {
  const metadata = await describeFeatures(admin)
  if (json) {
    printJson(metadata)
    return EXIT_OK
  }
  const epoch = metadata.finalizedFeaturesEpoch === null ? '-' : String(metadata.finalizedFeaturesEpoch)
  // kafka-features.sh's line, field for field.
  for (const f of metadata.features)
    out(
      `Feature: ${f.name}\tSupportedMinVersion: ${f.supportedMinVersion}\tSupportedMaxVersion: ${f.supportedMaxVersion}\tFinalizedVersionLevel: ${f.finalizedLevel}\tEpoch: ${epoch}`,
    )
  return EXIT_OK
}

async function update(
  admin: Admin,
  operation: Operation,
  updates: readonly FeatureLevelUpdate[],
  dryRun: boolean,
  json: boolean,
): Promise<number> {
  let failure: string | null = null
  try {
    await updateFeatures(admin, updates, { validateOnly: dryRun })
  } catch (error) {
    // A refused update fails the request; anything else (unreachable, unsupported) is the command's.
    if (!(error instanceof KafkaProtocolError)) throw error
    // kafka-features.sh prints the broker's message alone.
    failure = error.message.startsWith(`${error.errorName}: `)
      ? error.message.slice(error.errorName.length + 2)
      : error.message
  }
  const sorted = [...updates].sort((a, b) => (a.feature < b.feature ? -1 : 1))
  if (json) printJson({ operation, dryRun, updates: sorted, error: failure })
  else
    for (const u of sorted) {
      const what =
        operation === 'disable' ? `disable ${u.feature}` : `${operation} ${u.feature} to ${u.level}`
      if (failure !== null) out(`${dryRun ? 'Can not' : 'Could not'} ${what}. ${failure}`)
      else
        out(
          `${u.feature} ${dryRun ? 'can be' : 'was'} ${operation === 'disable' ? 'disabled' : `${operation}d to ${u.level}`}.`,
        )
    }
  if (failure === null) return EXIT_OK
  if (!json) out(`${updates.length} out of ${updates.length} operation(s) failed.`)
  return EXIT_FAILED
}

/** The --feature values of `operation`: NAME=LEVEL (upgrade, downgrade) or NAME (disable). */
function parseUpdates(
  operation: Operation,
  features: readonly string[],
  unsafe: boolean,
): FeatureLevelUpdate[] {
  if (features.length === 0) throw new UsageError(`You must specify at least one feature to ${operation}`)
  if (unsafe && operation === 'upgrade')
    throw new UsageError('--unsafe applies to downgrade and disable only')
  const upgradeType: FeatureUpgradeType =
    operation === 'upgrade' ? 'upgrade' : unsafe ? 'unsafe-downgrade' : 'safe-downgrade'
  const seen = new Set<string>()
  return features.map((item) => {
    const eq = item.indexOf('=')
    let feature = item
    let level = 0
    if (operation === 'disable') {
      if (eq >= 0) throw new UsageError(`disable takes --feature NAME, got '${item}'`)
    } else {
      const text = item.slice(eq + 1).trim()
      level = Number(text)
      if (eq <= 0 || text === '' || !Number.isInteger(level) || level < 0 || level > 32767)
        throw new UsageError(`--feature expects NAME=LEVEL (a level 0-32767), got '${item}'`)
      feature = item.slice(0, eq).trim()
    }
    if (seen.has(feature)) throw new UsageError(`feature ${feature} named twice`)
    seen.add(feature)
    return { feature, level, upgradeType }
  })
}

/**
 * UpdateFeatures' checks (metadata/feature-control.ts) with the messages Kafka 4.4's
 * controller answers (captured from the reference broker: "Invalid update version ..."),
 * the order Kafka meets several updates in, and the finalized levels kept in the metadata
 * store (embedded and etcd): written by one view of it, read with their epoch by another.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import type { ClusterImage } from '../../src/metadata/cluster-image.js'
import { ClusterMetadata } from '../../src/metadata/cluster-metadata.js'
import {
  checkFeatureUpdates,
  type FeatureUpdate,
  javaHashMapOrder,
  UpgradeType,
  updateFeatures,
} from '../../src/metadata/feature-control.js'
import { BOOTSTRAP_FEATURES_EPOCH, finalizedFeaturesOf, finalizedLevel } from '../../src/metadata/features.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import { EtcdStore } from '../../src/metadata/store/etcd-store.js'
import { type MetadataStore, MetadataStoreError } from '../../src/metadata/store/metadata-store.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { toBrokerId } from '../helpers/broker-ids.js'
import { startEtcd } from '../helpers/etcd.js'
import { ManualClock } from '../storage/helpers.js'

const CONTROLLER = toBrokerId(1)
const EMPTY: ClusterImage = {
  clusterId: 'c',
  controllerId: toBrokerId(1),
  brokers: new Map(),
  topics: new Map(),
}
const { UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE } = UpgradeType

function refused(image: ClusterImage, updates: FeatureUpdate[]): string | null {
  return checkFeatureUpdates(image, updates, CONTROLLER)?.message ?? null
}

const update = (feature: string, level: number, upgradeType: number = UPGRADE): FeatureUpdate => ({
  feature,
  level,
  upgradeType,
})

test("feature updates are checked as Kafka 4.4's controller checks them, with its messages", () => {
  const cases: [FeatureUpdate, string | null][] = [
    [update('group.version', 1), null],
    [update('group.version', 0, SAFE_DOWNGRADE), null],
    [update('group.version', 0, UNSAFE_DOWNGRADE), null],
    [update('group.version', 1, SAFE_DOWNGRADE), null],
    [update('transaction.version', 0, SAFE_DOWNGRADE), null],
    [update('transaction.version', 2), null],
    [
      update('group.version', 2),
      'Invalid update version 2 for feature group.version. Local controller 1 only supports versions 0-1',
    ],
    [
      update('transaction.version', 3),
      'Invalid update version 3 for feature transaction.version. Local controller 1 only supports versions 0-2',
    ],
    [
      update('no.such', 1),
      'Invalid update version 1 for feature no.such. Local controller 1 does not support this feature.',
    ],
    [update('no.such', 0), 'Invalid update version 0 for feature no.such. Feature no.such not found.'],
    [
      update('metadata.version', 0, SAFE_DOWNGRADE),
      'Invalid update version 0 for feature metadata.version. Feature metadata.version not found.',
    ],
    [
      update('group.version', -1, SAFE_DOWNGRADE),
      'Invalid update version -1 for feature group.version. A feature version cannot be less than 0.',
    ],
    [
      update('group.version', 0),
      "Invalid update version 0 for feature group.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.",
    ],
    [
      update('group.version', 0, 0),
      'Invalid update version 0 for feature group.version. The controller does not support the given upgrade type.',
    ],
    [
      update('group.version', 1, 4),
      'Invalid update version 1 for feature group.version. The controller does not support the given upgrade type.',
    ],
  ]
  for (const [u, expected] of cases) assert.equal(refused(EMPTY, [u]), expected, JSON.stringify(u))
  // From group.version 0, a level above needs UPGRADE.
  const atZero: ClusterImage = {
    ...EMPTY,
    finalizedFeatures: { epoch: 7 as never, levels: new Map([['group.version', 0]]) },
  }
  assert.equal(
    refused(atZero, [update('group.version', 1, SAFE_DOWNGRADE)]),
    "Invalid update version 1 for feature group.version. Can't downgrade to a newer version.",
  )
  assert.equal(refused(atZero, [update('group.version', 1)]), null)
})

test("several updates: the error is the first in Kafka's HashMap order, a repeated name keeps its last level", () => {
  // The reference broker named group.version's error whichever came first in the request.
  for (const updates of [
    [update('share.version', 9), update('group.version', 0)],
    [update('group.version', 0), update('share.version', 9)],
  ])
    assert.match(refused(EMPTY, updates) ?? '', /for feature group\.version\. Can't downgrade/)
  assert.match(
    refused(EMPTY, [update('group.version', 0, SAFE_DOWNGRADE), update('share.version', 9)]) ?? '',
    /for feature share\.version/,
  )
  assert.deepEqual(javaHashMapOrder([update('group.version', 1), update('group.version', 0)]), [
    update('group.version', 0),
  ])
  assert.match(
    refused(EMPTY, [update('group.version', 1), update('group.version', 0)]) ?? '',
    /Can't downgrade/,
  )
})

test('updateFeatures writes all levels or none; validateOnly writes nothing', async () => {
  let image = EMPTY
  const metadata = {
    update: async (change: (image: ClusterImage) => ClusterImage) => {
      image = change(image)
      return image
    },
  }
  assert.equal(
    await updateFeatures(metadata, [update('group.version', 0, SAFE_DOWNGRADE)], true, CONTROLLER),
    null,
  )
  assert.equal(image, EMPTY, 'validateOnly changed the image')
  const error = await updateFeatures(
    metadata,
    [update('group.version', 0, SAFE_DOWNGRADE), update('streams.version', 2)],
    false,
    CONTROLLER,
  )
  assert.equal(error?.feature, 'streams.version')
  assert.equal(image, EMPTY, 'a refused request wrote a level')
  assert.equal(
    await updateFeatures(metadata, [update('streams.version', 0, SAFE_DOWNGRADE)], false, CONTROLLER),
    null,
  )
  // The first write keeps the bootstrap levels beside the new one.
  assert.deepEqual([...finalizedFeaturesOf(image).levels].sort(), [
    ['group.version', 1],
    ['share.version', 1],
    ['streams.version', 0],
    ['transaction.version', 2],
  ])
})

test('a write the metadata store does not commit answers REQUEST_TIMED_OUT', async () => {
  const down = {
    update: async (): Promise<ClusterImage> => {
      throw new MetadataStoreError('STORE_UNAVAILABLE', 'etcd is away')
    },
  }
  const error = await updateFeatures(down, [update('group.version', 0, SAFE_DOWNGRADE)], false, CONTROLLER)
  assert.deepEqual([error?.feature, error?.errorCode], [null, ErrorCode.REQUEST_TIMED_OUT])
})

/** Two views of one store: levels one writes, the other reads with their epoch. */
async function levelsKeptIn(store: MetadataStore): Promise<void> {
  // newUuid draws again until it gets a usable id: the bytes must vary.
  const random = { next: Math.random, int: (min: number) => min, bytes: (n: number) => randomBytes(n) }
  const writer = await ClusterMetadata.open(store, { clusterId: null, random, logger: silentLogger })
  const reader = await ClusterMetadata.open(store, { clusterId: null, random, logger: silentLogger })
  try {
    assert.equal(finalizedFeaturesOf(reader.image()).epoch, BOOTSTRAP_FEATURES_EPOCH)
    assert.equal(finalizedLevel(reader.image(), 'group.version'), 1, 'bootstrap level')
    const epochs: number[] = []
    for (const [level, type] of [
      [0, SAFE_DOWNGRADE],
      [1, UPGRADE],
    ]) {
      assert.equal(
        await updateFeatures(writer, [update('group.version', level, type)], false, CONTROLLER),
        null,
      )
      const deadline = Date.now() + 10_000
      while (finalizedLevel(reader.image(), 'group.version') !== level && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 10))
      assert.equal(finalizedLevel(reader.image(), 'group.version'), level, 'the other view follows')
      const epoch = finalizedFeaturesOf(reader.image()).epoch
      assert.equal(finalizedFeaturesOf(writer.image()).epoch, epoch)
      epochs.push(epoch)
    }
    assert.ok(epochs[0] > BOOTSTRAP_FEATURES_EPOCH && epochs[1] > epochs[0], `epochs ${epochs}`)
    // An update to the level already finalized writes nothing: the epoch stays.
    assert.equal(await updateFeatures(writer, [update('group.version', 1)], false, CONTROLLER), null)
    assert.equal(finalizedFeaturesOf(writer.image()).epoch, epochs[1])
  } finally {
    writer.close()
    reader.close()
    await store.close()
  }
}

test('the finalized levels live in the embedded store: another view reads them, and their epoch grows', async () => {
  await levelsKeptIn(await EmbeddedStore.open({ clock: new ManualClock() }))
})

test('the finalized levels live in etcd: another view reads them, and their epoch grows', {
  timeout: 60_000,
}, async () => {
  const etcd = await startEtcd()
  try {
    await levelsKeptIn(
      await EtcdStore.connect({ endpoints: [etcd.endpoint], prefix: `/tidelog-features-${process.pid}` }),
    )
  } finally {
    await etcd.stop()
  }
})

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { entityKey, parseEntityKey } from '../../src/server/quota/client-quota-entity.js'
import { ClientQuotaManager } from '../../src/server/quota/client-quota-manager.js'
import { SampledRate } from '../../src/server/quota/sampled-rate.js'

const WINDOW = { samples: 11, windowMs: 1000 }

function manager(quotas: [Parameters<typeof entityKey>[0], number][], maxThrottleTimeMs?: number) {
  const m = new ClientQuotaManager({
    ...WINDOW,
    quotaKey: 'producer_byte_rate',
    ...(maxThrottleTimeMs !== undefined ? { maxThrottleTimeMs } : {}),
  })
  m.setQuotas(new Map(quotas.map(([entity, bound]) => [entityKey(entity), bound])))
  return m
}

describe('SampledRate (Kafka Rate over SampledStat)', () => {
  it('divides by at least samples - 1 windows while the first windows fill', () => {
    const rate = new SampledRate(WINDOW)
    rate.record(1000, 0)
    assert.equal(rate.windowSizeMs(0), 10_000)
    assert.equal(rate.measure(0), 100)
    rate.record(1000, 500)
    assert.equal(rate.measure(500), 2000 / 10.5)
  })

  it('forgets samples older than samples * window', () => {
    const rate = new SampledRate(WINDOW)
    rate.record(5000, 0)
    for (let t = 1000; t <= 10_000; t += 1000) rate.record(0, t)
    assert.ok(rate.measure(10_000) > 0)
    rate.record(0, 11_000)
    assert.equal(rate.measure(11_000), 0)
  })

  it('measures a steady rate as that rate once the windows are full', () => {
    const rate = new SampledRate(WINDOW)
    for (let t = 0; t <= 30_000; t += 100) rate.record(100, t)
    assert.ok(Math.abs(rate.measure(30_000) - 1000) < 1000 * 0.1, `${rate.measure(30_000)}`)
  })
})

describe('ClientQuotaManager', () => {
  it('records nothing and never throttles while no quota is configured', () => {
    const m = manager([])
    assert.equal(m.enabled, false)
    assert.equal(m.recordAndGetThrottleTimeMs('alice', 'app', 1e12, 0), 0)
    assert.equal(m.observedRate('alice', 'app', 0), 0)
  })

  it('computes the throttle time as (observed - quota) / quota * window', () => {
    const m = manager([[{ clientId: 'app' }, 1000]])
    // 20000 bytes over the 10 s minimum window: 2000 B/s against 1000 B/s.
    assert.equal(m.recordAndGetThrottleTimeMs('ANONYMOUS', 'app', 20_000, 0), 10_000)
    assert.equal(m.recordAndGetThrottleTimeMs('ANONYMOUS', 'app', 0, 0), 10_000)
    // Within the quota: no throttle.
    const n = manager([[{ clientId: 'app' }, 1000]])
    assert.equal(n.recordAndGetThrottleTimeMs('ANONYMOUS', 'app', 10_000, 0), 0)
  })

  it('caps the throttle time when configured (request quota)', () => {
    const m = manager([[{ clientId: 'app' }, 1000]], 1000)
    assert.equal(m.recordAndGetThrottleTimeMs('ANONYMOUS', 'app', 20_000, 0), 1000)
  })

  it('applies the eight levels of KIP-55 in order', () => {
    const levels: [Parameters<typeof entityKey>[0], number][] = [
      [{ user: 'alice', clientId: 'app' }, 1],
      [{ user: 'alice', clientId: null }, 2],
      [{ user: 'alice' }, 3],
      [{ user: null, clientId: 'app' }, 4],
      [{ user: null, clientId: null }, 5],
      [{ user: null }, 6],
      [{ clientId: 'app' }, 7],
      [{ clientId: null }, 8],
    ]
    for (let i = 0; i < levels.length; i++) {
      const m = manager(levels.slice(i))
      assert.equal(m.quotaLimit('alice', 'app'), i + 1, `level ${i + 1}`)
    }
    assert.equal(manager([]).quotaLimit('alice', 'app'), null)
    // Another user falls through alice's entries to the defaults.
    assert.equal(manager(levels).quotaLimit('bob', 'app'), 4)
    assert.equal(manager(levels).quotaLimit('bob', 'other'), 5)
    assert.equal(manager([levels[6], levels[7]]).quotaLimit('bob', 'other'), 8)
  })

  it('shares one sensor among the client ids a user quota covers, not among client-id quotas', () => {
    const byUser = manager([[{ user: 'alice' }, 1000]])
    byUser.recordAndGetThrottleTimeMs('alice', 'a', 6000, 0)
    assert.ok(byUser.recordAndGetThrottleTimeMs('alice', 'b', 6000, 0) > 0, 'alice/a and alice/b share')
    assert.equal(byUser.recordAndGetThrottleTimeMs('bob', 'a', 6000, 0), 0, 'bob has no quota')

    const byDefaultClient = manager([[{ clientId: null }, 1000]])
    byDefaultClient.recordAndGetThrottleTimeMs('alice', 'a', 6000, 0)
    assert.equal(
      byDefaultClient.recordAndGetThrottleTimeMs('alice', 'b', 6000, 0),
      0,
      'one sensor per client id',
    )
  })

  it('bounds a fetch by the quota over samples - 1 windows', () => {
    const m = manager([[{ clientId: 'app' }, 1000]])
    assert.equal(m.maxValueInQuotaWindow('ANONYMOUS', 'app'), 10_000)
    assert.equal(m.maxValueInQuotaWindow('ANONYMOUS', 'other'), Number.POSITIVE_INFINITY)
  })

  it('holds a client sending as fast as it is let to its quota', () => {
    const m = manager([[{ clientId: 'app' }, 1_048_576]])
    let nowMs = 0
    let sentAt22s = 0
    let sent = 0
    // A client that honours the throttle time: it waits before its next 64 KiB request.
    // The rate divides by at least 10 s, so a client with room sends up to 10 s worth at
    // once: the steady state repeats every samples * window (11 s) and is measured over
    // whole periods of it, after the first.
    while (nowMs < 55_000) {
      if (nowMs < 22_000) sentAt22s = sent
      sent += 65_536
      nowMs += Math.max(5, m.recordAndGetThrottleTimeMs('ANONYMOUS', 'app', 65_536, nowMs))
    }
    const rate = (sent - sentAt22s) / ((nowMs - 22_000) / 1000)
    assert.ok(Math.abs(rate - 1_048_576) / 1_048_576 < 0.05, `rate ${rate}`)
  })
})

describe('quota entity keys', () => {
  it('round-trip names with slashes, equals signs and defaults', () => {
    for (const entity of [
      { user: 'a/b=c', clientId: 'x y' },
      { user: null },
      { clientId: null },
      { user: '<default>', clientId: null },
    ]) {
      assert.deepEqual(parseEntityKey(entityKey(entity)), entity)
    }
    assert.notEqual(entityKey({ user: '<default>' }), entityKey({ user: null }))
  })
})

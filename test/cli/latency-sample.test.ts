import assert from 'node:assert/strict'
import { test } from 'node:test'
import { LatencySample } from '../../src/cli/commands/latency-sample.js'

test('below its capacity the sample is every value: nearest-rank percentiles are exact', () => {
  const sample = new LatencySample(1024)
  const values = [5, 1, 9, 3, 7, 2, 8, 4, 6, 10]
  for (const v of values) sample.record(v)
  assert.equal(sample.count, 10)
  assert.equal(sample.max, 10)
  assert.equal(sample.mean, 5.5)
  assert.equal(sample.percentile(50), 5)
  assert.equal(sample.percentile(90), 9)
  assert.equal(sample.percentile(99), 10)
  assert.equal(sample.percentile(0), 1)
  assert.equal(sample.percentile(100), 10)
})

test('past its capacity it keeps an evenly spaced sample: records s, 2s, 3s, ... of the sequence', () => {
  const capacity = 8
  const sample = new LatencySample(capacity)
  // Record n has value n: the kept values are the record numbers kept.
  for (let n = 1; n <= 100; n++) sample.record(n)
  const kept = Array.from({ length: capacity + 1 }, (_, i) => sample.percentile(((i + 1) / capacity) * 100))
  // Stride 16 after three halvings (8 -> 16 -> 32 -> 64 records seen at stride 1, 2, 4, 8...).
  const stride = kept[1] - kept[0]
  for (let i = 1; i < kept.length - 1 && kept[i] !== kept[i - 1]; i++)
    assert.equal(kept[i] - kept[i - 1], stride)
  assert.ok(
    kept.every((v) => v % stride === 0),
    `kept ${kept.join(',')} are multiples of ${stride}`,
  )
  assert.equal(sample.count, 100)
  assert.equal(sample.max, 100, 'the maximum is exact')
  assert.equal(sample.mean, 50.5, 'the mean is exact')
})

test('a million values in a sample of 4096: percentiles within 1 % of the exact ones', () => {
  const sample = new LatencySample(4096)
  const n = 1_000_000
  // A shuffled 1..n (a fixed permutation: multiplication by a unit modulo n).
  for (let i = 0; i < n; i++) sample.record(((i * 7919) % n) + 1)
  for (const p of [50, 90, 99, 99.9]) {
    const exact = (p / 100) * n
    const got = sample.percentile(p)
    assert.ok(Math.abs(got - exact) <= n * 0.01, `p${p}: ${got} against ${exact}`)
  }
  assert.equal(sample.max, n)
})

test('an empty sample answers 0, and a capacity that cannot halve is refused', () => {
  assert.equal(new LatencySample(16).percentile(99), 0)
  assert.throws(() => new LatencySample(3), RangeError)
})

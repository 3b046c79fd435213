/**
 * The share consumer's bookkeeping without a broker: acknowledgement batches as Java's
 * client sends them (consecutive offsets share a batch, one type when uniform, else one per
 * offset), and the share session's epochs and partition changes (KIP-932).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Acknowledgements } from '../../src/client/share/acknowledgements.js'
import { ShareSession } from '../../src/client/share/share-session.js'

test('acknowledgement batches: consecutive offsets together, uniform types collapsed', () => {
  const acks = new Acknowledgements()
  for (const offset of [5, 3, 4]) acks.add(offset, 'ACCEPT')
  acks.add(7, 'RELEASE')
  acks.add(8, 'GAP')
  acks.add(9, 'REJECT')
  acks.add(12, 'ACCEPT')
  acks.add(12, 'REJECT') // a later answer before sending replaces the earlier one
  assert.deepEqual(acks.toBatches(), [
    { firstOffset: 3n, lastOffset: 5n, acknowledgeTypes: [1] },
    { firstOffset: 7n, lastOffset: 9n, acknowledgeTypes: [2, 0, 3] },
    { firstOffset: 12n, lastOffset: 12n, acknowledgeTypes: [3] },
  ])
  assert.equal(acks.hasRenew, false)
  acks.add(20, 'RENEW')
  assert.equal(acks.hasRenew, true)
  assert.deepEqual(acks.toBatches().at(-1), { firstOffset: 20n, lastOffset: 20n, acknowledgeTypes: [4] })
})

test('share session: epoch 0 names everything, then increments name changes only', () => {
  const session = new ShareSession(1)
  const a = { topicId: 'A', topic: 'a', partition: 0 }
  const b = { topicId: 'A', topic: 'a', partition: 1 }
  const c = { topicId: 'C', topic: 'c', partition: 0 }
  assert.equal(session.nextEpoch, 0)
  assert.equal(session.isOpen, false)
  assert.deepEqual(session.change([a, b]), { added: [a, b], forgotten: [] })
  session.onAnswered()
  assert.equal(session.nextEpoch, 1)
  assert.deepEqual(session.change([a, b]), { added: [], forgotten: [] })
  session.onAnswered()
  assert.deepEqual(session.change([b, c]), { added: [c], forgotten: [a] })
  session.onAnswered()
  assert.equal(session.nextEpoch, 3)
  // A session error or a lost connection: the next request opens a new session, naming all.
  session.reset()
  assert.equal(session.nextEpoch, 0)
  assert.deepEqual(session.change([b, c]), { added: [b, c], forgotten: [] })
  session.markClosed()
  assert.equal(session.nextEpoch, -1)
  assert.equal(session.isOpen, false)
})

test('share session: requests run one at a time, in order', async () => {
  const session = new ShareSession(1)
  const order: string[] = []
  let release = (): void => undefined
  const first = session.exclusive(async () => {
    order.push('first start')
    await new Promise<void>((resolve) => {
      release = resolve
    })
    order.push('first end')
    throw new Error('lost')
  })
  const second = session.exclusive(async () => {
    order.push('second')
    return 2
  })
  await new Promise((resolve) => setImmediate(resolve))
  assert.deepEqual(order, ['first start'])
  release()
  await assert.rejects(first, /lost/)
  assert.equal(await second, 2)
  assert.deepEqual(order, ['first start', 'first end', 'second'])
})

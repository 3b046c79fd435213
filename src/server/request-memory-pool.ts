/**
 * Kafka's `queued.max.request.bytes`: the bytes of requests a broker holds read but not yet
 * answered, over all its connections. Once they reach the bound no connection reads more
 * until answers free some; a connection holding nothing still reads one request, so a
 * request larger than the bound is served, as Kafka's pool lets one allocation go past it.
 * Unbounded (-1) by default, as in Kafka.
 *
 * Connections count their own requests' bytes here and ask `hasRoom`; one that stopped
 * reading for want of room asks `whenFreed` to be told once bytes come back.
 */
import { assert } from '../common/assert.js'

export class RequestMemoryPool {
  private heldBytes = 0
  private waiters = new Set<() => void>()

  /** `maxBytes` null: no bound. */
  constructor(readonly maxBytes: number | null) {
    assert(
      maxBytes === null || (Number.isInteger(maxBytes) && maxBytes >= 0),
      () => `bad pool bound ${maxBytes}`,
    )
  }

  get usedBytes(): number {
    return this.heldBytes
  }

  get hasRoom(): boolean {
    return this.maxBytes === null || this.heldBytes < this.maxBytes
  }

  take(bytes: number): void {
    this.heldBytes += bytes
  }

  give(bytes: number): void {
    if (bytes === 0) return
    this.heldBytes -= bytes
    assert(
      this.heldBytes >= 0,
      () => `request memory pool gave back ${-this.heldBytes} bytes more than it took`,
    )
    if (this.waiters.size === 0 || !this.hasRoom) return
    const waiters = this.waiters
    this.waiters = new Set()
    for (const waiter of waiters) waiter()
  }

  /** Calls `waiter` once, at the next give() that leaves room (a set: asking twice is once). */
  whenFreed(waiter: () => void): void {
    this.waiters.add(waiter)
  }

  forget(waiter: () => void): void {
    this.waiters.delete(waiter)
  }
}

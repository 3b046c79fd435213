/**
 * The simulation's only source of randomness: a seeded sfc32 generator. Every choice the
 * simulator makes (delays, faults, workload) and every `Random` it injects comes from one
 * of these, so a seed replays a run exactly.
 */
export class SimRandom {
  private a: number
  private b: number
  private c: number
  private d: number

  constructor(seed: number) {
    // splitmix32 spreads a small seed over the state.
    let s = seed >>> 0
    const next = (): number => {
      s = (s + 0x9e3779b9) >>> 0
      let z = s
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0
      return (z ^ (z >>> 16)) >>> 0
    }
    this.a = next()
    this.b = next()
    this.c = next()
    this.d = next()
    for (let i = 0; i < 12; i++) this.nextUint32()
  }

  nextUint32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0
    this.d = (this.d + 1) >>> 0
    this.a = this.b ^ (this.b >>> 9)
    this.b = (this.c + (this.c << 3)) >>> 0
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0
    this.c = (this.c + t) >>> 0
    return t >>> 0
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.nextUint32() / 4294967296
  }

  /** Uniform integer in [min, max] (inclusive). */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1))
  }

  chance(p: number): boolean {
    return this.next() < p
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]
  }

  /** An independent stream derived from this one (so adding a consumer of randomness elsewhere does not shift it). */
  fork(): SimRandom {
    return new SimRandom(this.nextUint32())
  }

  bytes(n: number): Buffer {
    const out = Buffer.alloc(n)
    for (let i = 0; i < n; i++) out[i] = this.nextUint32() & 0xff
    return out
  }
}

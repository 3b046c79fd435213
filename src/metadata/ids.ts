import type { Random } from '../common/random.js'

/** A random Kafka Uuid (16 bytes, base64url), never the reserved zero or one ids. */
export function newUuid(random: Random): string {
  for (;;) {
    const id = random.bytes(16).toString('base64url')
    if (id !== 'AAAAAAAAAAAAAAAAAAAAAA' && id !== 'AAAAAAAAAAAAAAAAAAAAAQ') return id
  }
}

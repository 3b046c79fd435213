import { randomBytes } from 'node:crypto'

/** A random Kafka Uuid (16 bytes, base64url), never the reserved zero or one ids. */
export function newUuid(): string {
  for (;;) {
    const id = randomBytes(16).toString('base64url')
    if (id !== 'AAAAAAAAAAAAAAAAAAAAAA' && id !== 'AAAAAAAAAAAAAAAAAAAAAQ') return id
  }
}

import { createRequire } from 'node:module'

type Crc32Module = typeof import('@node-rs/crc32')

let native: Crc32Module | undefined

/** The native module loads on first use: a broker that starts and takes no records never needs it. */
function load(): Crc32Module {
  native = createRequire(import.meta.url)('@node-rs/crc32') as Crc32Module
  return native
}

/**
 * CRC-32C (Castagnoli), the checksum of record batches. @node-rs/crc32 uses SSE4.2/ARMv8
 * instructions (about 6 GB/s here, against under 1 GB/s for table-driven JS).
 */
export function crc32c(bytes: Buffer, initial = 0): number {
  return (native ?? load()).crc32c(bytes, initial) >>> 0
}

/** CRC-32 (IEEE), the checksum of magic 0 and 1 messages. */
export function crc32(bytes: Buffer): number {
  return (native ?? load()).crc32(bytes) >>> 0
}

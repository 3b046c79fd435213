/**
 * Programmer-error assertions. A failed assertion means tidelog itself is wrong, so it
 * throws an AssertionError that only the top level catches (log and exit). Never use
 * this for bad input from the network or the user: those get Kafka error codes.
 */
export class InvariantError extends Error {
  override name = 'InvariantError'
}

export function assert(condition: unknown, message: string | (() => string)): asserts condition {
  if (!condition) {
    throw new InvariantError(typeof message === 'function' ? message() : message)
  }
}

export function unreachable(value: never, what = 'value'): never {
  throw new InvariantError(`unreachable: unexpected ${what} ${String(value)}`)
}

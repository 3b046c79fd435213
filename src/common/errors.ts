/**
 * Operating errors (disk, socket, timeout, fencing, bad input): a stable `code`, an
 * optional `cause`, and whether retrying can help. Kafka outcomes travel as numeric
 * error codes in responses instead (see protocol/error-codes.ts).
 */
export class TidelogError extends Error {
  readonly code: string
  readonly retriable: boolean

  constructor(code: string, message: string, options: { cause?: unknown; retriable?: boolean } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'TidelogError'
    this.code = code
    this.retriable = options.retriable ?? false
  }
}

/** Bytes from the network that do not decode: the connection that sent them is closed. */
export class ProtocolDecodeError extends TidelogError {
  constructor(message: string) {
    super('ERR_PROTOCOL_DECODE', message)
    this.name = 'ProtocolDecodeError'
  }
}

/** A configuration value that is missing, of the wrong type or out of range. */
export class ConfigError extends TidelogError {
  constructor(message: string) {
    super('ERR_CONFIG', message)
    this.name = 'ConfigError'
  }
}

/** A SASL exchange failed: answered SASL_AUTHENTICATION_FAILED with this message, then the connection closes. */
export class SaslAuthenticationError extends TidelogError {
  constructor(message: string) {
    super('ERR_SASL_AUTHENTICATION', message)
    this.name = 'SaslAuthenticationError'
  }
}

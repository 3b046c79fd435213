import { TidelogError } from '../common/errors.js'

/** A SASL exchange failed: answered SASL_AUTHENTICATION_FAILED with this message, then the connection closes. */
export class SaslAuthenticationError extends TidelogError {
  constructor(message: string) {
    super('ERR_SASL_AUTHENTICATION', message)
    this.name = 'SaslAuthenticationError'
  }
}

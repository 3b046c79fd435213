// Kept in common/ so the SCRAM client (protocol/sasl-client.ts) can throw it.
export { SaslAuthenticationError } from '../common/errors.js'

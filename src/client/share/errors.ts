/**
 * Errors of the share consumer's API use. A call the consumer's state does not allow (a
 * poll before the last poll's records are answered in explicit mode, acknowledge() in
 * implicit mode or for a record not in flight) is a ShareConsumerStateError, Java's
 * IllegalStateException. What brokers answer stays a KafkaProtocolError with its Kafka
 * error code.
 */
import { KafkaClientError } from '../errors.js'

export class ShareConsumerStateError extends KafkaClientError {
  constructor(message: string) {
    super('ERR_SHARE_CONSUMER_STATE', message, { retriable: false })
    this.name = 'ShareConsumerStateError'
  }
}

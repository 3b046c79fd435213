/**
 * The client's injected connector: ClientOptions.connector opens every connection, its
 * failures become ConnectionErrors naming the broker (a KafkaClientError passes as it is),
 * and socket.connection.setup.timeout.ms aborts it and destroys a stream that comes late.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { KafkaClient } from '../../src/client/client.js'
import { BrokerConnection, type ConnectionOptions } from '../../src/client/connection.js'
import type { ClientConnector, ConnectTarget } from '../../src/client/connector.js'
import { ConnectionError, SslAuthenticationError } from '../../src/client/errors.js'
import { tcpConnector } from '../../src/client/tcp-connector.js'
import type { ByteStream } from '../../src/common/network.js'
import { ManualClock } from '../helpers/manual-clock.js'
import { startFakeBroker } from './fake-broker.js'

function options(connector: ClientConnector, clock = new ManualClock()): ConnectionOptions {
  return {
    host: 'broker-1',
    port: 9092,
    clientId: 'connector-test',
    connectTimeoutMs: 100,
    requestTimeoutMs: 1000,
    clock,
    label: 'test',
    connector,
  }
}

/** A stream that records whether it was destroyed and carries nothing. */
function idleStream(): ByteStream & { destroyed: boolean } {
  return {
    destroyed: false,
    remoteAddress: 'broker-1:9092',
    writableNeedDrain: false,
    write: () => undefined,
    pause: () => undefined,
    resume: () => undefined,
    onData: () => undefined,
    onDrain: () => undefined,
    onClose: () => undefined,
    destroy() {
      this.destroyed = true
    },
  }
}

describe('client connector', () => {
  it('every connection of a client goes through the connector of its options', async () => {
    const broker = await startFakeBroker()
    const targets: ConnectTarget[] = []
    const client = new KafkaClient({
      bootstrapServers: broker.bootstrap,
      connector: (target, signal) => {
        targets.push(target)
        return tcpConnector(target, signal)
      },
    })
    try {
      await client.refreshMetadata()
      const [host, port] = broker.bootstrap.split(':')
      assert.ok(targets.length >= 1)
      for (const target of targets) {
        assert.deepEqual([target.host, target.port, target.ssl], [host, Number(port), undefined])
        assert.ok(target.maxFrameBytes > 0)
      }
    } finally {
      client.close()
      await broker.close()
    }
  })

  it('a connector that does not answer is aborted at the connect timeout; its late stream is destroyed', async () => {
    const clock = new ManualClock()
    let signal: AbortSignal | null = null
    let deliver: ((stream: ByteStream) => void) | null = null
    const opening = BrokerConnection.open(
      options((_target, s) => {
        signal = s
        return new Promise((resolve) => {
          deliver = resolve
        })
      }, clock),
    )
    await assert.rejects(clock.runUntil(opening), (error: unknown) => {
      assert.ok(error instanceof ConnectionError)
      assert.match(error.message, /connect to broker-1:9092 timed out after 100 ms/)
      return true
    })
    assert.equal((signal as AbortSignal | null)?.aborted, true)
    const late = idleStream()
    ;(deliver as unknown as (stream: ByteStream) => void)(late)
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(late.destroyed, true)
  })

  it("a connector's own error becomes a ConnectionError; a KafkaClientError passes as it is", async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })
    await assert.rejects(BrokerConnection.open(options(() => Promise.reject(refused))), (error: unknown) => {
      assert.ok(error instanceof ConnectionError)
      assert.equal(error.message, 'cannot connect to broker-1:9092: connect ECONNREFUSED')
      assert.equal(error.cause, refused)
      return true
    })
    const untrusted = new SslAuthenticationError('TLS handshake with broker-1:9092 failed')
    await assert.rejects(
      BrokerConnection.open(options(() => Promise.reject(untrusted))),
      (error: unknown) => error === untrusted,
    )
  })
})

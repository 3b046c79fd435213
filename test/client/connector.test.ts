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
import { systemClock } from '../../src/common/clock.js'
import type { ByteStream } from '../../src/common/network.js'
import { encodeResponseFrame } from '../../src/protocol/frame-encoder.js'
import { ApiKey, apis, decodeRequestHeader, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { Reader } from '../../src/protocol/primitives.js'
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

/**
 * A broker in memory behind an injected stream: it answers ApiVersions at once and holds
 * every other request until the test answers it, in whatever order the test chooses.
 */
function heldAnswersBroker(): {
  connector: ClientConnector
  held: { apiKey: number; version: number; correlationId: number }[]
  answer(index: number): void
} {
  let deliver: (chunk: Buffer) => void = () => undefined
  const held: { apiKey: number; version: number; correlationId: number }[] = []
  const reply = (apiKey: number, version: number, correlationId: number, body: unknown): void => {
    const frame = Buffer.concat(encodeResponseFrame(apiKey, version, correlationId, body))
    setImmediate(() => deliver(frame))
  }
  const stream: ByteStream = {
    ...idleStream(),
    write(chunks) {
      const frame = Buffer.concat(chunks).subarray(4)
      const apiKey = frame.readInt16BE(0)
      const version = frame.readInt16BE(2)
      const header = decodeRequestHeader(new Reader(frame), apis.get(apiKey)!.requestHeaderVersion(version))
      if (apiKey !== ApiKey.ApiVersions) {
        held.push({ apiKey, version, correlationId: header.correlationId })
        return
      }
      reply(apiKey, version, header.correlationId, {
        ...(apis.get(apiKey)!.defaultResponse() as object),
        apiKeys: [
          { apiKey: ApiKey.ApiVersions, minVersion: 0, maxVersion: 3 },
          { apiKey: ApiKey.Metadata, minVersion: 1, maxVersion: 12 },
        ],
      })
    },
    onData(listener) {
      deliver = listener
    },
  }
  return {
    connector: async () => stream,
    held,
    answer(index) {
      const { apiKey, version, correlationId } = held[index]
      reply(apiKey, version, correlationId, apis.get(apiKey)!.defaultResponse())
    },
  }
}

describe('client connector', () => {
  it('an answer that skips an older request closes the connection and fails both (Kafka: correlation id mismatch)', async () => {
    await loadAllApiCodecs()
    const broker = heldAnswersBroker()
    const connection = await BrokerConnection.open({ ...options(broker.connector), clock: systemClock })
    const metadata = { topics: [], allowAutoTopicCreation: false }
    const first = connection.request(ApiKey.Metadata, metadata)
    const second = connection.request(ApiKey.Metadata, metadata)
    assert.equal(broker.held.length, 2)
    broker.answer(1)
    const outcomes = await Promise.allSettled([first, second])
    for (const outcome of outcomes) {
      assert.equal(outcome.status, 'rejected')
      const error = (outcome as PromiseRejectedResult).reason as ConnectionError
      assert.ok(error instanceof ConnectionError)
      assert.match(
        String((error.cause as Error)?.message),
        /response for correlation id \d+ while \d+ is unanswered/,
      )
    }
    assert.equal(connection.isClosed, true)
  })

  it('answers in order are matched to their requests', async () => {
    await loadAllApiCodecs()
    const broker = heldAnswersBroker()
    const connection = await BrokerConnection.open({ ...options(broker.connector), clock: systemClock })
    const metadata = { topics: [], allowAutoTopicCreation: false }
    const requests = [
      connection.request(ApiKey.Metadata, metadata),
      connection.request(ApiKey.Metadata, metadata),
    ]
    broker.answer(0)
    broker.answer(1)
    await Promise.all(requests)
    assert.equal(connection.isClosed, false)
    connection.close()
  })

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

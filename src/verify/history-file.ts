/**
 * Histories on disk: a streaming reader (a history can be larger than one string may be)
 * and a writer for tools that record one (`tidelog bench produce --history`, the fault suite).
 */

import { once } from 'node:events'
import { createReadStream, createWriteStream, type WriteStream } from 'node:fs'
import { createInterface } from 'node:readline'
import type { Readable } from 'node:stream'
import { HISTORY_FORMAT, HISTORY_VERSION, type History, HistoryParser } from './history.js'

/** Reads and parses a history file, or stdin for '-'; throws HistoryFormatError on bad lines. */
export async function readHistoryFile(path: string): Promise<History> {
  const input: Readable = path === '-' ? process.stdin : createReadStream(path, { encoding: 'utf8' })
  const parser = new HistoryParser()
  const lines = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY })
  for await (const line of lines) parser.add(line)
  return parser.finish()
}

/** Text written per write() call to the file: fewer, larger writes at bench rates. */
const CHUNK_BYTES = 64 * 1024

type Fields = Record<string, string | number | boolean | null | undefined>

/**
 * Appends events to a history file. Each event gets `time` (ms since the epoch) unless the
 * caller gives one. Writes are buffered; `needsDrain` says the file is behind, and a
 * writer producing fast should `await drain()` before adding more.
 */
export class HistoryWriter {
  private buffered = ''
  private failure: Error | null = null

  private constructor(private readonly stream: WriteStream) {
    stream.on('error', (error) => (this.failure = error))
  }

  static async create(path: string): Promise<HistoryWriter> {
    const stream = createWriteStream(path, { encoding: 'utf8' })
    await once(stream, 'open')
    const writer = new HistoryWriter(stream)
    writer.add('header', { format: HISTORY_FORMAT, version: HISTORY_VERSION })
    return writer
  }

  get needsDrain(): boolean {
    return this.stream.writableNeedDrain
  }

  producer(producer: string, idempotent: boolean): void {
    this.add('producer', { producer, idempotent })
  }

  send(fields: {
    producer: string
    seq: number
    topic: string
    value: string
    key?: string | null
    partition?: number
    time?: number
  }): void {
    this.add('send', fields)
  }

  ack(fields: {
    producer: string
    seq: number
    topic: string
    partition: number
    offset: number | null
    time?: number
  }): void {
    this.add('ack', fields)
  }

  fail(fields: { producer: string; seq: number; error?: string; time?: number }): void {
    this.add('fail', fields)
  }

  read(fields: {
    consumer?: string
    topic: string
    partition: number
    offset: number
    key?: string | null
    value: string
    time?: number
  }): void {
    this.add('read', fields)
  }

  covered(fields: {
    consumer?: string
    topic: string
    partition: number
    startOffset: number
    endOffset: number
    time?: number
  }): void {
    this.add('covered', fields)
  }

  async drain(): Promise<void> {
    this.flushBuffer()
    if (this.stream.writableNeedDrain) await once(this.stream, 'drain')
    this.throwIfFailed()
  }

  async close(): Promise<void> {
    this.flushBuffer()
    this.stream.end()
    await once(this.stream, 'finish').catch((error: Error) => (this.failure ??= error))
    this.throwIfFailed()
  }

  private add(type: string, fields: Fields): void {
    this.throwIfFailed()
    const event: Fields = { type }
    if (type !== 'header') event['time'] = fields.time ?? Date.now()
    for (const [name, value] of Object.entries(fields)) if (value !== undefined) event[name] = value
    this.buffered += `${JSON.stringify(event)}\n`
    if (this.buffered.length >= CHUNK_BYTES) this.flushBuffer()
  }

  private flushBuffer(): void {
    if (this.buffered === '') return
    this.stream.write(this.buffered)
    this.buffered = ''
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure
  }
}

import type { RequestContext } from '../request-context.js'

/**
 * One handler per Kafka API. It declares the versions it serves (advertised verbatim in
 * ApiVersions, so advertise only what is served) and returns the response, or null when
 * the request gets no response (Produce with acks=0).
 */
export interface ApiHandler<Request = never, Response = unknown> {
  readonly apiKey: number
  readonly minVersion: number
  readonly maxVersion: number
  handle(context: RequestContext, request: Request): Response | null | Promise<Response | null>
  /** True when the connection must not read further requests until this one finishes. */
  holdsConnection?(request: Request): boolean
}

// biome-ignore lint/suspicious/noExplicitAny: handlers of different message types share one table
export type AnyApiHandler = ApiHandler<any, unknown>

export class HandlerRegistry {
  private readonly byKey = new Map<number, AnyApiHandler>()

  constructor(handlers: readonly AnyApiHandler[]) {
    for (const handler of handlers) {
      if (this.byKey.has(handler.apiKey)) throw new Error(`two handlers for api key ${handler.apiKey}`)
      this.byKey.set(handler.apiKey, handler)
    }
  }

  get(apiKey: number): AnyApiHandler | undefined {
    return this.byKey.get(apiKey)
  }

  /** Served ranges ordered by api key, for ApiVersions. */
  ranges(): { apiKey: number; minVersion: number; maxVersion: number }[] {
    return [...this.byKey.values()]
      .map(({ apiKey, minVersion, maxVersion }) => ({ apiKey, minVersion, maxVersion }))
      .sort((a, b) => a.apiKey - b.apiKey)
  }
}

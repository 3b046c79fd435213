/**
 * Confluent Schema Registry's errors: an HTTP status and an `error_code` (the status, or
 * the status and two more digits), sent as `{"error_code": N, "message": "..."}`. The
 * messages follow Confluent's (io.confluent.kafka.schemaregistry.rest.exceptions.Errors),
 * since clients and people match on them.
 */
export class RegistryError extends Error {
  constructor(
    readonly status: number,
    readonly errorCode: number,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options)
  }

  get body(): { error_code: number; message: string } {
    return { error_code: this.errorCode, message: this.message }
  }
}

/**
 * This broker is not the registry's writer, which runs in another process and answers at
 * `writerUrl`: the HTTP layer forwards the request there (as Confluent's followers forward
 * to their leader). Unforwarded, it is Confluent's 50004.
 */
export class NotWriterError extends RegistryError {
  constructor(
    readonly writerUrl: string,
    writer: number,
  ) {
    super(500, 50004, `Writes go to the schema registry of broker ${writer} at ${writerUrl}`)
  }
}

export const Errors = {
  subjectNotFound: (subject: string) => new RegistryError(404, 40401, `Subject '${subject}' not found.`),
  versionNotFound: (version: number | string) =>
    new RegistryError(404, 40402, `Version ${version} not found.`),
  schemaNotFound: (id?: number) =>
    new RegistryError(404, 40403, id === undefined ? 'Schema not found' : `Schema ${id} not found`),
  subjectSoftDeleted: (subject: string) =>
    new RegistryError(
      404,
      40404,
      `Subject '${subject}' was soft deleted.Set permanent=true to delete permanently`,
    ),
  subjectNotSoftDeleted: (subject: string) =>
    new RegistryError(
      404,
      40405,
      `Subject '${subject}' was not deleted first before being permanently deleted`,
    ),
  versionSoftDeleted: (subject: string, version: number) =>
    new RegistryError(
      404,
      40406,
      `Subject '${subject}' Version ${version} was soft deleted.Set permanent=true to delete permanently`,
    ),
  versionNotSoftDeleted: (subject: string, version: number) =>
    new RegistryError(
      404,
      40407,
      `Subject '${subject}' Version ${version} was not deleted first before being permanently deleted`,
    ),
  subjectConfigNotFound: (subject: string) =>
    new RegistryError(
      404,
      40408,
      `Subject '${subject}' does not have subject-level compatibility configured`,
    ),
  subjectModeNotFound: (subject: string) =>
    new RegistryError(404, 40409, `Subject '${subject}' does not have subject-level mode configured`),
  incompatible: (subject: string, details: readonly string[]) =>
    new RegistryError(
      409,
      409,
      `Schema being registered is incompatible with an earlier schema for subject "${subject}", details: [${details.join(', ')}]`,
    ),
  invalidSchema: (detail: string) => new RegistryError(422, 42201, `Invalid schema ${detail}`),
  invalidVersion: (version: string) =>
    new RegistryError(
      422,
      42202,
      `The specified version '${version}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string "latest"`,
    ),
  invalidCompatibilityLevel: (level: unknown) =>
    new RegistryError(
      422,
      42203,
      `Invalid compatibility level ${String(level)}. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive`,
    ),
  invalidMode: (mode: unknown) =>
    new RegistryError(
      422,
      42204,
      `Invalid mode ${String(mode)}. Valid values are READWRITE, READONLY and IMPORT`,
    ),
  operationNotPermitted: (message: string) => new RegistryError(422, 42205, message),
  referenceExists: (message: string) => new RegistryError(422, 42206, message),
  invalidSubject: (subject: string) => new RegistryError(422, 42208, `Invalid subject ${subject}`),
  unprocessable: (message: string) => new RegistryError(422, 422, message),
  badRequest: (message: string) => new RegistryError(400, 400, message),
  // Confluent's 401 body is its REST layer's (error_code 401); 40301 is its authorizer's.
  unauthorized: () => new RegistryError(401, 401, 'Unauthorized'),
  forbidden: (message: string) => new RegistryError(403, 40301, message),
  notFound: () => new RegistryError(404, 404, 'HTTP 404 Not Found'),
  methodNotAllowed: () => new RegistryError(405, 405, 'HTTP 405 Method Not Allowed'),
  unsupportedMediaType: () => new RegistryError(415, 415, 'HTTP 415 Unsupported Media Type'),
  bodyTooLarge: (maxBytes: number) =>
    new RegistryError(413, 413, `Request body larger than ${maxBytes} bytes`),
  storeError: (message: string, cause?: unknown) => new RegistryError(500, 50001, message, { cause }),
  timeout: (message: string) => new RegistryError(500, 50002, message),
  forwardingFailed: (message: string, cause?: unknown) => new RegistryError(500, 50003, message, { cause }),
  unknownLeader: (message: string) => new RegistryError(500, 50004, message),
} as const

'use strict'
// Stands in for thread-stream, which pino loads for its transports: those run in worker
// threads started from pino's own files, which the bundle does not have, and tidelog uses
// none. Leaving it out saves loading worker_threads' stream machinery at every start.
module.exports = class ThreadStream {
  constructor() {
    throw new Error('pino transports are not available in the tidelog bundle (tidelog logs to stdout)')
  }
}

/**
 * Run by log-guard.test.ts as its own `node --test` process: one test whose broker logger
 * writes an error line, allowed or not (LOG_GUARD_FIXTURE=unexpected|allowed|process).
 */
import { test } from 'node:test'
import { allowErrorLogs, guardedLogger, recordErrorLine } from './log-guard.js'

const mode = process.env['LOG_GUARD_FIXTURE']

test(`a broker logs an error (${mode})`, () => {
  if (mode === 'allowed') allowErrorLogs(/"msg":"disk on fire"/)
  if (mode === 'process')
    recordErrorLine('broker 7 (pid 1)', '{"level":60,"msg":"every log dir is offline: stopping the broker"}')
  else guardedLogger('broker-0').error({ dir: '/data' }, 'disk on fire')
  guardedLogger('broker-0').warn('a warning is not an error')
})

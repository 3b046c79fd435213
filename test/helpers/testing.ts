/**
 * tidelog/testing's startCluster with the log guard's logger (log-guard.ts), unless the
 * test brings its own: an unexpected error-level line of its brokers fails the test.
 */
import {
  startCluster as startTestingCluster,
  type TestCluster,
  type TestClusterOptions,
} from '../../src/testing/index.js'
import { guardedLogger } from './log-guard.js'

export type { TestCluster }

export function startCluster(options: TestClusterOptions = {}): Promise<TestCluster> {
  return startTestingCluster({ logger: guardedLogger('tidelog/testing broker'), ...options })
}

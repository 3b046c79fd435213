import { type Logger, pino } from 'pino'

export type { Logger }

/**
 * pino: structured JSON logs at low cost. TIDELOG_LOG_LEVEL overrides the level
 * (trace|debug|info|warn|error|silent); tests default to 'warn' through the environment.
 */
export function createLogger(name: string, level?: string): Logger {
  return pino({
    name,
    level: level ?? process.env['TIDELOG_LOG_LEVEL'] ?? 'info',
    base: undefined,
  })
}

export const silentLogger: Logger = pino({ level: 'silent' })

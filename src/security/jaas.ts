/**
 * The JAAS text Kafka takes in `sasl.jaas.config` properties:
 *   org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";
 * one login module, its control flag, then `key=value` options (values quoted or bare).
 */
import { ConfigError } from '../common/errors.js'

export interface JaasEntry {
  readonly loginModule: string
  readonly flag: string
  readonly options: ReadonlyMap<string, string>
}

const FLAGS = ['required', 'requisite', 'sufficient', 'optional']

export function parseJaasConfig(text: string, property: string): JaasEntry {
  let i = 0
  const skipSpace = (): void => {
    while (i < text.length && /\s/.test(text[i])) i++
  }
  const word = (): string => {
    skipSpace()
    const start = i
    while (i < text.length && /[^\s=;"]/.test(text[i])) i++
    return text.slice(start, i)
  }
  const loginModule = word()
  const flag = word().toLowerCase()
  if (loginModule === '' || !FLAGS.includes(flag))
    throw new ConfigError(`${property}: expected "<LoginModule> required key=\\"value\\" ...;"`)
  const options = new Map<string, string>()
  for (;;) {
    skipSpace()
    if (i >= text.length) throw new ConfigError(`${property}: the JAAS entry must end with ';'`)
    if (text[i] === ';') break
    const key = word()
    skipSpace()
    if (key === '' || text[i] !== '=')
      throw new ConfigError(`${property}: expected key=value at "${text.slice(i, i + 20)}"`)
    i++
    skipSpace()
    let value: string
    if (text[i] === '"') {
      const end = text.indexOf('"', i + 1)
      if (end < 0) throw new ConfigError(`${property}: unterminated quoted value of ${key}`)
      value = text.slice(i + 1, end)
      i = end + 1
    } else value = word()
    options.set(key, value)
  }
  if (text.slice(i + 1).trim() !== '')
    throw new ConfigError(`${property}: only one login module is supported`)
  return { loginModule, flag, options }
}

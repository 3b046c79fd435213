/**
 * Principals as Kafka names them (`User:<name>`): from a SASL username, or from a TLS client
 * certificate through `ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper: `DEFAULT`
 * keeps the RFC 2253 distinguished name; `RULE:pattern/replacement/[LU]` rewrites a DN the
 * pattern matches whole, then lower- or upper-cases it; the first matching rule wins, and a
 * DN no rule matches fails the connection).
 */
import { ConfigError } from '../common/errors.js'

export interface KafkaPrincipal {
  readonly type: 'User'
  readonly name: string
  /** Authenticated with a delegation token (SCRAM tokenauth): may not create or renew tokens. */
  readonly tokenAuthenticated?: boolean
}

export const ANONYMOUS: KafkaPrincipal = { type: 'User', name: 'ANONYMOUS' }

export function principalText(principal: KafkaPrincipal): string {
  return `${principal.type}:${principal.name}`
}

type Rule =
  | { readonly kind: 'default' }
  | { readonly kind: 'rule'; pattern: RegExp; replacement: string; caseFold: '' | 'L' | 'U' }

export class NoMatchingRuleError extends Error {
  constructor(dn: string) {
    super(`No rule of ssl.principal.mapping.rules applies to ${dn}`)
    this.name = 'NoMatchingRuleError'
  }
}

export class SslPrincipalMapper {
  private readonly rules: readonly Rule[]

  constructor(rulesText: string) {
    this.rules = parseRules(rulesText)
  }

  /** The principal name of a certificate subject DN; throws NoMatchingRuleError. */
  nameOf(dn: string): string {
    for (const rule of this.rules) {
      if (rule.kind === 'default') return dn
      rule.pattern.lastIndex = 0
      if (!rule.pattern.test(dn)) continue
      const name = dn.replace(rule.pattern, rule.replacement)
      return rule.caseFold === 'L' ? name.toLowerCase() : rule.caseFold === 'U' ? name.toUpperCase() : name
    }
    throw new NoMatchingRuleError(dn)
  }
}

/** Kafka's rule grammar; `/` inside a pattern or replacement is escaped as `\/`. */
const RULE = /^\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)\/((?:\\.|[^\\/])*)\/([LU]?))\s*(?:,|\n|$)/

function parseRules(text: string): Rule[] {
  const rules: Rule[] = []
  let rest = text.trim()
  if (rest === '') return [{ kind: 'default' }]
  while (rest.length > 0) {
    const match = RULE.exec(rest)
    if (!match) throw new ConfigError(`ssl.principal.mapping.rules: invalid rule at "${rest}"`)
    if (match[1]) rules.push({ kind: 'default' })
    else {
      let pattern: RegExp
      try {
        // Java's Matcher.matches(): the pattern must match the whole DN.
        pattern = new RegExp(`^(?:${match[2].replace(/\\\//g, '/')})$`)
      } catch (error) {
        throw new ConfigError(
          `ssl.principal.mapping.rules: invalid pattern ${match[2]}: ${(error as Error).message}`,
        )
      }
      rules.push({
        kind: 'rule',
        pattern,
        replacement: match[3].replace(/\\\//g, '/'),
        caseFold: match[4] as '' | 'L' | 'U',
      })
    }
    rest = rest.slice(match[0].length).trim()
  }
  return rules
}

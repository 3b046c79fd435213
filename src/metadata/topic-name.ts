/** Kafka's topic name rules (org.apache.kafka.common.internals.Topic). */
const LEGAL_TOPIC_NAME = /^[a-zA-Z0-9._-]+$/
export const MAX_TOPIC_NAME_LENGTH = 249

/** Legal characters, 1 to 249 of them, and not "." or "..". */
export function isValidTopicName(name: string): boolean {
  return (
    name.length > 0 &&
    name.length <= MAX_TOPIC_NAME_LENGTH &&
    name !== '.' &&
    name !== '..' &&
    LEGAL_TOPIC_NAME.test(name)
  )
}

/** Why a name is illegal, in Kafka's words, or null when it is fine. */
export function topicNameProblem(name: string): string | null {
  if (name.length === 0) return "Topic name is illegal, it can't be empty"
  if (name === '.' || name === '..') return 'Topic name cannot be "." or ".."'
  if (name.length > MAX_TOPIC_NAME_LENGTH) {
    return `Topic name is illegal, it can't be longer than ${MAX_TOPIC_NAME_LENGTH} characters, topic name: ${name}`
  }
  if (!LEGAL_TOPIC_NAME.test(name)) {
    return `Topic name "${name}" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'`
  }
  return null
}

/** '.' and '_' collide in metric names, so Kafka refuses topics that differ only by them. */
export function unifyCollisionChars(name: string): string {
  return name.replace(/\./g, '_')
}

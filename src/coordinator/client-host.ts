/** The member's host as Kafka reports it ("/127.0.0.1"): a connection's address without its port. */
export function clientHostOf(remoteAddress: string): string {
  const colon = remoteAddress.lastIndexOf(':')
  return `/${colon > 0 ? remoteAddress.slice(0, colon) : remoteAddress}`
}

/**
 * The probe's replay on etcd (watch-probe.ts): a watch of the same prefix from a past
 * revision, on a gRPC stream of its own, so that it does not share the stream etcd left behind.
 */
import type { Namespace } from 'etcd3'
import type { Logger } from '../../common/logger.js'
import type { ProbeReplay } from './watch-probe.js'

export function openEtcdReplay(
  namespace: Namespace,
  prefix: string,
  fromRevision: number,
  onRevision: (revision: number) => void,
  onCompacted: () => void,
  logger: Logger,
): ProbeReplay {
  const watcher = namespace.watch().prefix(prefix).startRevision(String(fromRevision)).watcher()
  // etcd3 throws on the answer to a cancel of a watch etcd already cancelled (EtcdWatch).
  let cancelledByEtcd = false
  watcher.on('data', (response) => {
    for (const event of response.events) onRevision(Number(event.kv.mod_revision))
  })
  watcher.on('error', () => {
    // etcd3 emits 'error' only for a cancellation by etcd: the start revision was compacted.
    cancelledByEtcd = true
    onCompacted()
  })
  watcher.on('disconnected', (err) => logger.debug({ err }, 'etcd watch replay disconnected; resuming'))
  return {
    cancel: () => {
      if (cancelledByEtcd) return
      watcher.cancel().catch((err: unknown) => logger.debug({ err }, 'etcd watch replay cancel failed'))
    },
  }
}

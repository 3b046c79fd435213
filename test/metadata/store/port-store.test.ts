/**
 * The store as brokers in worker threads see it (port-store.ts): the metadata store contract
 * through a PortStoreClient whose StoreHost serves an embedded store over a MessageChannel,
 * as the main thread serves each broker thread. Both ends are in this thread here; a
 * MessagePort delivers across threads the same way, by the event loop, in order.
 */
import { MessageChannel } from 'node:worker_threads'
import { EmbeddedStore } from '../../../src/metadata/store/embedded-store.js'
import { PortStoreClient, StoreHost } from '../../../src/metadata/store/port-store.js'
import { ManualClock } from '../../storage/helpers.js'
import { metadataStoreContract } from './contract.js'

metadataStoreContract(
  'store over a message port',
  async () => {
    const clock = new ManualClock()
    const embedded = await EmbeddedStore.open({ clock })
    const channel = new MessageChannel()
    const host = new StoreHost(embedded, channel.port1)
    const store = new PortStoreClient(channel.port2, embedded.limits)
    return {
      store,
      suspendKeepAlive: (lease) => embedded.suspendKeepAlive(lease.id),
      elapse: async (ms) => {
        clock.advance(ms)
        // The expiry is the host's; its news crosses the port a loop turn or two later.
        for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve))
      },
      close: async () => {
        host.close()
        channel.port2.close()
        await embedded.close()
      },
    }
  },
  { waitMs: 2000 },
)

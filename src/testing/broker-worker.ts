/**
 * Entry module of a broker thread of tidelog/testing (`startCluster({ workerThreads: true })`):
 * the broker built, as in one thread, from Node's parts wrapped by fault-parts.ts, with the
 * link table and its death flag shared with the main thread (thread-parts.ts). The fault
 * API's operations arrive as calls (server/broker-thread.ts); kill is already in effect
 * through the shared flag when its call arrives, which then does what a dying process's OS
 * does: closes its connections, listeners and locks.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { systemClock } from '../common/clock.js'
import { systemRandom } from '../common/random.js'
import { nodeFileSystem } from '../runtime/node-file-system.js'
import { nodeNetwork } from '../runtime/node-network.js'
import { Broker } from '../server/broker.js'
import { brokerConfigFromProperties } from '../server/broker-config.js'
import { type BrokerThreadInit, serveBrokerThread } from '../server/broker-thread.js'
import {
  FaultyFileSystem,
  FaultyNetwork,
  keepAliveElsewhere,
  ProcessClock,
  ProcessStore,
} from './fault-parts.js'
import { type SharedLinkState, SharedLinks, SharedProcessState } from './thread-parts.js'

serveBrokerThread(async (init: BrokerThreadInit<SharedLinkState>, { store: portStore, logger }) => {
  const id = init.nodeId
  const links = new SharedLinks(init.extra)
  const process = new SharedProcessState(init.extra.dead, id)
  const fileSystem = new FaultyFileSystem(nodeFileSystem, process, (ms) => sleep(ms))
  const network = new FaultyNetwork(nodeNetwork, id, process, links)
  const store = new ProcessStore(portStore, process, keepAliveElsewhere)
  const broker = await Broker.start(brokerConfigFromProperties(new Map(init.properties)), {
    clock: new ProcessClock(systemClock, process),
    random: systemRandom,
    fileSystem,
    network,
    store,
    logger,
  })
  const kill = async (): Promise<void> => {
    process.kill()
    network.kill()
    await Promise.all([fileSystem.kill(), broker.closeHttpListeners().catch(() => undefined)])
  }
  return {
    broker,
    ops: {
      kill,
      powerLoss: async () => {
        await kill()
        return fileSystem.losePageCache()
      },
      pause: () => process.pause(),
      resume: () => process.resume(),
      cutStoreLink: () => store.cutLink(),
      heal: () => {
        links.wakeWaiters()
        store.healLink()
      },
      slowDisk: (ms) => {
        fileSystem.slowMs = ms as number
      },
      diskFull: (full) => {
        fileSystem.full = full as boolean
      },
      isLeader: (args) => {
        const { topic, partition } = args as { topic: string; partition: number }
        return broker.replicaManager.getPartition(topic, partition)?.isLeader === true
      },
      createTopics: (args) => {
        const [topics, options] = args as Parameters<Broker['topicAdmin']['createTopics']>
        return broker.topicAdmin.createTopics(topics, options)
      },
      electPreferredLeader: async (args) => {
        const controller = broker.isController ? broker.controller : null
        if (!controller) return false
        await controller.electPreferredLeaders(new Set([args as string]))
        return true
      },
    },
  }
})

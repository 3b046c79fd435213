/**
 * The coordinators a broker hosts, composed as Kafka's BrokerServer starts them beside its
 * replica manager: consumer groups and offsets, share-partition state (KIP-932),
 * transactions, and the KIP-890 verification of transactional produce. Apart from
 * broker.ts so the broker's constructor reads as its list of services.
 */

import type { Transport } from '../common/network.js'
import type { BrokerId } from '../common/types.js'
import { type CoordinatorHost, GroupCoordinator } from '../coordinator/group-coordinator.js'
import { ShareCoordinator } from '../coordinator/share/share-coordinator.js'
import { TransactionCoordinator } from '../coordinator/transaction/transaction-coordinator.js'
import { CoordinatorTransactionVerifier } from '../coordinator/transaction/transaction-verifier.js'
import type { ProducerIdManager } from '../metadata/producer-id-manager.js'
import type { TopicAdmin } from '../metadata/topic-admin.js'
import type { BrokerConfig } from './broker-config.js'
import type { BrokerServices } from './broker-services.js'
import {
  groupCoordinatorConfig,
  shareCoordinatorConfig,
  transactionCoordinatorConfig,
} from './coordinator-configs.js'

/** What the coordinators use of their broker. */
export interface CoordinatorsBroker extends CoordinatorHost {
  readonly config: BrokerConfig
  readonly topicAdmin: TopicAdmin
  readonly producerIdManager: ProducerIdManager
}

export interface BrokerCoordinators {
  readonly groupCoordinator: GroupCoordinator
  readonly shareCoordinator: ShareCoordinator
  readonly transactionCoordinator: TransactionCoordinator
  /** The verifier this broker built (closed at stop, whatever the broker's transactionVerifier is). */
  readonly coordinatorVerifier: CoordinatorTransactionVerifier
  /** How the share coordinator's requests reach other brokers. */
  readonly interBroker: NonNullable<BrokerServices['interBroker']>
}

/**
 * Builds the coordinators over `broker`; `dial` opens a transport to the inter-broker
 * listener (transaction markers and share state requests), `brokerAddress` finds a broker there.
 */
export function composeCoordinators(
  broker: CoordinatorsBroker,
  dial: (clientId: string) => Transport,
  brokerAddress: (nodeId: BrokerId) => { host: string; port: number } | undefined,
): BrokerCoordinators {
  const config = broker.config
  const groupCoordinator = new GroupCoordinator(broker, groupCoordinatorConfig(config))
  const shareCoordinator = new ShareCoordinator(broker, shareCoordinatorConfig(config))
  const txnConfig = transactionCoordinatorConfig(config)
  const txnHost = {
    nodeId: config.nodeId,
    clock: broker.clock,
    logger: broker.logger,
    replicaManager: broker.replicaManager,
    metadataImage: () => broker.metadataImage(),
    topicAdmin: broker.topicAdmin,
    producerIdManager: broker.producerIdManager,
    transport: dial(`broker-${config.nodeId}-txn`),
    brokerAddress,
  }
  const interBroker = {
    transport: dial(`broker-${config.nodeId}-share`),
    brokerAddress,
  }
  const transactionCoordinator = new TransactionCoordinator(txnHost, txnConfig)
  const coordinatorVerifier = new CoordinatorTransactionVerifier(txnHost, transactionCoordinator, txnConfig)
  return { groupCoordinator, shareCoordinator, transactionCoordinator, coordinatorVerifier, interBroker }
}

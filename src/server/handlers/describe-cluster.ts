/**
 * DescribeCluster (key 60).
 * Behavior: the registered brokers, the controller id and the cluster id, from the
 * metadata image. tidelog's brokers are BROKERS endpoints: a request for CONTROLLERS gets
 * MISMATCHED_ENDPOINT_TYPE, any other type UNSUPPORTED_ENDPOINT_TYPE.
 * Version notes: v0 flexible; v1 adds endpointType (request and response); v2 (KIP-1073)
 * includeFencedBrokers and isFenced: every broker in tidelog's image is registered and
 * unfenced, so the flag changes nothing and isFenced is false.
 * clusterAuthorizedOperations is Kafka's "omitted" sentinel unless asked for; when asked,
 * the cluster operations the principal may do (every one without an authorizer), or 0 for
 * a principal without DESCRIBE on the cluster, as Kafka answers (no error).
 */
import { endpointFor } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DescribeClusterRequest,
  type DescribeClusterResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

const ENDPOINT_BROKERS = 1
const ENDPOINT_CONTROLLERS = 2
const AUTHORIZED_OPERATIONS_OMITTED = -2147483648

export const describeClusterHandler: ApiHandler<DescribeClusterRequest, DescribeClusterResponse> = {
  apiKey: ApiKey.DescribeCluster,
  minVersion: 0,
  maxVersion: 2,
  handle(context, request) {
    const image = context.broker.metadataImage()
    const base = {
      throttleTimeMs: 0,
      endpointType: ENDPOINT_BROKERS,
      clusterId: image.clusterId,
      controllerId: image.controllerId,
      brokers: [] as DescribeClusterResponse['brokers'],
      clusterAuthorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
    }
    const requested = context.apiVersion >= 1 ? request.endpointType : ENDPOINT_BROKERS
    if (requested !== ENDPOINT_BROKERS) {
      const mismatched = requested === ENDPOINT_CONTROLLERS
      return {
        ...base,
        errorCode: mismatched ? ErrorCode.MISMATCHED_ENDPOINT_TYPE : ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
        errorMessage: mismatched
          ? 'The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER'
          : `Unsupported endpoint type ${requested}`,
      }
    }
    return {
      ...base,
      errorCode: ErrorCode.NONE,
      errorMessage: null,
      brokers: [...image.brokers.values()].flatMap((b) => {
        const endpoint = endpointFor(b, context.connection.listenerName)
        return endpoint
          ? [{ brokerId: b.nodeId, host: endpoint.host, port: endpoint.port, rack: b.rack, isFenced: false }]
          : []
      }),
      // Kafka: 0 for a principal that may not describe the cluster, not an error.
      clusterAuthorizedOperations: !request.includeClusterAuthorizedOperations
        ? AUTHORIZED_OPERATIONS_OMITTED
        : context.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
          ? context.authorizedOperations(ResourceType.CLUSTER, CLUSTER_NAME)
          : 0,
    }
  },
}

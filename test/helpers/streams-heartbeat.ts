/**
 * The StreamsGroupHeartbeat body the streams tests send over raw requests: every field a
 * member leaves out when it has nothing new to say (null, or -1 for the rebalance timeout),
 * with the test's own fields over them.
 */
export function streamsHeartbeatBody(groupId: string, memberId: string, fields: object = {}) {
  return {
    groupId,
    memberId,
    endpointInformationEpoch: 0,
    instanceId: null,
    rackId: null,
    rebalanceTimeoutMs: -1,
    topology: null,
    activeTasks: null,
    standbyTasks: null,
    warmupTasks: null,
    processId: null,
    userEndpoint: null,
    clientTags: null,
    taskOffsets: null,
    taskEndOffsets: null,
    shutdownApplication: false,
    ...fields,
  }
}

/** The fields of a member joining (epoch 0) with `topology`: no tasks yet, a 30 s rebalance timeout. */
export function streamsJoinFields(topology: unknown, processId: string) {
  return {
    memberEpoch: 0,
    rebalanceTimeoutMs: 30_000,
    topology,
    activeTasks: [],
    standbyTasks: [],
    warmupTasks: [],
    processId,
  }
}

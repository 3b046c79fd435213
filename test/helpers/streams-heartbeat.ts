/**
 * The join the streams tests send over raw requests. The rest of a StreamsGroupHeartbeat
 * body (every field a member leaves out when it has nothing new to say) is rawCall's: it
 * starts from the generated request's defaults.
 */

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

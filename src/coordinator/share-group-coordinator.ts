/**
 * The group coordinator's share-group side (KIP-932): ShareGroupHeartbeat and
 * ShareGroupDescribe on the share groups of each __consumer_offsets shard led here, routed
 * as every group request is (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS by the runtime).
 *
 * The groups live beside the shard's classic and consumer groups (`shard.shareGroups`) and
 * are written to its partition as Kafka's ShareGroup* records (share-group-records.ts): each
 * step writes what it changed, one write at a time per group (the shard's writeStep), and
 * answers once the write is committed; a new coordinator replays them, so group and member
 * epochs and assignments survive a failover. A group id names one group of one type: a
 * share heartbeat or describe of a classic or consumer group answers GROUP_ID_NOT_FOUND
 * ("is not a share group"), as Kafka.
 */
import type { Clock } from '../common/clock.js'
import type { ClusterImage } from '../metadata/cluster-image.js'
import { ErrorCode } from '../protocol/error-codes.js'
import type { GroupCoordinatorShard } from './group-coordinator-shard.js'
import { type CoordinatorRecord, diffRecords } from './records.js'
import {
  expireShareMembers,
  newShareGroup,
  nextShareDeadline,
  type ShareGroup,
  type ShareGroupConfig,
  type ShareHeartbeatRequest,
  type ShareHeartbeatResult,
  type ShareTopicsView,
  SIMPLE_ASSIGNOR,
  shareGroupHeartbeat,
  shareGroupStateName,
  shareHeartbeatError,
  toWire,
  validateShareHeartbeat,
} from './share-group.js'
import { shareGroupRecords, snapshotShareGroup } from './share-group-records.js'

export interface ShareGroupCoordinatorDeps {
  /** The loaded shard coordinating a group here, or the error a client must see. */
  route(groupId: string): GroupCoordinatorShard | number
  readonly clock: Clock
  metadataImage(): ClusterImage
  readonly config: ShareGroupConfig
}

export interface ShareGroupDescription {
  readonly groupId: string
  readonly errorCode: number
  readonly errorMessage: string | null
  readonly state: string
  readonly groupEpoch: number
  readonly assignmentEpoch: number
  readonly assignorName: string
  readonly members: readonly {
    memberId: string
    rackId: string | null
    memberEpoch: number
    clientId: string
    clientHost: string
    subscribedTopicNames: string[]
    assignment: { topicId: string; topicName: string; partitions: number[] }[]
  }[]
}

export interface ShareGroupError {
  readonly errorCode: number
  readonly errorMessage: string | null
}

/** Records that the group has state on these partitions of `topicId` (assigned or altered). */
export function markInitialized(group: ShareGroup, topicId: string, partitions: Iterable<number>): void {
  let known = group.initialized.get(topicId)
  if (!known) {
    known = new Set()
    group.initialized.set(topicId, known)
  }
  for (const partition of partitions) known.add(partition)
}

/** How long a share group's refused expiry write waits before it is tried again (as a consumer group's). */
const TIMER_RETRY_BACKOFF_MS = 500

/** The session timer of a share group, apart from the shard's group-id keyed timers. */
function timerKey(groupId: string): string {
  return `\u0001share\u0001${groupId}`
}

export class ShareGroupCoordinator {
  /**
   * Heartbeats that bumped a share group's epoch, once written (Kafka's ShareGroupRebalances
   * sensor, share-group-rebalance-count; a member expiring does not count, as in Kafka).
   */
  rebalances = 0

  constructor(private readonly deps: ShareGroupCoordinatorDeps) {}

  private groupsOf(shard: GroupCoordinatorShard): Map<string, ShareGroup> {
    return shard.shareGroups
  }

  /** Whether `groupId` is a share group of `shard` (a classic or consumer join must not take it). */
  has(shard: GroupCoordinatorShard, groupId: string): boolean {
    return shard.shareGroups.has(groupId)
  }

  /** A shard's share groups for ListGroups (Kafka's protocol type and group type: "share"). */
  list(
    shard: GroupCoordinatorShard,
  ): { groupId: string; protocolType: string; state: 'Empty' | 'Stable'; type: 'share' }[] {
    return [...shard.shareGroups.values()].map((group) => ({
      groupId: group.groupId,
      protocolType: 'share',
      state: shareGroupStateName(group),
      type: 'share' as const,
    }))
  }

  /** A loaded shard's replayed groups: their members' sessions are timed from now. */
  onShardLoaded(shard: GroupCoordinatorShard): void {
    for (const group of shard.shareGroups.values()) this.schedule(shard, group)
  }

  /** ShareGroupHeartbeat: joins (creating the group), heartbeats, leaves. */
  async heartbeat(req: ShareHeartbeatRequest): Promise<ShareHeartbeatResult> {
    const invalid = validateShareHeartbeat(req)
    if (invalid) return invalid
    const shard = this.deps.route(req.groupId)
    if (typeof shard === 'number') return shareHeartbeatError(shard)
    const groups = this.groupsOf(shard)
    let group = groups.get(req.groupId)
    const created = !group
    if (!group) {
      if (shard.groups.has(req.groupId))
        return shareHeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${req.groupId} is not a share group.`)
      if (req.memberEpoch !== 0)
        return shareHeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${req.groupId} not found.`)
      group = newShareGroup(req.groupId)
      groups.set(req.groupId, group)
    }
    const target = group
    // Answered NOT_COORDINATOR if the step never runs (the shard dropped, the group deleted).
    let result = shareHeartbeatError(ErrorCode.NOT_COORDINATOR)
    let bumped = false
    const code = await shard.writeStep(target, () => {
      if (groups.get(req.groupId) !== target) return null
      const epochBefore = target.groupEpoch
      return this.change(
        target,
        () => {
          result = shareGroupHeartbeat(
            target,
            req,
            this.deps.clock.nowMs(),
            this.configOf(req.groupId),
            this.topicsView(),
          )
          // Kafka initializes the share-partitions of a group's assignment: from now on the group
          // has offsets there (DescribeShareGroupOffsets lists them). A member's assignment is sent
          // when it changes, before the member can fetch a partition of it.
          for (const { topicId, partitions } of result.assignment ?? [])
            markInitialized(target, topicId, partitions)
          this.schedule(shard, target)
          bumped = target.groupEpoch > epochBefore
        },
        created
          ? () =>
              groups.get(req.groupId) === target && target.members.size === 0 && groups.delete(req.groupId)
          : undefined,
      )
    })
    if (code !== ErrorCode.NONE) return shareHeartbeatError(code)
    if (bumped) this.rebalances++
    return result
  }

  /**
   * Runs `mutate` on the group and returns the records of what it changed (diffRecords of
   * the group's records before and after) with the undo of the change; `forget` also runs
   * on undo (a group made by a refused step goes).
   */
  private change(
    group: ShareGroup,
    mutate: () => void,
    forget?: () => void,
  ): { records: CoordinatorRecord[]; undo: () => void } {
    const names = new Map<string, string>()
    for (const [name, topic] of this.deps.metadataImage().topics) names.set(topic.topicId, name)
    const topicName = (topicId: string) => names.get(topicId) ?? ''
    const before = shareGroupRecords(group, topicName)
    const restore = snapshotShareGroup(group)
    mutate()
    return {
      records: diffRecords(before, shareGroupRecords(group, topicName)),
      undo: () => {
        restore()
        forget?.()
      },
    }
  }

  /**
   * Changes a share group outside a heartbeat (the share-partitions AlterShareGroupOffsets
   * initialized or DeleteShareGroupOffsets deleted) and writes the change; the write's error code.
   */
  update(group: ShareGroup, mutate: (group: ShareGroup) => void): Promise<number> {
    const shard = this.deps.route(group.groupId)
    if (typeof shard === 'number') return Promise.resolve(shard)
    return shard.writeStep(group, () =>
      shard.shareGroups.get(group.groupId) === group ? this.change(group, () => mutate(group)) : null,
    )
  }

  /**
   * The share group `groupId` for its offsets APIs, or why not: GROUP_ID_NOT_FOUND for an
   * unknown group or one of another type, the routing error (NOT_COORDINATOR, ...) otherwise.
   * With `mustBeEmpty`, a group with members answers NON_EMPTY_GROUP (alter and delete).
   * With `create`, an unknown group id makes a new, empty share group (Kafka's alter does).
   */
  offsetsTarget(groupId: string, mustBeEmpty: boolean, create = false): ShareGroup | ShareGroupError {
    const shard = this.deps.route(groupId)
    if (typeof shard === 'number') return { errorCode: shard, errorMessage: null }
    let group = this.groupsOf(shard).get(groupId)
    if (!group) {
      if (shard.groups.has(groupId) && shard.groups.get(groupId)?.state !== 'Dead')
        return {
          errorCode: ErrorCode.GROUP_ID_NOT_FOUND,
          errorMessage: `Group ${groupId} is not a share group.`,
        }
      if (!create)
        return { errorCode: ErrorCode.GROUP_ID_NOT_FOUND, errorMessage: `Group ${groupId} not found.` }
      group = newShareGroup(groupId)
      this.groupsOf(shard).set(groupId, group)
    }
    if (mustBeEmpty && group.members.size > 0)
      return {
        errorCode: ErrorCode.NON_EMPTY_GROUP,
        errorMessage: `Share group ${groupId} is not empty.`,
      }
    return group
  }

  /**
   * Removes an empty share group (DeleteGroups, after its share-partitions' state is gone):
   * its records get tombstones, so a later coordinator does not bring it back.
   */
  async remove(groupId: string): Promise<number> {
    const target = this.offsetsTarget(groupId, true)
    if (!('groupEpoch' in target)) return target.errorCode
    const shard = this.deps.route(groupId)
    if (typeof shard === 'number') return shard
    const groups = this.groupsOf(shard)
    return shard.writeStep(target, () => {
      if (groups.get(groupId) !== target) return null
      if (target.members.size > 0) return null
      const records = shareGroupRecords(target, () => '').map((r) => ({ key: r.key, value: null }))
      // Kafka's order: the share-partitions' metadata and members first, the group's epoch last.
      records.reverse()
      groups.delete(groupId)
      if (shard.context.isActive) shard.context.timer.cancel(timerKey(groupId))
      return { records, undo: () => groups.set(groupId, target) }
    })
  }

  describe(groupId: string): ShareGroupDescription {
    const fail = (errorCode: number, errorMessage: string | null): ShareGroupDescription => ({
      groupId,
      errorCode,
      errorMessage,
      // Kafka leaves the state of a group it does not describe empty.
      state: '',
      groupEpoch: -1,
      assignmentEpoch: -1,
      assignorName: '',
      members: [],
    })
    const shard = this.deps.route(groupId)
    if (typeof shard === 'number') return fail(shard, null)
    const group = this.groupsOf(shard).get(groupId)
    if (!group) {
      if (shard.groups.has(groupId) && shard.groups.get(groupId)?.state !== 'Dead')
        return fail(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${groupId} is not a share group.`)
      return fail(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${groupId} not found.`)
    }
    const names = new Map<string, string>()
    for (const [name, topic] of this.deps.metadataImage().topics) names.set(topic.topicId, name)
    return {
      groupId,
      errorCode: ErrorCode.NONE,
      errorMessage: null,
      state: shareGroupStateName(group),
      groupEpoch: group.groupEpoch,
      assignmentEpoch: group.assignmentEpoch,
      assignorName: SIMPLE_ASSIGNOR,
      members: [...group.members.values()].map((m) => ({
        memberId: m.memberId,
        rackId: m.rackId,
        memberEpoch: m.memberEpoch,
        clientId: m.clientId,
        clientHost: m.clientHost,
        subscribedTopicNames: [...m.subscribedTopicNames],
        assignment: toWire(m.assignment).map((t) => ({ ...t, topicName: names.get(t.topicId) ?? '' })),
      })),
    }
  }

  /**
   * Arms the group's timer at its next member session deadline (not before `notBeforeMs`);
   * expired members are removed and their records get tombstones.
   */
  private schedule(shard: GroupCoordinatorShard, group: ShareGroup, notBeforeMs = 0): void {
    if (!shard.context.isActive) return
    const deadline = nextShareDeadline(group, this.configOf(group.groupId))
    if (deadline === null) {
      shard.context.timer.cancel(timerKey(group.groupId))
      return
    }
    const live = () => !shard.unloaded && this.groupsOf(shard).get(group.groupId) === group
    shard.context.timer.schedule(timerKey(group.groupId), Math.max(deadline, notBeforeMs), () => {
      if (!live()) return
      void shard
        .writeStep(group, () =>
          live()
            ? this.change(group, () =>
                expireShareMembers(group, this.deps.clock.nowMs(), this.configOf(group.groupId)),
              )
            : null,
        )
        .then((code) => {
          if (!live()) return
          const retryAtMs = code === ErrorCode.NONE ? 0 : this.deps.clock.nowMs() + TIMER_RETRY_BACKOFF_MS
          this.schedule(shard, group, retryAtMs)
        })
    })
  }

  /**
   * A share group's settings: the broker's, with the group's own share.session.timeout.ms,
   * share.heartbeat.interval.ms and share.assignment.interval.ms (group configs, validated
   * when set) read at each heartbeat and each expiry check, as Kafka's coordinator reads them.
   */
  configOf(groupId: string): ShareGroupConfig {
    const set = this.deps.metadataImage().groupConfigs?.get(groupId)
    if (set === undefined) return this.deps.config
    const session = set['share.session.timeout.ms']
    const heartbeat = set['share.heartbeat.interval.ms']
    const assignmentInterval = set['share.assignment.interval.ms']
    return {
      ...this.deps.config,
      ...(session !== undefined && { sessionTimeoutMs: Number(session) }),
      ...(heartbeat !== undefined && { heartbeatIntervalMs: Number(heartbeat) }),
      ...(assignmentInterval !== undefined && { assignmentIntervalMs: Number(assignmentInterval) }),
    }
  }

  private topicsView(): ShareTopicsView {
    const byName = new Map<string, { topicId: string; partitions: number }>()
    for (const [name, topic] of this.deps.metadataImage().topics)
      byName.set(name, { topicId: topic.topicId, partitions: topic.partitions.length })
    return { byName }
  }
}

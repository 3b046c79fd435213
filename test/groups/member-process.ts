/**
 * A kafkajs group member in its own process, so a test can kill -9 it (no LeaveGroup, no
 * more heartbeats). Args: bootstrap groupId topic sessionTimeoutMs. Prints one JSON line
 * per assignment ({"assignment":[...]}) and per message ({"value":"..."}).
 */
import { startConsumer } from './helpers.js'

const [bootstrap, groupId, topic, sessionTimeout] = process.argv.slice(2)
const tracked = await startConsumer(bootstrap, groupId, topic, `member-${process.pid}`, {
  sessionTimeout: Number(sessionTimeout),
})
let reported = ''
let consumed = 0
setInterval(() => {
  const assignment = JSON.stringify(tracked.assignment)
  if (assignment !== reported) {
    reported = assignment
    process.stdout.write(`${JSON.stringify({ assignment: tracked.assignment })}\n`)
  }
  for (; consumed < tracked.values.length; consumed++)
    process.stdout.write(`${JSON.stringify({ value: tracked.values[consumed] })}\n`)
}, 20)

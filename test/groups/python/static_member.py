"""A confluent-kafka static group member (group.instance.id, KIP-345): subscribes, consumes
for the given seconds, prints JSON lines ({"assigned": [...]} / {"revoked": [...]} on each
rebalance callback, {"value": ...} per message), then closes, which for a static member
sends no LeaveGroup; it closes early when its stdin ends (the test is done with it: give it a
pipe, not /dev/null).
Args: bootstrap group topic instance_id seconds."""
import json
import sys
import threading
import time

from confluent_kafka import Consumer

bootstrap, group, topic, instance, seconds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
consumer = Consumer({
    'bootstrap.servers': bootstrap,
    'group.id': group,
    'group.instance.id': instance,
    'auto.offset.reset': 'earliest',
    'session.timeout.ms': 10000,
    'heartbeat.interval.ms': 500,
    'auto.commit.interval.ms': 200,
})


def on_assign(c, partitions):
    print(json.dumps({'assigned': sorted(p.partition for p in partitions)}), flush=True)


def on_revoke(c, partitions):
    print(json.dumps({'revoked': sorted(p.partition for p in partitions)}), flush=True)


consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
deadline = time.time() + seconds
stop = threading.Event()


def stop_when_stdin_ends():
    sys.stdin.read()
    stop.set()


threading.Thread(target=stop_when_stdin_ends, daemon=True).start()
while time.time() < deadline and not stop.is_set():
    message = consumer.poll(0.2)
    if message is None:
        continue
    if message.error():
        print(json.dumps({'error': str(message.error())}), flush=True)
        continue
    print(json.dumps({'value': message.value().decode(), 'partition': message.partition()}), flush=True)
consumer.close()
print(json.dumps({'closed': True}), flush=True)

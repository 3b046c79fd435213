"""A confluent-kafka group member: subscribes, consumes until told to stop, prints JSON lines
({"assignment": [...]} on each rebalance, {"value": ...} per message). Args: bootstrap group
topic seconds close|kill [stdin]. 'close' leaves the group at the end; 'kill' exits without
closing. With 'stdin' it ends early when its stdin ends (the test is done with it)."""
import json
import os
import sys
import threading
import time

from confluent_kafka import Consumer

bootstrap, group, topic, seconds, ending = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
until_stdin_ends = len(sys.argv) > 6 and sys.argv[6] == 'stdin'
consumer = Consumer({
    'bootstrap.servers': bootstrap,
    'group.id': group,
    'auto.offset.reset': 'earliest',
    'session.timeout.ms': 6000,
    'heartbeat.interval.ms': 500,
    'auto.commit.interval.ms': 200,
})


def on_assign(c, partitions):
    print(json.dumps({'assignment': sorted(p.partition for p in partitions)}), flush=True)


def on_revoke(c, partitions):
    print(json.dumps({'assignment': []}), flush=True)


consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
deadline = time.time() + seconds
stop = threading.Event()


def stop_when_stdin_ends():
    sys.stdin.read()
    stop.set()


if until_stdin_ends:
    threading.Thread(target=stop_when_stdin_ends, daemon=True).start()
while time.time() < deadline and not stop.is_set():
    message = consumer.poll(0.2)
    if message is None:
        continue
    if message.error():
        print(json.dumps({'error': str(message.error())}), flush=True)
        continue
    print(json.dumps({'value': message.value().decode(), 'partition': message.partition(), 'offset': message.offset()}), flush=True)
if ending == 'kill':
    os._exit(0)
consumer.close()

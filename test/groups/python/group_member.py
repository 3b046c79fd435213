"""A confluent-kafka group member: subscribes, consumes until told to stop, prints JSON lines
({"assignment": [...]} on each rebalance, {"value": ...} per message). Args: bootstrap group
topic seconds [close|kill]. 'close' leaves the group at the end; 'kill' exits without closing."""
import json
import os
import sys
import time

from confluent_kafka import Consumer

bootstrap, group, topic, seconds, ending = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
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
while time.time() < deadline:
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

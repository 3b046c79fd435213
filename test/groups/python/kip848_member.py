"""A KIP-848 consumer (group.protocol=consumer) on the modern librdkafka given by
LD_LIBRARY_PATH. Prints JSON lines: {"libversion": ...} first, {"assignment": [...]} after each
incremental assign/revoke (the whole set held), {"value": ...} per message, {"error": ...}.
Args: bootstrap group topic stopfile [protocol] (consumer by default, or classic). Consumes until stopfile exists, then closes (leaves the
group with member epoch -1); offsets are auto-committed (OffsetCommit v9 with the epoch)."""
import json
import os
import sys

import confluent_kafka
from confluent_kafka import Consumer

bootstrap, group, topic, stopfile = sys.argv[1:5]
protocol = sys.argv[5] if len(sys.argv) > 5 else 'consumer'
print(json.dumps({'libversion': confluent_kafka.libversion()[0]}), flush=True)
consumer = Consumer({
    'bootstrap.servers': bootstrap,
    'group.id': group,
    'group.protocol': protocol,
    'auto.offset.reset': 'earliest',
    'auto.commit.interval.ms': 200,
    'error_cb': lambda error: print(json.dumps({'error': str(error)}), flush=True),
})
held = set()


def on_assign(c, partitions):
    held.update(p.partition for p in partitions)
    print(json.dumps({'assignment': sorted(held)}), flush=True)


def on_revoke(c, partitions):
    held.difference_update(p.partition for p in partitions)
    print(json.dumps({'assignment': sorted(held)}), flush=True)


consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
while not os.path.exists(stopfile):
    message = consumer.poll(0.2)
    if message is None:
        continue
    if message.error():
        print(json.dumps({'error': str(message.error())}), flush=True)
        continue
    print(json.dumps({'value': message.value().decode(), 'partition': message.partition()}), flush=True)
consumer.close()
print(json.dumps({'closed': True}), flush=True)

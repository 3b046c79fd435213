"""The confluent-kafka (librdkafka) session recorded by test/differential/record.ts.

Usage: python record-confluent.py <bootstrap> <topic> <group>; prints one JSON line with what
the consumer read. Creates the topic (2 partitions), produces 4 records idempotently
(acks=all), consumes them in a group, commits the offsets synchronously and leaves.
"""

import json
import sys
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, group = sys.argv[1:4]
common = {"bootstrap.servers": bootstrap, "client.id": "recorded-ck"}

admin = AdminClient(common)
for future in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).values():
    future.result(30)

producer = Producer({**common, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
for i in range(4):
    producer.produce(topic, key=f"k{i}", value=f"ck-{i}", partition=i % 2, headers=[("h", b"1")])
if producer.flush(30) != 0:
    sys.exit("records not delivered")

consumer = Consumer(
    {
        **common,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
        # The classic protocol, as the other recorded clients: KIP-848's ConsumerGroupHeartbeat
        # has its own sessions (recorded and replayed alike, but not here yet).
        "group.protocol": "classic",
    }
)
consumer.subscribe([topic])
read = []
deadline = time.time() + 30
while len(read) < 4 and time.time() < deadline:
    msg = consumer.poll(0.2)
    if msg is None or msg.error():
        continue
    read.append([msg.partition(), msg.offset(), msg.value().decode()])
consumer.commit(asynchronous=False)
consumer.close()
print(json.dumps({"read": sorted(read)}))

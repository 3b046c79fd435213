"""KIP-392 with librdkafka: a consumer with client.rack reads a partition and reports, from
librdkafka's statistics, which broker it fetched from and which broker leads the partition.

stdin: {"bootstrap", "topic", "partition", "rack", "count", "timeout"}
stdout (last line): {"values": [...], "fetchedFrom": [broker ids seen fetching], "leader": id}
"""
import json
import sys
import time

from confluent_kafka import Consumer, TopicPartition

spec = json.load(sys.stdin)
seen = {"fetchedFrom": set(), "leader": None}


def on_stats(text):
    stats = json.loads(text)
    part = stats.get("topics", {}).get(spec["topic"], {}).get("partitions", {}).get(str(spec["partition"]))
    if part is None:
        return
    # "broker": the broker this partition is fetched from now (the preferred replica when
    # one was named); "leader": the partition's leader.
    if part.get("broker", -1) >= 0:
        seen["fetchedFrom"].add(part["broker"])
    seen["leader"] = part.get("leader")


consumer = Consumer({
    "bootstrap.servers": spec["bootstrap"],
    "group.id": "follower-fetch",
    "client.rack": spec["rack"],
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "statistics.interval.ms": 100,
    "stats_cb": on_stats,
    "log_level": 3,
})
consumer.assign([TopicPartition(spec["topic"], spec["partition"], 0)])
values = []
deadline = time.time() + spec.get("timeout", 30)
while len(values) < spec["count"] and time.time() < deadline:
    msg = consumer.poll(0.2)
    if msg is None or msg.error():
        continue
    values.append(msg.value().decode())
# A few more statistics rounds, so the fetching broker is reported after the reads.
end = time.time() + 1
while time.time() < end:
    consumer.poll(0.1)
consumer.close()
print(json.dumps({"values": values, "fetchedFrom": sorted(seen["fetchedFrom"]), "leader": seen["leader"]}))

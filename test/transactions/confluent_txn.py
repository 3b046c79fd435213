"""confluent-kafka (librdkafka) transactions against tidelog: commit, abort, commit; then
what a read_committed and a read_uncommitted consumer see; then consume-transform-produce
from `inputTopic` with send_offsets_to_transaction, aborted once and committed once, and the
group's committed offsets after each. Spec on stdin as JSON {bootstrap, topic, inputTopic,
transactionalId, partitions}; prints one JSON line."""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

spec = json.load(sys.stdin)
topic = spec["topic"]
partitions = spec["partitions"]

producer = Producer({
    "bootstrap.servers": spec["bootstrap"],
    "transactional.id": spec["transactionalId"],
    "transaction.timeout.ms": 60000,
})
producer.init_transactions(30)
sent = {"commit": [], "abort": []}
for outcome, tag in [("commit", "c1"), ("abort", "a1"), ("commit", "c2")]:
    producer.begin_transaction()
    for i in range(6):
        value = f"{tag}-{i}"
        producer.produce(topic, value=value.encode(), partition=i % partitions)
        sent[outcome].append(value)
    if outcome == "commit":
        producer.commit_transaction(30)
    else:
        # abort_transaction purges what is still queued: flush first, so the aborted records
        # are really in the log (where read_uncommitted sees them and read_committed must not).
        producer.flush(30)
        producer.abort_transaction(30)
producer.flush(10)


def consume(isolation, expected):
    consumer = Consumer({
        "bootstrap.servers": spec["bootstrap"],
        "group.id": f"ck-{isolation}-{time.time()}",
        "isolation.level": isolation,
        "enable.auto.commit": False,
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = []
    deadline = time.time() + 30
    while time.time() < deadline and len(seen) < expected:
        msg = consumer.poll(0.2)
        if msg is None or msg.error():
            continue
        seen.append({"partition": msg.partition(), "offset": msg.offset(), "value": msg.value().decode()})
    # A moment more, so a record that should not be there has its chance to show up.
    end = time.time() + 1
    while time.time() < end:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            seen.append({"partition": msg.partition(), "offset": msg.offset(), "value": msg.value().decode()})
    consumer.close()
    return seen


committed = consume("read_committed", len(sent["commit"]))
uncommitted = consume("read_uncommitted", len(sent["commit"]) + len(sent["abort"]))

# Consume-transform-produce: records of the input topic, transformed into `topic`, with the
# group's offsets sent to the transaction.
source = Producer({"bootstrap.servers": spec["bootstrap"]})
for i in range(4):
    source.produce(spec["inputTopic"], value=f"in-{i}".encode(), partition=0)
source.flush(10)
group = "ck-ctp"
consumer = Consumer({
    "bootstrap.servers": spec["bootstrap"],
    "group.id": group,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
})
consumer.subscribe([spec["inputTopic"]])
inputs = []
deadline = time.time() + 30
while time.time() < deadline and len(inputs) < 4:
    msg = consumer.poll(0.2)
    if msg is not None and not msg.error():
        inputs.append(msg)
positions = [TopicPartition(spec["inputTopic"], 0, inputs[-1].offset() + 1)] if inputs else []


def committed_offset():
    return consumer.committed([TopicPartition(spec["inputTopic"], 0)], timeout=10)[0].offset


ctp = {"inputs": len(inputs)}
for outcome in ["abort", "commit"]:
    producer.begin_transaction()
    for msg in inputs:
        producer.produce(topic, value=f"{outcome}-{msg.value().decode()}".encode(), partition=0)
    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
    if outcome == "commit":
        producer.commit_transaction(30)
    else:
        producer.flush(30)
        producer.abort_transaction(30)
    ctp[f"after_{outcome}"] = committed_offset()
consumer.close()
print(json.dumps({"sent": sent, "committed": committed, "uncommitted": uncommitted, "ctp": ctp}))

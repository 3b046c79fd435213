"""kafka-python (python3-kafka 2.0.2) driver for tidelog's compatibility tests.

Usage: /usr/bin/python3 kp.py <command>, with a JSON spec on stdin; prints one JSON
document on stdout.

Commands:
  produce  {bootstrap, topic, config, messages: [{key, value, headers, partition?}]}
           -> {reports: [{partition, offset}], apiVersion}
  consume  {bootstrap, topic, partitions, count, timeout}
           -> {records: [...]}: KafkaConsumer without a group, assign() + seek_to_beginning
"""

import json
import logging
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

logging.basicConfig(level=logging.CRITICAL)


def text(data):
    return None if data is None else data.decode("utf-8")


def produce(spec):
    config = {"bootstrap_servers": spec["bootstrap"], "client_id": "tidelog-compat"}
    config.update(spec.get("config", {}))
    producer = KafkaProducer(**config)
    futures = []
    for m in spec["messages"]:
        futures.append(
            producer.send(
                spec["topic"],
                value=None if m.get("value") is None else m["value"].encode("utf-8"),
                key=None if m.get("key") is None else m["key"].encode("utf-8"),
                headers=[(k, None if v is None else v.encode("utf-8")) for k, v in m.get("headers", [])],
                partition=m.get("partition"),
            )
        )
    producer.flush(timeout=20)
    reports = []
    for f in futures:
        md = f.get(timeout=20)
        reports.append({"partition": md.partition, "offset": md.offset})
    api_version = list(producer.config["api_version"])
    producer.close(timeout=5)
    return {"reports": reports, "apiVersion": api_version}


def consume(spec):
    consumer = KafkaConsumer(
        bootstrap_servers=spec["bootstrap"],
        client_id="tidelog-compat",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=1000,
    )
    partitions = [TopicPartition(spec["topic"], p) for p in spec["partitions"]]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    records = []
    deadline = time.time() + spec.get("timeout", 20)
    while len(records) < spec["count"] and time.time() < deadline:
        for msg in consumer:
            records.append(
                {
                    "partition": msg.partition,
                    "offset": msg.offset,
                    "key": text(msg.key),
                    "value": text(msg.value),
                    "headers": [[k, text(v)] for k, v in msg.headers],
                }
            )
            if len(records) >= spec["count"]:
                break
    consumer.close()
    return {"records": records}


COMMANDS = {"produce": produce, "consume": consume}

if __name__ == "__main__":
    print(json.dumps(COMMANDS[sys.argv[1]](json.loads(sys.stdin.read()))))

"""Topic readiness probe for tidelog's compatibility tests (confluent-kafka, librdkafka).

Usage: /usr/bin/python3 readiness.py <command>, with a JSON spec on stdin; prints one JSON
document on stdout.

Commands:
  create-produce  {bootstrap, topic, partitions, replicationFactor, records, config, create?}
                  Creates the topic (unless create is false: then the producer's Metadata
                  request auto-creates it) with CreateTopics (operation timeout 30 s, so the
                  broker answers once the topic is ready) and, the moment it answers,
                  produces `records` values "0".."n-1", round robin over the partitions, with
                  a non-idempotent producer and librdkafka's default in-flight limit. Returns
                  {createError, createdAtMs, flushedAtMs, undelivered, failed: [...],
                  logs: [every librdkafka log line of the producer, debug included]}.
  read            {bootstrap, topic, partitions, timeout} -> {records: [[partition, value], ...]}
                  in offset order per partition.
"""

import json
import logging
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def create_produce(spec):
    topic = spec["topic"]
    create_error = None
    if spec.get("create", True):
        admin = AdminClient({"bootstrap.servers": spec["bootstrap"]})
        futures = admin.create_topics(
            [NewTopic(topic, spec["partitions"], spec["replicationFactor"])], operation_timeout=30, request_timeout=40
        )
        try:
            futures[topic].result()
        except Exception as error:  # the test asserts on it
            create_error = str(error)
    created_at = time.time() * 1000

    collect = Collect()
    log = logging.getLogger("readiness-producer")
    log.setLevel(logging.DEBUG)
    log.addHandler(collect)
    config = {
        "bootstrap.servers": spec["bootstrap"],
        "enable.idempotence": False,
        "debug": "broker,topic,msg,protocol",
        "linger.ms": 1,
    }
    config.update(spec.get("config", {}))
    if not config["debug"]:
        del config["debug"]  # "" turns the debug log off (librdkafka refuses an empty value)
    producer = Producer(config, logger=log)
    failed = []

    def on_delivery(err, msg):
        if err is not None:
            failed.append({"value": msg.value().decode(), "error": err.str()})

    partitions = spec["partitions"]
    for i in range(spec["records"]):
        while True:
            try:
                producer.produce(topic, value=str(i).encode(), partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    left = producer.flush(60)
    flushed_at = time.time() * 1000
    return {
        "createError": create_error,
        "createdAtMs": created_at,
        "flushedAtMs": flushed_at,
        "undelivered": left,
        "failed": failed,
        "logs": collect.lines,
    }


def read(spec):
    c = Consumer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "group.id": "tidelog-readiness",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
            "log_level": 3,
        }
    )
    c.assign([TopicPartition(spec["topic"], p, 0) for p in range(spec["partitions"])])
    waiting = set(range(spec["partitions"]))
    records = []
    deadline = time.time() + spec.get("timeout", 30)
    while waiting and time.time() < deadline:
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                waiting.discard(msg.partition())
                continue
            raise Exception(msg.error().str())
        records.append([msg.partition(), msg.value().decode()])
    c.close()
    return {"records": records, "timedOut": bool(waiting)}


COMMANDS = {"create-produce": create_produce, "read": read}

if __name__ == "__main__":
    result = COMMANDS[sys.argv[1]](json.loads(sys.stdin.read()))
    sys.stdout.write(json.dumps(result) + "\n")

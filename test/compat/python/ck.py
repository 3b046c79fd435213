"""confluent-kafka (librdkafka) driver for tidelog's compatibility tests.

Usage: /usr/bin/python3 ck.py <command>, with a JSON spec on stdin; prints one JSON
document on stdout. Keys, values and header values are UTF-8 text or null.

Commands:
  produce     {bootstrap, topic, config, messages: [{key, value, headers, partition?}]}
              -> {reports: [{partition, offset, error}]} in message order
  consume     {bootstrap, topic, assign: [[partition, offset]], config, count?, timeout}
              -> {records: [...], errors: [{code, name, str}]}; stops at EOF of every
              assigned partition, or after `count` records
  watermarks  {bootstrap, topic, partitions} -> {watermarks: [[low, high], ...]}
  times       {bootstrap, topic, queries: [[partition, timestamp]]} -> {offsets: [...]}
  longpoll    {bootstrap, topic, partition, offset, config}: prints {"ready": true} once
              at the end of the log, then {"record": ..., "at": epoch_ms} per record;
              exits when stdin closes
"""

import ctypes
import json
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def text(data):
    return None if data is None else data.decode("utf-8")


def record(msg):
    headers = msg.headers() or []
    # confluent-kafka < 1.8.2 returns None header values without taking a reference
    # (confluentinc/confluent-kafka-python#1191), which crashes the interpreter at exit
    # ("deallocating None"); give back the reference it took from us.
    for _, v in headers:
        if v is None:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(None))
    ts_type, ts = msg.timestamp()
    return {
        "partition": msg.partition(),
        "offset": msg.offset(),
        "key": text(msg.key()),
        "value": text(msg.value()),
        "headers": [[k, text(v)] for k, v in headers],
        "timestamp": ts,
        "timestampType": ts_type,
    }


def error_of(err):
    return {"code": err.code(), "name": err.name(), "str": err.str()}


def consumer(spec, extra=None):
    config = {
        "bootstrap.servers": spec["bootstrap"],
        # librdkafka needs a group id to build a consumer; assign() never joins the group.
        "group.id": "tidelog-compat",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        "log_level": 3,
    }
    config.update(extra or {})
    config.update(spec.get("config", {}))
    return Consumer(config)


def produce(spec):
    config = {"bootstrap.servers": spec["bootstrap"], "log_level": 3}
    config.update(spec.get("config", {}))
    producer = Producer(config)
    reports = [None] * len(spec["messages"])

    def on_delivery(index):
        def callback(err, msg):
            reports[index] = {
                "partition": msg.partition(),
                "offset": msg.offset(),
                "error": None if err is None else error_of(err),
            }

        return callback

    for index, m in enumerate(spec["messages"]):
        kwargs = {"value": m.get("value"), "key": m.get("key"), "on_delivery": on_delivery(index)}
        if m.get("headers") is not None:
            kwargs["headers"] = [(k, v) for k, v in m["headers"]]
        if m.get("partition") is not None:
            kwargs["partition"] = m["partition"]
        producer.produce(spec["topic"], **kwargs)
        producer.poll(0)
    left = producer.flush(spec.get("timeout", 20))
    return {"reports": reports, "undelivered": left}


def consume(spec):
    c = consumer(spec)
    c.assign([TopicPartition(spec["topic"], p, o) for p, o in spec["assign"]])
    waiting = {p for p, _ in spec["assign"]}
    records, errors = [], []
    count = spec.get("count")
    deadline = time.time() + spec.get("timeout", 20)
    while waiting and time.time() < deadline:
        if count is not None and len(records) >= count:
            break
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                if count is None:
                    waiting.discard(msg.partition())
                continue
            errors.append(error_of(msg.error()))
            if spec.get("stopOnError", True):
                break
            continue
        records.append(record(msg))
    c.close()
    return {"records": records, "errors": errors, "timedOut": bool(waiting) and time.time() >= deadline}


def watermarks(spec):
    c = consumer(spec)
    marks = [list(c.get_watermark_offsets(TopicPartition(spec["topic"], p), timeout=10, cached=False))
             for p in spec["partitions"]]
    c.close()
    return {"watermarks": marks}


def times(spec):
    c = consumer(spec)
    # One query per request: a request naming a partition twice is INVALID_REQUEST.
    found = [c.offsets_for_times([TopicPartition(spec["topic"], p, ts)], timeout=10)[0] for p, ts in spec["queries"]]
    c.close()
    return {"offsets": [tp.offset for tp in found], "errors": [None if tp.error is None else error_of(tp.error) for tp in found]}


def longpoll(spec):
    c = consumer(spec)
    c.assign([TopicPartition(spec["topic"], spec["partition"], spec["offset"])])
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    ready = False
    while not stop.is_set():
        msg = c.poll(0.05)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                if not ready:
                    ready = True
                    print(json.dumps({"ready": True}), flush=True)
                continue
            print(json.dumps({"error": error_of(msg.error())}), flush=True)
            continue
        print(json.dumps({"record": record(msg), "at": time.time() * 1000}), flush=True)
    c.close()
    return None


COMMANDS = {"produce": produce, "consume": consume, "watermarks": watermarks, "times": times, "longpoll": longpoll}

if __name__ == "__main__":
    command = COMMANDS[sys.argv[1]]
    result = command(json.loads(sys.stdin.readline() if sys.argv[1] == "longpoll" else sys.stdin.read()))
    if result is not None:
        print(json.dumps(result))

"""confluent-kafka (librdkafka) producer for tidelog's fault-injection suite.

Usage: /usr/bin/python3 producer.py, with one JSON spec line on stdin:
  {bootstrap, topic, partitions, producer, rate, config}
Writes records with value "<producer>-<seq>" to partition seq % partitions, `rate` records a
second, until stdin closes (or a SIGTERM); then flushes (each record ends delivered or failed
within message.timeout.ms) and exits. Prints one JSON line per record handed to produce():
  {"q": seq, "t": ms since the epoch}
one per delivery report (always after the record's "q" line: reports are served by poll()
and flush() on this thread):
  {"s": seq, "p": partition, "o": offset, "e": error name or null, "t": ms}
and a final {"done": true, "sent": n, "undelivered": left}.
"""

import json
import signal
import sys
import threading
import time

from confluent_kafka import Producer

spec = json.loads(sys.stdin.readline())
stop = threading.Event()


def stdin_closed():
    sys.stdin.read()
    stop.set()


threading.Thread(target=stdin_closed, daemon=True).start()
signal.signal(signal.SIGTERM, lambda *_: stop.set())

config = {
    "bootstrap.servers": spec["bootstrap"],
    "log_level": 0,
    "enable.idempotence": False,
    "max.in.flight.requests.per.connection": 1,
    "linger.ms": 5,
    "retry.backoff.ms": 100,
    "request.timeout.ms": 5000,
    "message.timeout.ms": 30000,
    "topic.metadata.refresh.interval.ms": 2000,
}
config.update(spec.get("config", {}))
producer = Producer(config)
out = sys.stdout
lock = threading.Lock()


def now_ms():
    return round(time.time() * 1000, 3)


def report(seq):
    def callback(err, msg):
        line = {
            "s": seq,
            "p": msg.partition(),
            "o": msg.offset(),
            "e": None if err is None else err.name(),
            "t": now_ms(),
        }
        with lock:
            out.write(json.dumps(line) + "\n")

    return callback


name = spec["producer"]
partitions = spec["partitions"]
rate = spec["rate"]
seq = 0
started = time.monotonic()
while not stop.is_set():
    due = int((time.monotonic() - started) * rate)
    while seq < due and not stop.is_set():
        partition = seq % partitions
        try:
            producer.produce(spec["topic"], value=f"{name}-{seq}", partition=partition, on_delivery=report(seq))
        except BufferError:
            producer.poll(0.05)
            continue
        with lock:
            out.write(json.dumps({"q": seq, "t": now_ms()}) + "\n")
        seq += 1
    producer.poll(0.01)
    out.flush()

left = producer.flush(60)
with lock:
    out.write(json.dumps({"done": True, "sent": seq, "undelivered": left}) + "\n")
    out.flush()

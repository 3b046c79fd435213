"""A confluent-kafka producer (librdkafka, enable.metrics.push=true: KIP-714) that produces
one record every 200 ms until STOP_FILE exists. Prints the library version as JSON, then
every telemetry-related error librdkafka logs or reports.

Usage: telemetry_producer.py BOOTSTRAP TOPIC CLIENT_ID STOP_FILE
"""
import json
import os
import sys
import time

from confluent_kafka import Producer

bootstrap, topic, client_id, stop_file = sys.argv[1:5]


def log(event):
    print(json.dumps(event), flush=True)


def on_error(error):
    log({"error": str(error)})


class Logger:
    """confluent-kafka calls logger.log(level, fmt, *args) with Python logging levels."""

    def log(self, level, fmt, *args, **kwargs):
        message = fmt % args if args else fmt
        if level >= 30 and "TELEMETRY" in message.upper():
            log({"error": message})


log({"libversion": __import__("confluent_kafka").libversion()[0]})
producer = Producer(
    {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "enable.metrics.push": True,
        "error_cb": on_error,
        "logger": Logger(),
    }
)
sent = 0
while not os.path.exists(stop_file):
    producer.produce(topic, value=f"v{sent}".encode())
    sent += 1
    producer.poll(0.2)
producer.flush(10)
log({"sent": sent})

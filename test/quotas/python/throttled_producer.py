"""Produces 16 KiB values as fast as librdkafka lets it for a while and prints, as JSON, when
each delivery was acknowledged and the throttle times librdkafka reported (throttle_cb)."""
import json
import sys
import time

from confluent_kafka import Producer

bootstrap, topic, client_id, duration_s = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
throttles_ms = []
deliveries = []
errors = []
start = time.monotonic()


def on_throttle(event):
    throttles_ms.append(round(event.throttle_time * 1000))


def on_delivery(err, msg):
    if err is not None:
        errors.append(str(err))
    else:
        deliveries.append([round((time.monotonic() - start) * 1000), len(msg.value())])


producer = Producer({
    'bootstrap.servers': bootstrap,
    'client.id': client_id,
    'acks': 1,
    'linger.ms': 5,
    # One 64 KiB request at a time rather than pipelined 1 MB batches: each throttle then
    # stays under a window. Kafka's Rate pads windows without samples, so a client recording
    # less than once a window (long throttles) is under-measured, by up to a window in ten.
    'batch.size': 65536,
    'max.in.flight.requests.per.connection': 1,
    'queue.buffering.max.kbytes': 256,
    'throttle_cb': on_throttle,
})
value = b'q' * 16384
while time.monotonic() - start < duration_s:
    try:
        producer.produce(topic, value, on_delivery=on_delivery)
    except BufferError:
        producer.poll(0.01)
    producer.poll(0)
producer.flush(30)
print(json.dumps({'deliveries': deliveries, 'throttlesMs': throttles_ms, 'errors': errors}))

"""librdkafka's share consumer (KIP-932), through confluent-kafka 2.16.1 (librdkafka 2.16).

Run by test/compat/python-share-consumer.test.ts against tidelog and against Apache Kafka
4.4 with the same arguments; prints one JSON line with what each consumer was delivered.

Two share consumers of one group, explicit acknowledgement, alternate polls on one
partition of RECORDS records. The first delivery of v3 is RELEASEd (so it comes again with
delivery count 2), v5 is REJECTed (never again), every other delivery ACCEPTed. The group
reads from the earliest offset (share.auto.offset.reset=earliest set as a group config, as
kafka-configs.sh --entity-type groups would).
"""
import json
import sys
import time

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

RECORDS = 20
RELEASED = 'v3'
REJECTED = 'v5'


def main():
    bootstrap, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
    admin = AdminClient({'bootstrap.servers': bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    setting = ConfigEntry('share.auto.offset.reset', 'earliest', incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group, incremental_configs=[setting])]).values():
        future.result()
    producer = Producer({'bootstrap.servers': bootstrap, 'enable.idempotence': True})
    for i in range(RECORDS):
        producer.produce(topic, value=('v%d' % i).encode())
    assert producer.flush(30) == 0, 'records left unsent'

    config = {'bootstrap.servers': bootstrap, 'group.id': group, 'share.acknowledgement.mode': 'explicit'}
    consumers = {'c1': ShareConsumer(config), 'c2': ShareConsumer(config)}
    for consumer in consumers.values():
        consumer.subscribe([topic])
    deliveries = []
    done = set()
    deadline = time.time() + 60
    while time.time() < deadline and len(done) < RECORDS:
        for name, consumer in consumers.items():
            messages = consumer.poll(0.5) or []
            for message in messages:
                if message.error():
                    deliveries.append({'consumer': name, 'error': str(message.error())})
                    continue
                value = message.value().decode()
                count = message.delivery_count()
                if value == RELEASED and count == 1:
                    ack = AcknowledgeType.RELEASE
                elif value == REJECTED:
                    ack = AcknowledgeType.REJECT
                    done.add(value)
                else:
                    ack = AcknowledgeType.ACCEPT
                    done.add(value)
                consumer.acknowledge(message, ack)
                deliveries.append({'consumer': name, 'value': value, 'offset': message.offset(), 'deliveryCount': count, 'ack': ack.name})
            if messages:
                consumer.commit_sync()
    for consumer in consumers.values():
        consumer.close()
    print(json.dumps({'deliveries': deliveries, 'done': sorted(done)}))


if __name__ == '__main__':
    main()

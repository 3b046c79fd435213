"""A confluent-kafka (librdkafka) transactional producer whose coordinator is killed in the
middle of a transaction. Spec as the first stdin line, JSON {bootstrap, topic, partitions,
transactionalId, timeoutMs}. The producer begins a transaction, produces to every partition
and flushes, then prints {"ready": true} and waits for a second stdin line: the test kills
the coordinator meanwhile (and lets the transaction time out, when it means to). Then it
commits, and if that worked, commits one more transaction. Prints one JSON line: each
commit's outcome, "ok" or the KafkaError's name, code and flags."""
import json
import sys

from confluent_kafka import KafkaException, Producer

spec = json.loads(sys.stdin.readline())


def describe(error):
    return {
        "name": error.name(),
        "code": error.code(),
        "fatal": error.fatal(),
        "retriable": error.retriable(),
        "abortable": error.txn_requires_abort(),
        "text": error.str(),
    }


def transaction(producer, tag):
    producer.begin_transaction()
    for p in range(spec["partitions"]):
        producer.produce(spec["topic"], value=f"{tag}-{p}".encode(), partition=p)
    producer.flush(60)


producer = Producer({
    "bootstrap.servers": spec["bootstrap"],
    "transactional.id": spec["transactionalId"],
    "transaction.timeout.ms": spec["timeoutMs"],
})
producer.init_transactions(60)
transaction(producer, "before-kill")
print(json.dumps({"ready": True}), flush=True)
sys.stdin.readline()

outcome = {}
try:
    producer.commit_transaction(60)
    outcome["commit"] = "ok"
except KafkaException as e:
    outcome["commit"] = describe(e.args[0])
if outcome["commit"] == "ok":
    try:
        transaction(producer, "after-kill")
        producer.commit_transaction(60)
        outcome["next"] = "ok"
    except KafkaException as e:
        outcome["next"] = describe(e.args[0])
print(json.dumps(outcome), flush=True)

"""Issue 32: confluent-kafka 2.16.1 from PyPI (its bundled librdkafka 2.16) against a broker.

    .build/pyenv/bin/python pypi_ck.py BOOTSTRAP BROKERS [CHECK...]

Runs each check (all of them when none is named) against the brokers at BOOTSTRAP, which
must be BROKERS brokers, one after the other, each on topics and groups of its own, and
prints one JSON line per check, {"check", "ok", "detail", "ms"}, then {"done": true,
"passed", "failed"}. The same checks run against tidelog and against Apache Kafka 4.4
(test/compat/python-pypi-clients.test.ts): one that fails on Kafka is a bad check. Every
wait is bounded, so a check fails rather than hangs.
"""

import json
import sys
import time
import uuid

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    ConsumerGroupTopicPartitions,
    Consumer,
    ElectionType,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from confluent_kafka import ConsumerGroupState, ConsumerGroupType

# Every future and poll loop is bounded by this; a check takes a few seconds.
WAIT_S = 30
QUIET = {"log_level": 3}


class CheckFailed(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


def expect_equal(expected, actual, what):
    if expected != actual:
        raise CheckFailed(f"{what}: expected {expected!r}, got {actual!r}")


def text(data):
    return None if data is None else data.decode("utf-8")


def error_code(exception):
    """The KafkaError code a failed future or call carries, or None."""
    if isinstance(exception, KafkaException) and exception.args:
        err = exception.args[0]
        if isinstance(err, KafkaError):
            return err.code()
    return None


def expect_error(code, call, what):
    """Runs `call`, which must fail with KafkaError `code`."""
    try:
        call()
    except KafkaException as e:
        got = error_code(e)
        expect_equal(KafkaError(code).name(), repr(e) if got is None else KafkaError(got).name(), what)
        return
    raise CheckFailed(f"{what}: succeeded, expected {KafkaError(code).name()}")


def eventually(call):
    """`call()`, again while it fails with UNKNOWN_TOPIC_OR_PART: Kafka's brokers learn of a
    new topic from the controller a moment after CreateTopics answers (seconds on a loaded
    machine), and a request another broker answers meanwhile does not know it."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            return call()
        except KafkaException as e:
            if error_code(e) != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def await_true(probe, what):
    """Waits until `probe()` is true, or fails naming `what`."""
    deadline = time.monotonic() + WAIT_S
    while not probe():
        expect(time.monotonic() < deadline, f"never true: {what}")
        time.sleep(0.1)


def record(msg):
    return {
        "partition": msg.partition(),
        "offset": msg.offset(),
        "key": text(msg.key()),
        "value": text(msg.value()),
        "headers": [[k, text(v)] for k, v in (msg.headers() or [])],
    }


class Checks:
    def __init__(self, bootstrap, brokers):
        self.bootstrap = bootstrap
        self.brokers = brokers
        self.replication = min(3, brokers)
        # Unique per run, so that checks never see another run's topics or groups.
        self.prefix = f"pyck-{uuid.uuid4().hex[:8]}"
        self.admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})

    # ------------------------------------------------------------------ helpers

    def name(self, suffix):
        return f"{self.prefix}-{suffix}"

    def create_topic(self, suffix, partitions, config=None):
        topic = self.name(suffix)
        new = NewTopic(topic, num_partitions=partitions, replication_factor=self.replication, config=config or {})
        self.admin.create_topics([new])[topic].result(WAIT_S)
        self.await_leaders(topic, partitions)
        return topic

    def await_leaders(self, topic, partitions):
        """Waits until metadata names a leader for every partition: Kafka's brokers learn of
        a new topic from the controller a moment after CreateTopics answers."""
        deadline = time.monotonic() + WAIT_S
        while True:
            meta = self.admin.list_topics(topic, timeout=10).topics.get(topic)
            if meta is not None and meta.error is None and len(meta.partitions) == partitions:
                if all(p.leader >= 0 for p in meta.partitions.values()):
                    return
            expect(time.monotonic() < deadline, f"{topic} has no leaders for its {partitions} partitions")
            time.sleep(0.05)

    def producer(self, extra=None):
        config = {
            "bootstrap.servers": self.bootstrap,
            "linger.ms": 5,
            "message.timeout.ms": WAIT_S * 1000,
            **QUIET,
        }
        config.update(extra or {})
        return Producer(config)

    def consumer(self, extra=None):
        config = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.name(f"reader-{uuid.uuid4().hex[:6]}"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **QUIET,
        }
        config.update(extra or {})
        return Consumer(config)

    def produce_all(self, producer, topic, messages):
        """Produces (partition, key, value, headers) tuples; returns the delivery reports in order."""
        reports = [None] * len(messages)

        def callback(index):
            def on_delivery(err, msg):
                reports[index] = (err, msg.partition(), msg.offset())

            return on_delivery

        for i, (partition, key, value, headers) in enumerate(messages):
            producer.produce(
                topic,
                value=value,
                key=key,
                partition=partition,
                headers=headers or None,
                on_delivery=callback(i),
            )
            producer.poll(0)
        left = producer.flush(WAIT_S)
        expect_equal(0, left, "records not delivered")
        return reports

    def watermarks(self, topic, partitions, isolation="read_uncommitted"):
        c = self.consumer({"isolation.level": isolation})
        try:
            return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)]
        finally:
            c.close()

    def read_all(self, topic, partitions, isolation="read_uncommitted", at_least=0):
        """Reads every partition from its log start to its end (the high watermark, or the
        last stable offset under read_committed) with an assigned consumer, after waiting
        until the ends lie `at_least` records past the starts in all: with acks 0 or 1 the
        producer hears back before the high watermark moves. Sorted by partition, offset."""
        deadline = time.monotonic() + WAIT_S
        while at_least > 0:
            marks = self.watermarks(topic, partitions, isolation)
            if sum(high - low for low, high in marks) >= at_least:
                break
            expect(time.monotonic() < deadline, f"{topic} holds {marks}, expected {at_least} records")
            time.sleep(0.1)
        c = self.consumer({"isolation.level": isolation, "enable.partition.eof": True})
        try:
            c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
            at_end = set()
            records = []
            while len(at_end) < partitions:
                expect(time.monotonic() < deadline, f"read {len(records)} records of {topic}, ends seen {sorted(at_end)}")
                msg = c.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                        continue
                    raise CheckFailed(f"consume error: {msg.error()}")
                records.append(record(msg))
            return sorted(records, key=lambda r: (r["partition"], r["offset"]))
        finally:
            c.close()

    def offset(self, tp, spec, isolation=None):
        options = {"request_timeout": WAIT_S}
        if isolation is not None:
            options["isolation_level"] = isolation
        return self.admin.list_offsets({tp: spec}, **options)[tp].result(WAIT_S)

    def describe_configs(self, resource):
        return eventually(lambda: self.admin.describe_configs([resource])[resource].result(WAIT_S))

    def await_config(self, topic, name, value, source):
        resource = ConfigResource(ResourceType.TOPIC, topic)
        deadline = time.monotonic() + WAIT_S
        while True:
            entry = self.describe_configs(resource).get(name)
            got = (entry.value, entry.source) if entry else None
            if got == (value, source.value):
                return
            expect(time.monotonic() < deadline, f"{topic} {name}: expected {(value, source.value)}, got {got}")
            time.sleep(0.1)

    # ------------------------------------------------------------------ producer

    def producer_acks(self, acks):
        topic = self.create_topic(f"acks-{acks}", 2)
        # One record per partition with acks=all first: a leader that has not yet taken up a
        # new partition refuses a produce, which with acks=0 loses the records unseen.
        self.produce_all(self.producer({"acks": "all"}), topic, [(p, None, b"first", None) for p in range(2)])
        messages = [(i % 2, f"k{i}".encode(), f"acks {acks} {i}".encode(), None) for i in range(20)]
        p = self.producer({"acks": acks})
        reports = self.produce_all(p, topic, messages)
        for i, (err, partition, offset) in enumerate(reports):
            expect(err is None, f"record {i}: {err}")
            expect_equal(i % 2, partition, f"record {i} partition")
            # With acks=0 nothing is answered, so librdkafka reports no offset.
            expect_equal(None if acks == "0" else 1 + i // 2, offset, f"record {i} offset")
        got = self.read_all(topic, 2, at_least=22)
        want = [{"partition": p, "offset": 0, "key": None, "value": "first", "headers": []} for p in range(2)]
        want += [
            {"partition": i % 2, "offset": 1 + i // 2, "key": f"k{i}", "value": f"acks {acks} {i}", "headers": []}
            for i in range(20)
        ]
        expect_equal(sorted(want, key=lambda r: (r["partition"], r["offset"])), got, "records read back")

    def idempotent(self):
        topic = self.create_topic("idempotent", 3)
        p = self.producer({"enable.idempotence": True, "linger.ms": 20})
        messages = [(i % 3, None, f"idem {i}".encode(), None) for i in range(60)]
        reports = self.produce_all(p, topic, messages)
        for i, (err, _, offset) in enumerate(reports):
            expect(err is None, f"record {i}: {err}")
            expect_equal(i // 3, offset, f"record {i} offset")
        got = self.read_all(topic, 3, at_least=60)
        expect_equal(60, len(got), "records read back (each exactly once)")
        expect_equal(sorted(f"idem {i}" for i in range(60)), sorted(r["value"] for r in got), "values")

    def transactions(self):
        topic = self.create_topic("txn", 2)
        p = self.producer({"transactional.id": self.name("txn"), "transaction.timeout.ms": 60000})
        p.init_transactions(WAIT_S)
        committed = []
        for round, commit in enumerate([True, False, True]):
            p.begin_transaction()
            for i in range(6):
                value = f"txn {round} {i}"
                p.produce(topic, value=value.encode(), partition=i % 2)
                if commit:
                    committed.append(value)
            if commit:
                p.commit_transaction(WAIT_S)
            else:
                # Sent first: abort_transaction purges what is still queued, and the aborted
                # records are to reach the log.
                expect_equal(0, p.flush(WAIT_S), "aborted records not sent")
                p.abort_transaction(WAIT_S)
        got = self.read_all(topic, 2, "read_committed")
        expect_equal(sorted(committed), sorted(r["value"] for r in got), "read_committed values")
        everything = self.read_all(topic, 2, "read_uncommitted")
        # The aborted records are in the log (with the transaction markers, which take offsets
        # but are never returned).
        expect_equal(18, len(everything), "read_uncommitted records")
        marks = self.watermarks(topic, 2)
        # 18 records plus one marker per partition and transaction.
        expect_equal(18 + 2 * 3, sum(high for _, high in marks), "high watermarks")
        lso = self.offset(TopicPartition(topic, 0), OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
        expect_equal(marks[0][1], lso.offset, "last stable offset with no open transaction")

    def transactional_offsets(self):
        source = self.create_topic("txn-in", 1)
        sink = self.create_topic("txn-out", 1)
        group = self.name("txn-group")
        self.produce_all(self.producer(), source, [(0, None, f"in {i}".encode(), None) for i in range(10)])
        c = self.consumer({"group.id": group, "isolation.level": "read_committed"})
        p = self.producer({"transactional.id": self.name("txn-offsets")})
        try:
            p.init_transactions(WAIT_S)
            c.subscribe([source])
            seen = []
            deadline = time.monotonic() + WAIT_S
            while len(seen) < 10:
                expect(time.monotonic() < deadline, f"read {len(seen)} of 10")
                msg = c.poll(0.2)
                if msg is None or msg.error():
                    continue
                seen.append(text(msg.value()))
            p.begin_transaction()
            for value in seen:
                p.produce(sink, value=f"out {value}".encode(), partition=0)
            p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), WAIT_S)
            p.commit_transaction(WAIT_S)
        finally:
            c.close()
        got = self.read_all(sink, 1, "read_committed")
        expect_equal([f"out in {i}" for i in range(10)], [r["value"] for r in got], "output")
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(source, 0)])]
        offsets = self.admin.list_consumer_group_offsets(request)[group].result(WAIT_S)
        expect_equal([10], [tp.offset for tp in offsets.topic_partitions], "committed offset")

    def headers(self):
        topic = self.create_topic("headers", 1)
        headers = [("a", b"1"), ("b", None), ("a", b"2"), ("utf", "\u00e9\u00e8".encode()), ("empty", b"")]
        self.produce_all(self.producer(), topic, [(0, b"k", b"v", headers), (0, None, None, None)])
        got = self.read_all(topic, 1)
        expect_equal(2, len(got), "records")
        want = [[k, None if v is None else v.decode()] for k, v in headers]
        expect_equal(want, got[0]["headers"], "headers in order, duplicates and null kept")
        expect_equal((None, None, []), (got[1]["key"], got[1]["value"], got[1]["headers"]), "null key and value")

    def compression(self, codec):
        topic = self.create_topic(f"compression-{codec}", 2)
        messages = [(i % 2, f"key-{i}".encode(), (f"{codec} {i} " + "abc" * i).encode(), None) for i in range(200)]
        p = self.producer({"compression.type": codec, "linger.ms": 50})
        for err, _, _ in self.produce_all(p, topic, messages):
            expect(err is None, f"delivery: {err}")
        got = self.read_all(topic, 2)
        expect_equal(200, len(got), "records")
        expect_equal(
            sorted(m[2].decode() for m in messages),
            sorted(r["value"] for r in got),
            "values",
        )

    def record_near_max(self):
        topic = self.create_topic("near-max", 1)
        # message.max.bytes is 1048588 on the broker by default: one 1,000,000-byte record fits.
        p = self.producer({"message.max.bytes": 2_000_000})
        [(err, _, offset)] = self.produce_all(p, topic, [(0, None, b"x" * 1_000_000, None)])
        expect(err is None, f"delivery: {err}")
        expect_equal(0, offset, "offset")
        got = self.read_all(topic, 1)
        expect_equal([1_000_000], [len(r["value"]) for r in got], "value lengths")

    def record_too_large(self):
        topic = self.create_topic("too-large", 1)
        # The producer's own limit is raised so that the broker is the one to refuse; it does
        # not retry, so a first record makes sure the leader has taken up the partition.
        p = self.producer({"message.max.bytes": 3_000_000, "retries": 0, "enable.idempotence": False})
        [(err, _, offset)] = self.produce_all(self.producer(), topic, [(0, None, b"first", None)])
        expect_equal((None, 0), (err, offset), "the first record")
        [(err, _, _)] = self.produce_all(p, topic, [(0, None, b"y" * 1_100_000, None)])
        expect(err is not None, "a record over message.max.bytes was accepted")
        expect_equal("MSG_SIZE_TOO_LARGE", err.name(), "error")
        # The producer goes on working after the refusal.
        [(err, _, offset)] = self.produce_all(p, topic, [(0, None, b"small", None)])
        expect(err is None, f"next record: {err}")
        expect_equal(1, offset, "offset of the next record")

    # ------------------------------------------------------------------ consumer groups

    def group(self, suffix, config, expect_type):
        """Two members of one group share a 4-partition topic: each gets 2 partitions, every
        record is read once, commits land, and a new member resumes from them."""
        topic = self.create_topic(suffix, 4)
        group = self.name(suffix)
        base = {"group.id": group, "session.timeout.ms": 10000, "heartbeat.interval.ms": 500}
        if config.get("group.protocol") == "consumer":
            # KIP-848: session and heartbeat times belong to the broker.
            base = {"group.id": group}
        members = [self.consumer({**base, **config}) for _ in range(2)]
        try:
            for m in members:
                m.subscribe([topic])
            deadline = time.monotonic() + WAIT_S
            while True:
                for m in members:
                    msg = m.poll(0.1)
                    expect(msg is None or msg.error() is None, f"poll: {msg and msg.error()}")
                    expect(msg is None, "a record before any was produced")
                owned = [sorted(tp.partition for tp in m.assignment()) for m in members]
                if sorted(sum(owned, [])) == [0, 1, 2, 3] and all(len(o) == 2 for o in owned):
                    break
                expect(time.monotonic() < deadline, f"assignments {owned}")
            messages = [(i % 4, None, f"{suffix} {i}".encode(), None) for i in range(40)]
            self.produce_all(self.producer(), topic, messages)
            seen = [[] for _ in members]
            while sum(len(s) for s in seen) < 40:
                expect(time.monotonic() < deadline, f"read {sum(len(s) for s in seen)} of 40")
                for i, m in enumerate(members):
                    msg = m.poll(0.1)
                    if msg is None:
                        continue
                    expect(msg.error() is None, f"poll: {msg.error()}")
                    seen[i].append((msg.partition(), text(msg.value())))
            for i, m in enumerate(members):
                parts = {p for p, _ in seen[i]}
                expect_equal(set(owned[i]), parts, f"member {i} read the partitions it owns")
                m.commit(asynchronous=False)
            all_values = sorted(v for s in seen for _, v in s)
            expect_equal(sorted(m[2].decode() for m in messages), all_values, "each record once")
            # A member acknowledges its assignment in its next heartbeat; until then a
            # KIP-848 group is still reconciling (librdkafka names that state UNKNOWN).
            while True:
                description = self.admin.describe_consumer_groups([group])[group].result(WAIT_S)
                if description.state == ConsumerGroupState.STABLE:
                    break
                expect(time.monotonic() < deadline, f"group state {description.state}")
                for m in members:
                    expect(m.poll(0.1) is None, "a record after all were read")
            expect_equal(expect_type, description.type, "group type")
            expect_equal(2, len(description.members), "members")
            described = sorted(tp.partition for mem in description.members for tp in mem.assignment.topic_partitions)
            expect_equal([0, 1, 2, 3], described, "described assignment")
        finally:
            for m in members:
                m.close()
        # A new member resumes from the commits: nothing left to read; then new records arrive.
        self.produce_all(self.producer(), topic, [(p, None, f"after {p}".encode(), None) for p in range(4)])
        late = self.consumer({**base, **config})
        try:
            late.subscribe([topic])
            got = []
            deadline = time.monotonic() + WAIT_S
            while len(got) < 4:
                expect(time.monotonic() < deadline, f"resumed member read {got}")
                msg = late.poll(0.2)
                if msg is None:
                    continue
                expect(msg.error() is None, f"poll: {msg.error()}")
                got.append(text(msg.value()))
            expect_equal([f"after {p}" for p in range(4)], sorted(got), "records after the commits")
        finally:
            late.close()

    def offset_out_of_range(self):
        topic = self.create_topic("out-of-range", 1)
        self.produce_all(self.producer(), topic, [(0, None, f"r{i}".encode(), None) for i in range(5)])
        c = self.consumer({"auto.offset.reset": "error"})
        try:
            c.assign([TopicPartition(topic, 0, 100)])
            deadline = time.monotonic() + WAIT_S
            while True:
                expect(time.monotonic() < deadline, "no offset-reset error")
                msg = c.poll(0.2)
                if msg is None:
                    continue
                expect(msg.error() is not None, f"read {record(msg)} at offset 100")
                expect_equal("_AUTO_OFFSET_RESET", msg.error().name(), "error")
                break
        finally:
            c.close()
        c = self.consumer({"auto.offset.reset": "earliest"})
        try:
            c.assign([TopicPartition(topic, 0, 100)])
            deadline = time.monotonic() + WAIT_S
            while True:
                expect(time.monotonic() < deadline, "no record after the reset")
                msg = c.poll(0.2)
                if msg is None:
                    continue
                expect(msg.error() is None, f"poll: {msg.error()}")
                expect_equal((0, "r0"), (msg.offset(), text(msg.value())), "first record after reset to earliest")
                break
        finally:
            c.close()

    # ------------------------------------------------------------------ admin

    def describe_cluster(self):
        cluster = self.admin.describe_cluster(request_timeout=WAIT_S).result(WAIT_S)
        expect_equal(self.brokers, len(cluster.nodes), "nodes")
        expect(cluster.cluster_id, "no cluster id")
        expect(cluster.controller is not None and cluster.controller.id >= 0, "no controller")
        ids = {n.id for n in cluster.nodes}
        expect(cluster.controller.id in ids, f"controller {cluster.controller.id} not among {ids}")
        expect_equal(cluster.cluster_id, self.admin.list_topics(timeout=10).cluster_id, "cluster id in metadata")

    def admin_topics(self):
        topic = self.create_topic("topics", 3, {"retention.ms": "3600000"})
        described = eventually(lambda: self.admin.describe_topics(TopicCollection([topic]))[topic].result(WAIT_S))
        expect_equal(3, len(described.partitions), "partitions")
        expect(str(described.topic_id) not in ("", "AAAAAAAAAAAAAAAAAAAAAA"), f"topic id {described.topic_id}")
        for p in described.partitions:
            expect_equal(self.replication, len(p.replicas), f"partition {p.id} replicas")
            expect_equal(self.replication, len(p.isr), f"partition {p.id} ISR")
            expect(p.leader is not None and p.leader.id in {r.id for r in p.replicas}, f"partition {p.id} leader")
        await_true(lambda: topic in self.admin.list_topics(timeout=10).topics, "list_topics names the topic")
        expect_error(
            KafkaError.TOPIC_ALREADY_EXISTS,
            lambda: self.admin.create_topics([NewTopic(topic, 1, self.replication)])[topic].result(WAIT_S),
            "creating it again",
        )
        bad = self.name("bad-rf")
        expect_error(
            KafkaError.INVALID_REPLICATION_FACTOR,
            lambda: self.admin.create_topics([NewTopic(bad, 1, self.brokers + 1)])[bad].result(WAIT_S),
            "replication factor above the broker count",
        )
        valid = self.name("validate-only")
        self.admin.create_topics([NewTopic(valid, 2, self.replication)], validate_only=True)[valid].result(WAIT_S)
        expect(valid not in self.admin.list_topics(timeout=10).topics, "validate_only created the topic")
        self.admin.delete_topics([topic])[topic].result(WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while topic in self.admin.list_topics(timeout=10).topics:
            expect(time.monotonic() < deadline, "deleted topic still listed")
            time.sleep(0.1)
        missing = self.name("never-created")
        expect_error(
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            lambda: self.admin.delete_topics([missing])[missing].result(WAIT_S),
            "deleting an unknown topic",
        )

    def create_partitions(self):
        topic = self.create_topic("partitions", 1)
        self.admin.create_partitions([NewPartitions(topic, 3)])[topic].result(WAIT_S)
        self.await_leaders(topic, 3)
        def ids():
            described = eventually(lambda: self.admin.describe_topics(TopicCollection([topic]))[topic].result(WAIT_S))
            return [p.id for p in described.partitions]

        # The broker answering may learn of the new partitions a moment later.
        await_true(lambda: ids() == [0, 1, 2], "described partitions 0, 1, 2")
        # The new partitions take records.
        reports = self.produce_all(self.producer(), topic, [(2, None, b"in 2", None)])
        expect_equal((None, 2, 0), reports[0], "record in a new partition")
        expect_error(
            KafkaError.INVALID_PARTITIONS,
            lambda: self.admin.create_partitions([NewPartitions(topic, 2)])[topic].result(WAIT_S),
            "shrinking",
        )

    def configs(self):
        topic = self.create_topic("configs", 1)
        resource = ConfigResource(ResourceType.TOPIC, topic)
        entry = self.describe_configs(resource)["retention.ms"]
        expect_equal(("604800000", ConfigSource.DEFAULT_CONFIG.value), (entry.value, entry.source), "retention.ms default")
        alter = ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET),
                ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
            ],
        )
        self.admin.incremental_alter_configs([alter])[alter].result(WAIT_S)
        self.await_config(topic, "retention.ms", "123456", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        self.await_config(topic, "cleanup.policy", "delete,compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        alter = ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)],
        )
        self.admin.incremental_alter_configs([alter])[alter].result(WAIT_S)
        self.await_config(topic, "retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG)
        bad = ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)],
        )
        expect_error(
            KafkaError.INVALID_CONFIG,
            lambda: self.admin.incremental_alter_configs([bad])[bad].result(WAIT_S),
            "retention.ms=soon",
        )
        # The legacy AlterConfigs replaces the whole set of a topic's dynamic configs.
        legacy = ConfigResource(ResourceType.TOPIC, topic, set_config={"max.message.bytes": "200000"})
        self.admin.alter_configs([legacy])[legacy].result(WAIT_S)
        self.await_config(topic, "max.message.bytes", "200000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        self.await_config(topic, "cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG)
        # A broker's configs: message.max.bytes at its default.
        node = self.admin.describe_cluster().result(WAIT_S).nodes[0]
        broker = ConfigResource(ResourceType.BROKER, str(node.id))
        entry = self.describe_configs(broker).get("message.max.bytes")
        expect(entry is not None, "broker lacks message.max.bytes")
        expect_equal("1048588", entry.value, "message.max.bytes")

    def acls(self):
        topic = self.name("acl-topic")
        binding = AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        prefixed = AclBinding(
            ResourceType.GROUP,
            self.prefix,
            ResourcePatternType.PREFIXED,
            "User:bob",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.DENY,
        )
        for result in self.admin.create_acls([binding, prefixed]).values():
            result.result(WAIT_S)
        mine = AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )

        def listed():
            found = self.admin.describe_acls(mine).result(WAIT_S)
            return sorted(
                (
                    b.restype.name,
                    b.name,
                    b.resource_pattern_type.name,
                    b.principal,
                    b.host,
                    b.operation.name,
                    b.permission_type.name,
                )
                for b in found
                if b.name.startswith(self.prefix)
            )

        want = sorted(
            [
                ("TOPIC", topic, "LITERAL", "User:alice", "*", "READ", "ALLOW"),
                ("GROUP", self.prefix, "PREFIXED", "User:bob", "*", "DESCRIBE", "DENY"),
            ]
        )
        deadline = time.monotonic() + WAIT_S
        while listed() != want:
            expect(time.monotonic() < deadline, f"describe_acls: {listed()}")
            time.sleep(0.1)
        only_alice = AclBindingFilter(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.MATCH,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        found = self.admin.describe_acls(only_alice).result(WAIT_S)
        expect_equal(["User:alice"], [b.principal for b in found], "a MATCH filter on the topic")
        deleted = self.admin.delete_acls([mine])
        removed = [b for f in deleted.values() for b in f.result(WAIT_S) if b.name.startswith(self.prefix)]
        expect_equal(2, len(removed), "deleted bindings")
        deadline = time.monotonic() + WAIT_S
        while listed():
            expect(time.monotonic() < deadline, f"still listed after delete: {listed()}")
            time.sleep(0.1)

    def admin_groups(self):
        topic = self.create_topic("groups", 2)
        group = self.name("groups")
        self.produce_all(self.producer(), topic, [(i % 2, None, f"g{i}".encode(), None) for i in range(10)])
        c = self.consumer({"group.id": group})
        try:
            c.subscribe([topic])
            read = 0
            deadline = time.monotonic() + WAIT_S
            while read < 10:
                expect(time.monotonic() < deadline, f"read {read} of 10")
                msg = c.poll(0.2)
                if msg is not None and msg.error() is None:
                    read += 1
            c.commit(asynchronous=False)
            listing = self.admin.list_consumer_groups(request_timeout=WAIT_S).result(WAIT_S)
            mine = [g for g in listing.valid if g.group_id == group]
            expect_equal(1, len(mine), f"listed groups {[g.group_id for g in listing.valid]}")
            expect_equal(ConsumerGroupState.STABLE, mine[0].state, "listed state")
            expect_equal(ConsumerGroupType.CLASSIC, mine[0].type, "listed type")
            stable = self.admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(WAIT_S)
            expect(group in [g.group_id for g in stable.valid], "missing from the STABLE listing")
            d = self.admin.describe_consumer_groups([group])[group].result(WAIT_S)
            expect_equal(ConsumerGroupState.STABLE, d.state, "described state")
            expect_equal(1, len(d.members), "members")
            expect_equal(2, len(d.members[0].assignment.topic_partitions), "assigned partitions")
            expect(d.coordinator is not None and d.coordinator.id >= 0, "no coordinator")
            expect(d.partition_assignor, "no assignor named")
        finally:
            c.close()
        d = self.admin.describe_consumer_groups([group])[group].result(WAIT_S)
        expect_equal(ConsumerGroupState.EMPTY, d.state, "state after the consumer left")
        request = [ConsumerGroupTopicPartitions(group)]
        offsets = self.admin.list_consumer_group_offsets(request)[group].result(WAIT_S)
        got = sorted((tp.topic, tp.partition, tp.offset) for tp in offsets.topic_partitions)
        expect_equal([(topic, 0, 5), (topic, 1, 5)], got, "committed offsets")
        alter = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 2)])]
        self.admin.alter_consumer_group_offsets(alter)[group].result(WAIT_S)
        offsets = self.admin.list_consumer_group_offsets(request)[group].result(WAIT_S)
        got = sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions)
        expect_equal([(0, 2), (1, 5)], got, "offsets after alter")
        self.admin.delete_consumer_groups([group])[group].result(WAIT_S)
        after = self.admin.list_consumer_groups().result(WAIT_S)
        expect(group not in [g.group_id for g in after.valid], "deleted group still listed")
        expect_error(
            KafkaError.GROUP_ID_NOT_FOUND,
            lambda: self.admin.delete_consumer_groups([group])[group].result(WAIT_S),
            "deleting it again",
        )

    def list_offsets(self):
        topic = self.create_topic("list-offsets", 1)
        tp = TopicPartition(topic, 0)
        base = int(time.time() * 1000) - 60_000
        p = self.producer()
        # Timestamps 0s, 10s, 40s, 20s, 30s past base: the largest is in the middle.
        for t in (0, 10_000, 40_000, 20_000, 30_000):
            p.produce(topic, value=f"t{t}".encode(), partition=0, timestamp=base + t)
            expect_equal(0, p.flush(WAIT_S), "not delivered")
        expect_equal(0, self.offset(tp, OffsetSpec.earliest()).offset, "earliest")
        expect_equal(5, self.offset(tp, OffsetSpec.latest()).offset, "latest")
        expect_equal(2, self.offset(tp, OffsetSpec.for_timestamp(base + 15_000)).offset, "first at or after base+15s")
        expect_equal(1, self.offset(tp, OffsetSpec.for_timestamp(base + 10_000)).offset, "exact timestamp")
        expect_equal(-1, self.offset(tp, OffsetSpec.for_timestamp(base + 50_000)).offset, "past the last timestamp")
        top = self.offset(tp, OffsetSpec.max_timestamp())
        expect_equal((2, base + 40_000), (top.offset, top.timestamp), "max timestamp")
        # The consumer's offsets_for_times agrees.
        c = self.consumer()
        try:
            [found] = c.offsets_for_times([TopicPartition(topic, 0, base + 15_000)], timeout=10)
            expect_equal(2, found.offset, "offsets_for_times")
        finally:
            c.close()
        # (An unknown topic or partition is refused by librdkafka itself, _NOENT, from its
        # metadata: no request reaches the broker, so it is no check of one.)

    def delete_records(self):
        topic = self.create_topic("delete-records", 1)
        self.produce_all(self.producer(), topic, [(0, None, f"d{i}".encode(), None) for i in range(10)])
        # librdkafka's admin looks the leaders up itself and gives up with _NOENT ("No
        # leaders found") when it finds none, which against Kafka 4.4 has gone on for 30 s
        # with one admin client while list_topics named the leader: each retry gets a new one.
        deadline = time.monotonic() + WAIT_S
        admin = self.admin
        while True:
            try:
                [result] = admin.delete_records([TopicPartition(topic, 0, 4)]).values()
                low = result.result(WAIT_S).low_watermark
                break
            except KafkaException as e:
                if e.args[0].code() != KafkaError._NOENT or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        expect_equal(4, low, "low watermark")
        expect_equal(4, self.offset(TopicPartition(topic, 0), OffsetSpec.earliest()).offset, "earliest after delete")
        expect_equal([(4, 10)], self.watermarks(topic, 1), "watermarks")
        got = self.read_all(topic, 1)
        expect_equal([4, 5, 6, 7, 8, 9], [r["offset"] for r in got], "offsets left")
        expect_error(
            KafkaError.OFFSET_OUT_OF_RANGE,
            lambda: list(admin.delete_records([TopicPartition(topic, 0, 11)]).values())[0].result(WAIT_S),
            "deleting past the high watermark",
        )
        [result] = admin.delete_records([TopicPartition(topic, 0, OFFSET_END)]).values()
        expect_equal(10, result.result(WAIT_S).low_watermark, "low watermark after deleting all")

    def scram(self):
        user = self.name("scram-user")
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
        upsert = UserScramCredentialUpsertion(user, info, b"secret", b"salt-of-sixteen!")
        for f in self.admin.alter_user_scram_credentials([upsert]).values():
            f.result(WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                d = self.admin.describe_user_scram_credentials([user])[user].result(WAIT_S)
                break
            except KafkaException as e:
                expect(time.monotonic() < deadline, f"describe: {e}")
                time.sleep(0.1)
        got = [(i.mechanism, i.iterations) for i in d.scram_credential_infos]
        expect_equal([(ScramMechanism.SCRAM_SHA_256, 8192)], got, "credentials")
        every = self.admin.describe_user_scram_credentials().result(WAIT_S)
        expect(user in every, "describing every user lacks it")
        delete = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
        for f in self.admin.alter_user_scram_credentials([delete]).values():
            f.result(WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                self.admin.describe_user_scram_credentials([user])[user].result(WAIT_S)
            except KafkaException as e:
                expect_equal("RESOURCE_NOT_FOUND", e.args[0].name(), "describing a deleted user")
                break
            expect(time.monotonic() < deadline, "the user is still described after delete")
            time.sleep(0.1)
        too_few = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 100), b"pw")
        expect_error(
            KafkaError.UNACCEPTABLE_CREDENTIAL,
            lambda: self.admin.alter_user_scram_credentials([too_few])[user].result(WAIT_S),
            "4096 iterations at least",
        )

    def elect_leaders(self):
        topic = self.create_topic("elect", 2)
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        result = self.admin.elect_leaders(ElectionType.PREFERRED, tps).result(WAIT_S)
        # Every leader is already the preferred one.
        got = sorted((tp.partition, err.name() if err else None) for tp, err in result.items())
        expect_equal([(0, "ELECTION_NOT_NEEDED"), (1, "ELECTION_NOT_NEEDED")], got, "preferred election")

    def checks(self):
        c = {}
        for acks in ("0", "1", "all"):
            c[f"producer-acks-{acks}"] = lambda acks=acks: self.producer_acks(acks)
        c["producer-idempotent"] = self.idempotent
        c["producer-transactions-commit-abort"] = self.transactions
        c["producer-transactions-send-offsets"] = self.transactional_offsets
        c["headers"] = self.headers
        for codec in ("gzip", "snappy", "lz4", "zstd"):
            c[f"compression-{codec}"] = lambda codec=codec: self.compression(codec)
        c["record-near-message-max-bytes"] = self.record_near_max
        c["record-too-large"] = self.record_too_large
        for assignor in ("range", "roundrobin", "cooperative-sticky"):
            c[f"consumer-classic-{assignor}"] = lambda a=assignor: self.group(
                f"classic-{a}", {"partition.assignment.strategy": a}, ConsumerGroupType.CLASSIC
            )
        c["consumer-group-protocol-consumer"] = lambda: self.group(
            "kip848", {"group.protocol": "consumer"}, ConsumerGroupType.CONSUMER
        )
        c["consumer-offset-out-of-range"] = self.offset_out_of_range
        c["admin-describe-cluster"] = self.describe_cluster
        c["admin-topics"] = self.admin_topics
        c["admin-create-partitions"] = self.create_partitions
        c["admin-configs"] = self.configs
        c["admin-acls"] = self.acls
        c["admin-consumer-groups"] = self.admin_groups
        c["admin-list-offsets"] = self.list_offsets
        c["admin-delete-records"] = self.delete_records
        c["admin-scram-credentials"] = self.scram
        c["admin-elect-leaders"] = self.elect_leaders
        return c


def main():
    if len(sys.argv) < 3:
        print("usage: pypi_ck.py BOOTSTRAP BROKERS [CHECK...]", file=sys.stderr)
        sys.exit(2)
    checks = Checks(sys.argv[1], int(sys.argv[2]))
    everything = checks.checks()
    names = sys.argv[3:] or list(everything)
    passed = failed = 0
    for name in names:
        start = time.monotonic()
        check = everything.get(name)
        detail = ""
        ok = False
        if check is None:
            detail = "no such check"
        else:
            try:
                check()
                ok = True
            except Exception as e:  # noqa: BLE001 - every failure is reported, none ends the run
                detail = f"{type(e).__name__}: {e}"
        ms = int((time.monotonic() - start) * 1000)
        passed += ok
        failed += not ok
        print(json.dumps({"check": name, "ok": ok, "detail": detail, "ms": ms}), flush=True)
    print(json.dumps({"done": True, "passed": passed, "failed": failed}), flush=True)


if __name__ == "__main__":
    main()

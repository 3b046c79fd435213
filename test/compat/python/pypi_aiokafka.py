"""Issue 32: aiokafka 0.14.0 from PyPI (asyncio, its own protocol code) against a broker.

    .build/pyenv/bin/python pypi_aiokafka.py BOOTSTRAP BROKERS [CHECK...]

As pypi_ck.py: runs each check (all when none is named) against the BROKERS brokers at
BOOTSTRAP, prints one JSON line per check, {"check", "ok", "detail", "ms"}, then {"done":
true, "passed", "failed"}. The same checks run against tidelog and against Apache Kafka 4.4
(test/compat/python-pypi-clients.test.ts): one that fails on Kafka is a bad check. Each
check is bounded by CHECK_TIMEOUT_S.
"""

import asyncio
import json
import logging
import sys
import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.errors import InvalidPartitionsError, KafkaError, MessageSizeTooLargeError, OffsetOutOfRangeError

CHECK_TIMEOUT_S = 60
WAIT_S = 30


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


def record(msg):
    return {
        "partition": msg.partition,
        "offset": msg.offset,
        "key": text(msg.key),
        "value": text(msg.value),
        "headers": [[k, text(v)] for k, v in msg.headers],
    }


class Checks:
    def __init__(self, bootstrap, brokers):
        self.bootstrap = bootstrap
        self.brokers = brokers
        self.replication = min(3, brokers)
        # Unique per run, so that checks never see another run's topics or groups.
        self.prefix = f"pyaio-{uuid.uuid4().hex[:8]}"
        self.admin = None

    async def start(self):
        self.admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=WAIT_S * 1000)
        await self.admin.start()

    async def close(self):
        await self.admin.close()

    # ------------------------------------------------------------------ helpers

    def name(self, suffix):
        return f"{self.prefix}-{suffix}"

    async def create_topic(self, suffix, partitions, configs=None):
        topic = self.name(suffix)
        response = await self.admin.create_topics(
            [NewTopic(topic, partitions, self.replication, topic_configs=configs or {})], timeout_ms=WAIT_S * 1000
        )
        errors = [(t[0], t[1]) for t in response.topic_errors if t[1] != 0]
        expect_equal([], errors, "create_topics errors")
        await self.await_leaders(topic, partitions)
        return topic

    async def await_leaders(self, topic, partitions):
        """Waits until every broker's metadata names a leader for every partition: Kafka's
        brokers learn of a new topic from the controller a moment after CreateTopics."""
        deadline = time.monotonic() + WAIT_S
        while True:
            [described] = await self.admin.describe_topics([topic])
            leaders = [p["leader"] for p in described["partitions"]]
            if described["error_code"] == 0 and len(leaders) == partitions and min(leaders) >= 0:
                return
            expect(time.monotonic() < deadline, f"{topic}: {described}")
            await asyncio.sleep(0.05)

    def producer(self, **extra):
        # acks=all as the Java producer's default (aiokafka's is 1): with acks=1 the producer
        # hears back before the high watermark moves, and a read right after may miss records.
        config = {"bootstrap_servers": self.bootstrap, "acks": "all", "linger_ms": 5, "request_timeout_ms": WAIT_S * 1000}
        config.update(extra)
        return AIOKafkaProducer(**config)

    def consumer(self, *topics, **extra):
        config = {
            "bootstrap_servers": self.bootstrap,
            "auto_offset_reset": "earliest",
            "enable_auto_commit": False,
            "request_timeout_ms": WAIT_S * 1000,
        }
        config.update(extra)
        return AIOKafkaConsumer(*topics, **config)

    async def produce(self, topic, messages, **config):
        """Sends (partition, key, value, headers) tuples one by one; returns their metadata."""
        p = self.producer(**config)
        await p.start()
        try:
            return [
                await p.send_and_wait(topic, value=v, key=k, partition=part, headers=h or [])
                for part, k, v, h in messages
            ]
        finally:
            await p.stop()

    async def read_all(self, topic, partitions, isolation="read_uncommitted", at_least=0):
        """Reads every partition from its log start to its end (the high watermark, or the
        last stable offset under read_committed) with an assigned consumer, after waiting until
        the ends lie `at_least` records past the starts (with acks 0 or 1 the producer hears
        back before the high watermark moves). Sorted by partition, then offset."""
        c = self.consumer(isolation_level=isolation)
        await c.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            c.assign(tps)
            deadline = time.monotonic() + WAIT_S
            while True:
                begin = await c.beginning_offsets(tps)
                end = await c.end_offsets(tps)
                if sum(end[tp] - begin[tp] for tp in tps) >= at_least:
                    break
                expect(time.monotonic() < deadline, f"{topic} holds {begin} .. {end}, expected {at_least}")
                await asyncio.sleep(0.1)
            await c.seek_to_beginning(*tps)
            records = []
            # Under read_committed end_offsets is the last stable offset.
            left = list(tps)
            while left:
                expect(time.monotonic() < deadline, f"read {len(records)} records of {topic}")
                batches = await c.getmany(timeout_ms=200)
                for msgs in batches.values():
                    records.extend([record(m) for m in msgs])
                left = [tp for tp in left if await c.position(tp) < end[tp]]
            return sorted(records, key=lambda r: (r["partition"], r["offset"]))
        finally:
            await c.stop()

    # ------------------------------------------------------------------ producer

    async def producer_acks(self, acks):
        topic = await self.create_topic(f"acks-{acks}", 2)
        # One record per partition with acks=all first: a leader that has not yet taken up a
        # new partition refuses a produce, which with acks=0 loses the records unseen.
        await self.produce(topic, [(p, None, b"first", None) for p in range(2)])
        messages = [(i % 2, f"k{i}".encode(), f"acks {acks} {i}".encode(), None) for i in range(20)]
        metas = await self.produce(topic, messages, acks=int(acks) if acks != "all" else "all")
        for i, m in enumerate(metas):
            # With acks=0 nothing is answered, so aiokafka returns no metadata.
            got = None if m is None else (m.partition, m.offset)
            expect_equal(None if acks == "0" else (i % 2, 1 + i // 2), got, f"record {i} partition and offset")
        got = await self.read_all(topic, 2, at_least=22)
        want = [{"partition": p, "offset": 0, "key": None, "value": "first", "headers": []} for p in range(2)]
        want += [
            {"partition": i % 2, "offset": 1 + i // 2, "key": f"k{i}", "value": f"acks {acks} {i}", "headers": []}
            for i in range(20)
        ]
        expect_equal(sorted(want, key=lambda r: (r["partition"], r["offset"])), got, "records read back")

    async def idempotent(self):
        topic = await self.create_topic("idempotent", 3)
        p = self.producer(enable_idempotence=True, linger_ms=20)
        await p.start()
        try:
            futures = [await p.send(topic, value=f"idem {i}".encode(), partition=i % 3) for i in range(60)]
            metas = await asyncio.gather(*futures)
        finally:
            await p.stop()
        expect_equal([i // 3 for i in range(60)], [m.offset for m in metas], "offsets")
        got = await self.read_all(topic, 3, at_least=60)
        expect_equal(sorted(f"idem {i}" for i in range(60)), sorted(r["value"] for r in got), "each record once")

    async def transactions(self):
        topic = await self.create_topic("txn", 2)
        p = self.producer(transactional_id=self.name("txn"))
        await p.start()
        committed = []
        try:
            for round, commit in enumerate([True, False, True]):
                await p.begin_transaction()
                for i in range(6):
                    value = f"txn {round} {i}"
                    await p.send_and_wait(topic, value=value.encode(), partition=i % 2)
                    if commit:
                        committed.append(value)
                if commit:
                    await p.commit_transaction()
                else:
                    await p.abort_transaction()
            # The context manager commits, or aborts on an exception.
            try:
                async with p.transaction():
                    await p.send_and_wait(topic, value=b"txn raised", partition=0)
                    raise RuntimeError("abort me")
            except RuntimeError:
                pass
        finally:
            await p.stop()
        got = await self.read_all(topic, 2, "read_committed")
        expect_equal(sorted(committed), sorted(r["value"] for r in got), "read_committed values")
        everything = await self.read_all(topic, 2)
        expect_equal(19, len(everything), "read_uncommitted records, the aborted ones too")

    async def transactional_offsets(self):
        source = await self.create_topic("txn-in", 1)
        sink = await self.create_topic("txn-out", 1)
        group = self.name("txn-group")
        await self.produce(source, [(0, None, f"in {i}".encode(), None) for i in range(10)])
        c = self.consumer(source, group_id=group, isolation_level="read_committed")
        p = self.producer(transactional_id=self.name("txn-offsets"))
        await c.start()
        await p.start()
        try:
            seen = []
            deadline = time.monotonic() + WAIT_S
            while len(seen) < 10:
                expect(time.monotonic() < deadline, f"read {len(seen)} of 10")
                for msgs in (await c.getmany(timeout_ms=200)).values():
                    seen.extend(text(m.value) for m in msgs)
            async with p.transaction():
                for value in seen:
                    await p.send_and_wait(sink, value=f"out {value}".encode(), partition=0)
                tp = TopicPartition(source, 0)
                await p.send_offsets_to_transaction({tp: await c.position(tp)}, group)
        finally:
            await p.stop()
            await c.stop()
        got = await self.read_all(sink, 1, "read_committed")
        expect_equal([f"out in {i}" for i in range(10)], [r["value"] for r in got], "output")
        # The offsets are visible once the commit marker lands in __consumer_offsets, which
        # Kafka writes after answering EndTxn, apart from the output topic's marker.
        deadline = time.monotonic() + WAIT_S
        while True:
            offsets = await self.admin.list_consumer_group_offsets(group)
            committed = {tp: o.offset for tp, o in offsets.items()}
            if committed or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        expect_equal({TopicPartition(source, 0): 10}, committed, "committed offset")

    async def headers(self):
        topic = await self.create_topic("headers", 1)
        headers = [("a", b"1"), ("b", None), ("a", b"2"), ("utf", "\u00e9\u00e8".encode()), ("empty", b"")]
        # (aiokafka refuses a record with neither key nor value.)
        await self.produce(topic, [(0, b"k", b"v", headers), (0, None, b"", None)])
        got = await self.read_all(topic, 1)
        expect_equal(2, len(got), "records")
        want = [[k, None if v is None else v.decode()] for k, v in headers]
        expect_equal(want, got[0]["headers"], "headers in order, duplicates and null kept")
        expect_equal((None, "", []), (got[1]["key"], got[1]["value"], got[1]["headers"]), "null key, empty value")

    async def compression(self, codec):
        topic = await self.create_topic(f"compression-{codec}", 2)
        p = self.producer(compression_type=codec, linger_ms=50)
        await p.start()
        try:
            futures = [
                await p.send(topic, key=f"key-{i}".encode(), value=(f"{codec} {i} " + "abc" * i).encode(), partition=i % 2)
                for i in range(200)
            ]
            await asyncio.gather(*futures)
        finally:
            await p.stop()
        got = await self.read_all(topic, 2)
        expect_equal(sorted(f"{codec} {i} " + "abc" * i for i in range(200)), sorted(r["value"] for r in got), "values")

    async def record_near_max(self):
        topic = await self.create_topic("near-max", 1)
        # message.max.bytes is 1048588 on the broker by default: one 1,000,000-byte record fits.
        [meta] = await self.produce(topic, [(0, None, b"x" * 1_000_000, None)], max_request_size=2_000_000)
        expect_equal(0, meta.offset, "offset")
        c = self.consumer(max_partition_fetch_bytes=2_000_000)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            batches = await c.getmany(timeout_ms=WAIT_S * 1000)
            expect_equal([1_000_000], [len(m.value) for m in batches.get(tp, [])], "value lengths")
        finally:
            await c.stop()

    async def record_too_large(self):
        topic = await self.create_topic("too-large", 1)
        p = self.producer(max_request_size=3_000_000)
        await p.start()
        try:
            # The producer's own limit is raised so that the broker is the one to refuse.
            try:
                await p.send_and_wait(topic, value=b"y" * 1_100_000, partition=0)
                raise CheckFailed("a record over message.max.bytes was accepted")
            except MessageSizeTooLargeError:
                pass
            # The producer goes on working after the refusal.
            meta = await p.send_and_wait(topic, value=b"small", partition=0)
            expect_equal(0, meta.offset, "offset of the next record")
        finally:
            await p.stop()

    # ------------------------------------------------------------------ consumer groups

    async def group(self, suffix, assignor):
        """Two members of one group share a 4-partition topic: each gets 2 partitions, every
        record is read once, commits land, and a new member resumes from them."""
        topic = await self.create_topic(suffix, 4)
        group = self.name(suffix)
        config = {
            "group_id": group,
            "partition_assignment_strategy": (assignor,),
            "session_timeout_ms": 10000,
            "heartbeat_interval_ms": 500,
        }
        members = [self.consumer(topic, **config) for _ in range(2)]
        try:
            for m in members:
                await m.start()
            deadline = time.monotonic() + WAIT_S
            while True:
                for m in members:
                    batches = await m.getmany(timeout_ms=100)
                    expect(not any(batches.values()), "a record before any was produced")
                owned = [sorted(tp.partition for tp in m.assignment()) for m in members]
                if sorted(sum(owned, [])) == [0, 1, 2, 3] and all(len(o) == 2 for o in owned):
                    break
                expect(time.monotonic() < deadline, f"assignments {owned}")
            messages = [(i % 4, None, f"{suffix} {i}".encode(), None) for i in range(40)]
            await self.produce(topic, messages)
            seen = [[] for _ in members]
            while sum(len(s) for s in seen) < 40:
                expect(time.monotonic() < deadline, f"read {sum(len(s) for s in seen)} of 40")
                for i, m in enumerate(members):
                    for msgs in (await m.getmany(timeout_ms=100)).values():
                        seen[i].extend((msg.partition, text(msg.value)) for msg in msgs)
            for i, m in enumerate(members):
                expect_equal(set(owned[i]), {p for p, _ in seen[i]}, f"member {i} read the partitions it owns")
                await m.commit()
            expect_equal(sorted(m[2].decode() for m in messages), sorted(v for s in seen for _, v in s), "each record once")
            [described] = await self.admin.describe_consumer_groups([group])
            state = described.to_object()["groups"][0]
            expect_equal("Stable", state["state"], "group state")
            expect_equal(2, len(state["members"]), "members")
        finally:
            for m in members:
                await m.stop()
        offsets = await self.admin.list_consumer_group_offsets(group)
        expect_equal({p: 10 for p in range(4)}, {tp.partition: o.offset for tp, o in offsets.items()}, "committed")
        await self.produce(topic, [(p, None, f"after {p}".encode(), None) for p in range(4)])
        late = self.consumer(topic, **config)
        await late.start()
        try:
            got = []
            deadline = time.monotonic() + WAIT_S
            while len(got) < 4:
                expect(time.monotonic() < deadline, f"resumed member read {got}")
                for msgs in (await late.getmany(timeout_ms=200)).values():
                    got.extend(text(m.value) for m in msgs)
            expect_equal([f"after {p}" for p in range(4)], sorted(got), "records after the commits")
        finally:
            await late.stop()

    async def consumer_offsets(self):
        topic = await self.create_topic("offsets", 1)
        tp = TopicPartition(topic, 0)
        base = int(time.time() * 1000) - 60_000
        p = self.producer()
        await p.start()
        try:
            for t in (0, 10_000, 40_000, 20_000, 30_000):
                await p.send_and_wait(topic, value=f"t{t}".encode(), partition=0, timestamp_ms=base + t)
        finally:
            await p.stop()
        c = self.consumer(auto_offset_reset="none")
        await c.start()
        try:
            c.assign([tp])
            expect_equal({tp: 0}, await c.beginning_offsets([tp]), "beginning")
            expect_equal({tp: 5}, await c.end_offsets([tp]), "end")
            found = await c.offsets_for_times({tp: base + 15_000})
            # Timestamps 0s, 10s, 40s, 20s, 30s past base: the first at or after 15s is at 2.
            expect_equal((2, base + 40_000), (found[tp].offset, found[tp].timestamp), "first at or after base+15s")
            found = await c.offsets_for_times({tp: base + 50_000})
            expect_equal(None, found[tp], "past the last timestamp")
            c.seek(tp, 3)
            msg = await asyncio.wait_for(c.getone(), WAIT_S)
            expect_equal((3, "t20000", base + 20_000), (msg.offset, text(msg.value), msg.timestamp), "record at 3")
            # Past the end, with auto_offset_reset=none: OffsetOutOfRangeError.
            c.seek(tp, 100)
            try:
                await c.getmany(tp, timeout_ms=WAIT_S * 1000)
                raise CheckFailed("no error for offset 100")
            except OffsetOutOfRangeError:
                pass
        finally:
            await c.stop()

    # ------------------------------------------------------------------ admin

    async def describe_cluster(self):
        cluster = await self.admin.describe_cluster()
        expect_equal(self.brokers, len(cluster["brokers"]), "brokers")
        expect(cluster["cluster_id"], "no cluster id")
        expect(cluster["controller_id"] in {b["node_id"] for b in cluster["brokers"]}, f"controller: {cluster}")

    async def admin_topics(self):
        topic = await self.create_topic("topics", 3, {"retention.ms": "3600000"})
        deadline = time.monotonic() + WAIT_S
        while True:
            # Whichever broker answers may learn of the topic a moment after CreateTopics.
            [described] = await self.admin.describe_topics([topic])
            if described["error_code"] == 0 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        expect_equal((0, 3), (described["error_code"], len(described["partitions"])), "error and partitions")
        for p in described["partitions"]:
            expect_equal(self.replication, len(p["replicas"]), "replicas")
            expect_equal(self.replication, len(p["isr"]), "ISR")
        deadline = time.monotonic() + WAIT_S
        # The broker answering may learn of the topic a moment after CreateTopics.
        while topic not in await self.admin.list_topics():
            expect(time.monotonic() < deadline, "list_topics lacks it")
            await asyncio.sleep(0.1)
        again = await self.admin.create_topics([NewTopic(topic, 1, self.replication)])
        expect_equal([36], [t[1] for t in again.topic_errors], "creating it again (TOPIC_ALREADY_EXISTS)")
        await self.admin.create_partitions({topic: NewPartitions(5)})
        await self.await_leaders(topic, 5)
        try:
            await self.admin.create_partitions({topic: NewPartitions(2)})
            raise CheckFailed("shrinking succeeded")
        except InvalidPartitionsError:
            pass
        await self.admin.delete_topics([topic])
        deadline = time.monotonic() + WAIT_S
        while topic in await self.admin.list_topics():
            expect(time.monotonic() < deadline, "deleted topic still listed")
            await asyncio.sleep(0.1)

    async def configs(self):
        topic = await self.create_topic("configs", 1)
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)

        async def entries():
            deadline = time.monotonic() + WAIT_S
            while True:
                [response] = await self.admin.describe_configs([resource])
                [result] = response.to_object()["resources"]
                # 3, UNKNOWN_TOPIC_OR_PARTITION: the broker answering may learn of the new
                # topic a moment after CreateTopics.
                if result["error_code"] != 3 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            expect_equal(0, result["error_code"], "describe_configs error")
            return {e["config_names"]: e for e in result["config_entries"]}

        retention = (await entries())["retention.ms"]
        # config_source 5 is DEFAULT_CONFIG, 1 DYNAMIC_TOPIC_CONFIG (DescribeConfigs v1+).
        expect_equal(("604800000", 5), (retention["config_value"], retention["config_source"]), "default retention.ms")
        # The legacy AlterConfigs (aiokafka has no incremental one).
        altered = ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "123456"})
        [response] = await self.admin.alter_configs([altered])
        expect_equal([0], [r[0] for r in response.resources], "alter_configs errors")
        deadline = time.monotonic() + WAIT_S
        while True:
            retention = (await entries())["retention.ms"]
            if retention["config_value"] == "123456":
                break
            expect(time.monotonic() < deadline, f"retention.ms {retention}")
            await asyncio.sleep(0.1)
        expect_equal(1, retention["config_source"], "source after alter")
        bad = ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "soon"})
        [response] = await self.admin.alter_configs([bad])
        expect_equal([40], [r[0] for r in response.resources], "retention.ms=soon (INVALID_CONFIG)")

    async def admin_groups(self):
        topic = await self.create_topic("groups", 2)
        group = self.name("groups")
        await self.produce(topic, [(i % 2, None, f"g{i}".encode(), None) for i in range(10)])
        c = self.consumer(topic, group_id=group)
        await c.start()
        try:
            read = 0
            deadline = time.monotonic() + WAIT_S
            while read < 10:
                expect(time.monotonic() < deadline, f"read {read} of 10")
                read += sum(len(m) for m in (await c.getmany(timeout_ms=200)).values())
            await c.commit()
            listed = await self.admin.list_consumer_groups()
            expect(group in [g[0] for g in listed], f"list_consumer_groups lacks it: {listed}")
            [described] = await self.admin.describe_consumer_groups([group])
            g = described.to_object()["groups"][0]
            expect_equal(("Stable", "consumer", 1), (g["state"], g["protocol_type"], len(g["members"])), "described")
        finally:
            await c.stop()
        offsets = await self.admin.list_consumer_group_offsets(group)
        expect_equal({0: 5, 1: 5}, {tp.partition: o.offset for tp, o in offsets.items()}, "committed offsets")

    async def delete_records(self):
        topic = await self.create_topic("delete-records", 1)
        await self.produce(topic, [(0, None, f"d{i}".encode(), None) for i in range(10)])
        tp = TopicPartition(topic, 0)
        low = await self.admin.delete_records({tp: RecordsToDelete(4)})
        expect_equal({tp: 4}, low, "low watermark")
        got = await self.read_all(topic, 1)
        expect_equal([4, 5, 6, 7, 8, 9], [r["offset"] for r in got], "offsets left")
        try:
            await self.admin.delete_records({tp: RecordsToDelete(11)})
            raise CheckFailed("deleting past the high watermark succeeded")
        except KafkaError as e:
            expect_equal("OffsetOutOfRangeError", type(e).__name__, "deleting past the high watermark")

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
        for name, assignor in (
            ("range", RangePartitionAssignor),
            ("roundrobin", RoundRobinPartitionAssignor),
            ("sticky", StickyPartitionAssignor),
        ):
            c[f"consumer-group-{name}"] = lambda n=name, a=assignor: self.group(f"group-{n}", a)
        c["consumer-offsets"] = self.consumer_offsets
        c["admin-describe-cluster"] = self.describe_cluster
        c["admin-topics"] = self.admin_topics
        c["admin-configs"] = self.configs
        c["admin-consumer-groups"] = self.admin_groups
        c["admin-delete-records"] = self.delete_records
        return c


async def main():
    # aiokafka logs rebalances as warnings; a failing check says what went wrong.
    logging.basicConfig(level=logging.ERROR)
    if len(sys.argv) < 3:
        print("usage: pypi_aiokafka.py BOOTSTRAP BROKERS [CHECK...]", file=sys.stderr)
        sys.exit(2)
    checks = Checks(sys.argv[1], int(sys.argv[2]))
    await checks.start()
    everything = checks.checks()
    names = sys.argv[3:] or list(everything)
    passed = failed = 0
    try:
        for name in names:
            start = time.monotonic()
            check = everything.get(name)
            detail = ""
            ok = False
            if check is None:
                detail = "no such check"
            else:
                try:
                    await asyncio.wait_for(check(), CHECK_TIMEOUT_S)
                    ok = True
                except asyncio.TimeoutError:
                    detail = f"timed out after {CHECK_TIMEOUT_S} s"
                except Exception as e:  # noqa: BLE001 - every failure is reported, none ends the run
                    detail = f"{type(e).__name__}: {e}"
            ms = int((time.monotonic() - start) * 1000)
            passed += ok
            failed += not ok
            print(json.dumps({"check": name, "ok": ok, "detail": detail, "ms": ms}), flush=True)
    finally:
        await checks.close()
    print(json.dumps({"done": True, "passed": passed, "failed": failed}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())

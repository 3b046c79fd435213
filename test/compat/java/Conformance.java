/*
 * Issue 32: the Java client (org.apache.kafka:kafka-clients 4.4.0) against a broker.
 *
 *   java -cp 'CLASSES:.build/kafka-4.4.0/clients/*' Conformance BOOTSTRAP [CHECK...]
 *
 * Runs each check (all of them when none is named) against the brokers at BOOTSTRAP, one
 * after the other, each on topics and groups of its own, and prints one line per check:
 *
 *   CHECK <name> PASS <ms>
 *   CHECK <name> FAIL <ms> <reason on one line>
 *
 * then `DONE <passed> <failed>`. The same checks run against tidelog and against Apache
 * Kafka 4.4 (test/compat/java-clients.test.ts): one that fails on Kafka is a bad check.
 * Every check bounds its own time (CHECK_TIMEOUT_MS) and cleans up its clients.
 */
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class Conformance {
  static final long CHECK_TIMEOUT_MS = 90_000;

  /** Checks that run side by side: two consumers of a group each, on topics and groups of their own. */
  static final Set<String> SIDE_BY_SIDE = Set.of(
      "consumer-classic-range",
      "consumer-classic-roundrobin",
      "consumer-classic-sticky",
      "consumer-classic-cooperative-sticky",
      "consumer-group-protocol-consumer",
      "consumer-group-protocol-consumer-range");

  /** A check submitted to the executor, with when it began and when it ended. */
  record Started(long startNs, java.util.concurrent.atomic.AtomicLong endNs, Future<?> future) {
    static Started start(ExecutorService executor, Check check) {
      long startNs = System.nanoTime();
      java.util.concurrent.atomic.AtomicLong endNs = new java.util.concurrent.atomic.AtomicLong();
      Future<?> future = executor.submit(() -> {
        try {
          check.run();
        } finally {
          endNs.set(System.nanoTime());
        }
        return null;
      });
      return new Started(startNs, endNs, future);
    }

    /** How long the check ran; for one cut off by its timeout, until now. */
    long elapsedMs() {
      long end = endNs.get();
      return ((end == 0 ? System.nanoTime() : end) - startNs) / 1_000_000;
    }
  }
  static final Duration POLL = Duration.ofMillis(100);

  interface Check {
    void run() throws Exception;
  }

  final String bootstrap;
  /** Unique per run so that checks never see another run's topics or groups. */
  final String prefix = "jc-" + Long.toString(System.currentTimeMillis() % 100_000_000L, 36);

  final Admin admin;
  int replicationFactor;

  Conformance(String bootstrap) {
    this.bootstrap = bootstrap;
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
    p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
    this.admin = Admin.create(p);
  }

  Map<String, Check> checks() {
    Map<String, Check> c = new LinkedHashMap<>();
    c.put("producer-acks-0", () -> producerAcks("0"));
    c.put("producer-acks-1", () -> producerAcks("1"));
    c.put("producer-acks-all", () -> producerAcks("all"));
    c.put("producer-idempotent", this::idempotentProducer);
    c.put("producer-transactions-commit-abort", this::transactions);
    c.put("producer-transactions-send-offsets", this::transactionalOffsets);
    c.put("headers", this::headers);
    for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
      c.put("compression-" + codec, () -> compression(codec));
    }
    c.put("record-near-message-max-bytes", this::recordNearMax);
    c.put("record-too-large", this::recordTooLarge);
    c.put("record-timestamp-far-ahead", this::timestampFarAhead);
    c.put("consumer-classic-range", () -> classicGroup("RangeAssignor", "range"));
    c.put("consumer-classic-roundrobin", () -> classicGroup("RoundRobinAssignor", "roundrobin"));
    c.put("consumer-classic-sticky", () -> classicGroup("StickyAssignor", "sticky"));
    c.put(
        "consumer-classic-cooperative-sticky",
        () -> classicGroup("CooperativeStickyAssignor", "cooperative-sticky"));
    c.put("consumer-group-protocol-consumer", this::consumerProtocolGroup);
    c.put("consumer-group-protocol-consumer-range", this::consumerProtocolRange);
    c.put("consumer-static-membership", this::staticMembership);
    c.put("consumer-offset-out-of-range", this::offsetOutOfRange);
    c.put("producer-auto-create-topic", this::autoCreateTopic);
    c.put("admin-describe-cluster", this::describeCluster);
    c.put("admin-topics", this::adminTopics);
    c.put("admin-create-partitions", this::createPartitions);
    c.put("admin-configs", this::configs);
    c.put("admin-consumer-groups", this::adminGroups);
    c.put("admin-list-offsets", this::listOffsets);
    c.put("admin-delete-records", this::deleteRecords);
    c.put("admin-group-offsets", this::groupOffsets);
    c.put("admin-acls", this::acls);
    c.put("admin-client-quotas", this::quotas);
    c.put("admin-scram-credentials", this::scram);
    c.put("admin-features", this::features);
    c.put("admin-log-dirs", this::logDirs);
    c.put("admin-reassign-and-elect-leaders", this::reassignAndElect);
    c.put("admin-describe-producers", this::describeProducers);
    c.put("admin-transactions", this::adminTransactions);
    c.put("admin-fence-producers", this::fenceProducers);
    c.put("admin-create-topics-errors", this::createTopicsErrors);
    c.put("admin-topic-ids", this::topicIds);
    c.put("admin-authorized-operations", this::authorizedOperations);
    c.put("admin-topic-config-listing", this::topicConfigListing);
    return c;
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: Conformance BOOTSTRAP [CHECK...]");
      System.exit(2);
    }
    Conformance run = new Conformance(args[0]);
    Map<String, Check> all = run.checks();
    List<String> names =
        args.length > 1 ? Arrays.asList(args).subList(1, args.length) : new ArrayList<>(all.keySet());
    int passed = 0;
    int failed = 0;
    ExecutorService executor = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r);
      t.setDaemon(true);
      return t;
    });
    try {
      run.replicationFactor = Math.min(3, run.admin.describeCluster().nodes().get().size());
      // Which protocol generation the client will use, e.g. transaction.version 2 (KIP-890).
      var finalized = run.admin.describeFeatures().featureMetadata().get().finalizedFeatures();
      System.out.println("FEATURES " + new TreeMap<>(finalized).entrySet().stream()
          .map(e -> e.getKey() + "=" + e.getValue().maxVersionLevel()).collect(Collectors.joining(",")));
      Map<String, Started> started = new HashMap<>();
      for (String name : names) {
        Check check = all.get(name);
        String failure = null;
        if (check == null) {
          failure = "no such check";
        } else {
          // The group checks wait on rebalances, not on the CPU: all of them start together
          // when the first comes up, each on its own topic and group.
          if (SIDE_BY_SIDE.contains(name) && !started.containsKey(name)) {
            for (String other : names) {
              if (SIDE_BY_SIDE.contains(other) && all.containsKey(other) && !started.containsKey(other))
                started.put(other, Started.start(executor, all.get(other)));
            }
          }
          Started s = started.computeIfAbsent(name, n -> Started.start(executor, check));
          Future<?> future = s.future();
          try {
            long remainingMs = CHECK_TIMEOUT_MS - (System.nanoTime() - s.startNs()) / 1_000_000;
            future.get(Math.max(remainingMs, 1), TimeUnit.MILLISECONDS);
          } catch (TimeoutException e) {
            future.cancel(true);
            failure = "timed out after " + CHECK_TIMEOUT_MS + " ms";
          } catch (ExecutionException e) {
            failure = describe(e.getCause());
          }
        }
        Started s = started.get(name);
        long ms = s == null ? 0 : s.elapsedMs();
        if (failure == null) {
          passed++;
          System.out.println("CHECK " + name + " PASS " + ms);
        } else {
          failed++;
          System.out.println("CHECK " + name + " FAIL " + ms + " " + failure.replaceAll("\\s+", " "));
        }
        System.out.flush();
      }
    } finally {
      run.admin.close(Duration.ofSeconds(5));
    }
    System.out.println("DONE " + passed + " " + failed);
    System.out.flush();
    // Clients cancelled by a timeout may leave threads behind: exit regardless.
    System.exit(0);
  }

  static String describe(Throwable t) {
    StringBuilder s = new StringBuilder();
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (s.length() > 0) s.append(" <- ");
      s.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
    }
    return s.toString();
  }

  // ---------------------------------------------------------------- helpers

  static void expect(boolean condition, String message) {
    if (!condition) throw new AssertionError(message);
  }

  static void expectEqual(Object expected, Object actual, String what) {
    if (!java.util.Objects.equals(expected, actual)) {
      throw new AssertionError(what + ": expected " + expected + ", got " + actual);
    }
  }

  static byte[] bytes(String s) {
    return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
  }

  static String str(byte[] b) {
    return b == null ? null : new String(b, StandardCharsets.UTF_8);
  }

  String topic(String name) {
    return prefix + "-" + name;
  }

  String createTopic(String name, int partitions, Map<String, String> configs) throws Exception {
    String topic = topic(name);
    NewTopic t = new NewTopic(topic, partitions, (short) replicationFactor).configs(configs);
    admin.createTopics(List.of(t)).all().get();
    awaitListed(topic);
    return topic;
  }

  /**
   * Waits until listTopics names the topic. Kafka's brokers learn of a new topic from the
   * controller a moment after CreateTopics answers, so a request right after it may be told
   * UNKNOWN_TOPIC_OR_PARTITION by another broker.
   */
  void awaitListed(String topic) throws Exception {
    long deadline = System.currentTimeMillis() + 15_000;
    while (!admin.listTopics().names().get().contains(topic)) {
      expect(System.currentTimeMillis() < deadline, "listTopics lacks " + topic);
      Thread.sleep(50);
    }
    // listTopics and describeTopics may go to different brokers: wait until a describe
    // finds it too, three times in a row, so the next request does not meet a broker that
    // has not heard of it.
    for (int found = 0; found < 3; ) {
      expect(System.currentTimeMillis() < deadline, "describeTopics does not find " + topic);
      try {
        admin.describeTopics(List.of(topic)).allTopicNames().get();
        found++;
      } catch (ExecutionException e) {
        if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) throw e;
        found = 0;
        Thread.sleep(50);
      }
    }
  }

  String createTopic(String name, int partitions) throws Exception {
    return createTopic(name, partitions, Map.of());
  }

  Properties producerProps(Map<String, Object> extra) {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
    p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30_000);
    p.putAll(extra);
    return p;
  }

  KafkaProducer<byte[], byte[]> producer(Map<String, Object> extra) {
    return new KafkaProducer<>(producerProps(extra));
  }

  KafkaConsumer<byte[], byte[]> consumer(Map<String, Object> extra) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
    p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
    p.putAll(extra);
    return new KafkaConsumer<>(p);
  }

  /** A record as read back: what the checks compare. */
  record Rec(int partition, long offset, String key, String value, List<String> headers) {
    static Rec of(ConsumerRecord<byte[], byte[]> r) {
      List<String> h = new ArrayList<>();
      for (Header header : r.headers()) h.add(header.key() + "=" + str(header.value()));
      return new Rec(r.partition(), r.offset(), str(r.key()), str(r.value()), h);
    }

    String kv() {
      return key + "=" + value;
    }
  }

  /**
   * Reads every partition of `topic` from its log start to its end (the high watermark, or the
   * last stable offset under read_committed) with an assigned consumer, and returns the records
   * in partition then offset order.
   */
  List<Rec> readAll(String topic, String isolation) throws Exception {
    return readAll(topic, isolation, 0);
  }

  /**
   * As readAll, after waiting until the partitions' ends lie `atLeast` offsets past their log
   * starts in all: with acks=0 or 1 a producer hears back before the high watermark moves.
   */
  List<Rec> readAll(String topic, String isolation, long atLeast) throws Exception {
    try (KafkaConsumer<byte[], byte[]> c =
        consumer(Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
      List<TopicPartition> tps = c.partitionsFor(topic).stream()
          .map(i -> new TopicPartition(topic, i.partition()))
          .collect(Collectors.toList());
      c.assign(tps);
      c.seekToBeginning(tps);
      long deadline = System.currentTimeMillis() + 30_000;
      Map<TopicPartition, Long> begin = c.beginningOffsets(tps);
      Map<TopicPartition, Long> end = c.endOffsets(tps);
      while (tps.stream().mapToLong(tp -> end.get(tp) - begin.get(tp)).sum() < atLeast) {
        expect(System.currentTimeMillis() < deadline, "ends " + end + " short of " + atLeast + " records");
        Thread.sleep(50);
        end.putAll(c.endOffsets(tps));
      }
      List<Rec> out = new ArrayList<>();
      while (true) {
        boolean done = true;
        for (TopicPartition tp : tps) if (c.position(tp) < end.get(tp)) done = false;
        if (done) break;
        expect(System.currentTimeMillis() < deadline, "reading " + topic + " to " + end + " timed out");
        for (ConsumerRecord<byte[], byte[]> r : c.poll(POLL)) out.add(Rec.of(r));
      }
      out.sort((a, b) -> a.partition != b.partition
          ? Integer.compare(a.partition, b.partition)
          : Long.compare(a.offset, b.offset));
      return out;
    }
  }

  static List<String> values(List<Rec> recs) {
    return recs.stream().map(Rec::value).collect(Collectors.toList());
  }

  // ---------------------------------------------------------------- producer checks

  void producerAcks(String acks) throws Exception {
    String topic = createTopic("acks-" + acks, 2);
    List<String> sent = new ArrayList<>();
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of(
        ProducerConfig.ACKS_CONFIG, acks, ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false))) {
      List<Future<RecordMetadata>> futures = new ArrayList<>();
      for (int i = 0; i < 40; i++) {
        String v = "acks" + acks + "-" + i;
        sent.add(v);
        futures.add(p.send(new ProducerRecord<>(topic, i % 2, bytes("k" + i), bytes(v))));
      }
      p.flush();
      long[] next = {0, 0};
      for (int i = 0; i < futures.size(); i++) {
        RecordMetadata m = futures.get(i).get();
        expectEqual(i % 2, m.partition(), "partition of record " + i);
        if (acks.equals("0")) {
          expectEqual(-1L, m.offset(), "acks=0 offset (unknown)");
        } else {
          expectEqual(next[i % 2]++, m.offset(), "offset of record " + i);
        }
      }
    }
    List<Rec> got = readAll(topic, "read_uncommitted", 40);
    expectEqual(40, got.size(), "records read back");
    List<String> want = new ArrayList<>();
    for (int part = 0; part < 2; part++) {
      for (int i = part; i < 40; i += 2) want.add(sent.get(i));
    }
    expectEqual(want, values(got), "values in partition and offset order");
  }

  void idempotentProducer() throws Exception {
    String topic = createTopic("idempotent", 3);
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of(
        ProducerConfig.ACKS_CONFIG, "all",
        ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true,
        ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 5,
        ProducerConfig.BATCH_SIZE_CONFIG, 512))) {
      for (int i = 0; i < 300; i++) {
        p.send(new ProducerRecord<>(topic, i % 3, null, bytes(String.format("%04d", i))));
      }
      p.flush();
    }
    List<Rec> got = readAll(topic, "read_uncommitted");
    expectEqual(300, got.size(), "records read back");
    for (int part = 0; part < 3; part++) {
      int partition = part;
      List<String> values = got.stream().filter(r -> r.partition == partition)
          .map(Rec::value).collect(Collectors.toList());
      List<String> want = new ArrayList<>();
      for (int i = part; i < 300; i += 3) want.add(String.format("%04d", i));
      expectEqual(want, values, "partition " + part + " exactly once, in order");
    }
  }

  void transactions() throws Exception {
    String topic = createTopic("txn", 2);
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of(
        ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "-txn",
        ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 30_000))) {
      p.initTransactions();
      String[][] rounds = {{"c1", "commit"}, {"a1", "abort"}, {"c2", "commit"}, {"a2", "abort"}};
      for (String[] round : rounds) {
        p.beginTransaction();
        for (int i = 0; i < 6; i++) {
          p.send(new ProducerRecord<>(topic, i % 2, null, bytes(round[0] + "-" + i)));
        }
        if (round[1].equals("commit")) {
          p.commitTransaction();
        } else {
          // Sent first: an abort drops the batches still waiting in the producer.
          p.flush();
          p.abortTransaction();
        }
      }
      // A last transaction left open: read_committed must stop before it.
      p.beginTransaction();
      p.send(new ProducerRecord<>(topic, 0, null, bytes("open-0"))).get();
      List<Rec> committed = readAll(topic, "read_committed");
      Set<String> want = new HashSet<>();
      for (String prefix : List.of("c1", "c2")) for (int i = 0; i < 6; i++) want.add(prefix + "-" + i);
      expectEqual(new java.util.TreeSet<>(want), new java.util.TreeSet<>(values(committed)),
          "read_committed sees exactly the committed records");
      expectEqual(12, committed.size(), "read_committed record count");
      List<Rec> uncommitted = readAll(topic, "read_uncommitted");
      expectEqual(25, uncommitted.size(), "read_uncommitted sees committed, aborted and open records");
      p.abortTransaction();
    }
  }

  void transactionalOffsets() throws Exception {
    String input = createTopic("ctp-in", 1);
    String output = createTopic("ctp-out", 1);
    String group = prefix + "-ctp";
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
      for (int i = 0; i < 10; i++) p.send(new ProducerRecord<>(input, 0, null, bytes("in-" + i)));
      p.flush();
    }
    TopicPartition in = new TopicPartition(input, 0);
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of(
            ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "-ctp"));
        KafkaConsumer<byte[], byte[]> c = consumer(Map.of(
            ConsumerConfig.GROUP_ID_CONFIG, group,
            ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
      p.initTransactions();
      c.subscribe(List.of(input));
      List<ConsumerRecord<byte[], byte[]>> batch = new ArrayList<>();
      long deadline = System.currentTimeMillis() + 30_000;
      while (batch.size() < 10) {
        expect(System.currentTimeMillis() < deadline, "consumed " + batch.size() + " of 10");
        c.poll(POLL).forEach(batch::add);
      }
      // Abort: the group's offset must not move.
      p.beginTransaction();
      p.send(new ProducerRecord<>(output, 0, null, bytes("aborted")));
      p.sendOffsetsToTransaction(Map.of(in, new OffsetAndMetadata(5)), c.groupMetadata());
      p.abortTransaction();
      Map<TopicPartition, OffsetAndMetadata> afterAbort =
          admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
      expect(afterAbort.get(in) == null, "offset after abort: " + afterAbort.get(in));
      p.beginTransaction();
      p.send(new ProducerRecord<>(output, 0, null, bytes("committed")));
      p.sendOffsetsToTransaction(Map.of(in, new OffsetAndMetadata(10)), c.groupMetadata());
      p.commitTransaction();
      // The consumer asks for stable offsets (it waits out a commit whose markers are still
      // being written); the admin's plain OffsetFetch sees it once the markers are written.
      expectEqual(10L, c.committed(Set.of(in)).get(in).offset(), "consumer's committed offset");
      long deadline2 = System.currentTimeMillis() + 15_000;
      while (true) {
        OffsetAndMetadata o = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().get(in);
        if (o != null && o.offset() == 10L) break;
        expect(System.currentTimeMillis() < deadline2, "offset after commit: " + o);
        Thread.sleep(100);
      }
    }
    expectEqual(List.of("committed"), values(readAll(output, "read_committed")), "output");
  }

  void headers() throws Exception {
    String topic = createTopic("headers", 1);
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
      List<Header> h = List.of(
          new RecordHeader("a", bytes("1")),
          new RecordHeader("a", bytes("2")),
          new RecordHeader("empty", new byte[0]),
          new RecordHeader("null", null),
          new RecordHeader("ünï", bytes("ç")));
      p.send(new ProducerRecord<>(topic, 0, null, bytes("k"), bytes("v"), h)).get();
      p.send(new ProducerRecord<>(topic, 0, null, bytes("k2"), null, List.of())).get();
    }
    List<Rec> got = readAll(topic, "read_uncommitted");
    expectEqual(2, got.size(), "records");
    expectEqual(List.of("a=1", "a=2", "empty=", "null=null", "ünï=ç"), got.get(0).headers(), "headers");
    expectEqual("v", got.get(0).value(), "value");
    expectEqual(List.of(), got.get(1).headers(), "no headers");
    expectEqual(null, got.get(1).value(), "null value");
  }

  void compression(String codec) throws Exception {
    String topic = createTopic("codec-" + codec, 2);
    List<String> want = new ArrayList<>();
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of(
        ProducerConfig.COMPRESSION_TYPE_CONFIG, codec, ProducerConfig.LINGER_MS_CONFIG, 20))) {
      for (int i = 0; i < 200; i++) {
        String v = i % 50 == 0 ? (codec + " compressible ").repeat(500) : codec + "-" + i;
        p.send(new ProducerRecord<>(topic, 0, bytes("k" + (i % 7)), bytes(v)));
        want.add(v);
      }
      p.flush();
    }
    List<Rec> got = readAll(topic, "read_uncommitted");
    expectEqual(want.size(), got.size(), "records read back");
    expectEqual(want, values(got), "values");
  }

  void recordNearMax() throws Exception {
    String topic = createTopic("near-max", 1);
    // message.max.bytes is 1048588 by default: a batch of one 1,000,000-byte record fits.
    byte[] value = new byte[1_000_000];
    Arrays.fill(value, (byte) 'x');
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of(
        ProducerConfig.MAX_REQUEST_SIZE_CONFIG, 2_000_000))) {
      RecordMetadata m = p.send(new ProducerRecord<>(topic, 0, null, value)).get();
      expectEqual(0L, m.offset(), "offset");
    }
    List<Rec> got = readAll(topic, "read_uncommitted");
    expectEqual(1, got.size(), "records");
    expectEqual(1_000_000, got.get(0).value().length(), "value length");
  }

  void recordTooLarge() throws Exception {
    String topic = createTopic("too-large", 1);
    byte[] value = new byte[1_100_000];
    // The producer's own limit is raised so that the broker is the one to refuse.
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of(
        ProducerConfig.MAX_REQUEST_SIZE_CONFIG, 3_000_000, ProducerConfig.RETRIES_CONFIG, 0,
        ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false))) {
      try {
        p.send(new ProducerRecord<>(topic, 0, null, value)).get();
        throw new AssertionError("a record over message.max.bytes was accepted");
      } catch (ExecutionException e) {
        expect(e.getCause() instanceof RecordTooLargeException,
            "expected RecordTooLargeException, got " + describe(e.getCause()));
      }
      // The producer goes on working after the refusal.
      RecordMetadata m = p.send(new ProducerRecord<>(topic, 0, null, bytes("small"))).get();
      expectEqual(0L, m.offset(), "offset of the next record");
    }
  }

  /**
   * message.timestamp.after.max.ms is one hour by default since Kafka 4.0: a record stamped
   * two hours ahead is refused (InvalidTimestampException), one stamped a day back accepted.
   */
  void timestampFarAhead() throws Exception {
    String topic = createTopic("future-timestamp", 1);
    long now = System.currentTimeMillis();
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of(ProducerConfig.RETRIES_CONFIG, 0,
        ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false))) {
      try {
        p.send(new ProducerRecord<>(topic, 0, now + 2 * 3_600_000L, null, bytes("ahead"))).get();
        throw new AssertionError("a record two hours ahead was accepted");
      } catch (ExecutionException e) {
        expect(e.getCause() instanceof org.apache.kafka.common.errors.InvalidTimestampException,
            "expected InvalidTimestampException, got " + describe(e.getCause()));
      }
      RecordMetadata m = p.send(new ProducerRecord<>(topic, 0, now - 86_400_000L, null, bytes("behind"))).get();
      expectEqual(0L, m.offset(), "offset of a record a day back");
    }
  }

  // ---------------------------------------------------------------- consumer groups

  /** Produces `per` records to each partition of `topic`, values "p<partition>-<i>". */
  void fill(String topic, int partitions, int per) throws Exception {
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
      for (int part = 0; part < partitions; part++) {
        for (int i = 0; i < per; i++) {
          p.send(new ProducerRecord<>(topic, part, null, bytes("p" + part + "-" + i)));
        }
      }
      p.flush();
    }
  }

  /**
   * Two consumers of one group share a 4-partition topic: each ends with a non-empty,
   * disjoint share covering every partition, reads its partitions to the end and commits;
   * then the committed offsets are the partitions' ends. Returns the group for more checks.
   */
  void twoConsumers(String name, Map<String, Object> extra, GroupType type, String assignor)
      throws Exception {
    int partitions = 4;
    int per = 10;
    String topic = createTopic(name, partitions);
    String group = prefix + "-" + name;
    fill(topic, partitions, per);
    Map<String, Object> props = new HashMap<>(extra);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 3);
    try (KafkaConsumer<byte[], byte[]> c1 = consumer(props);
        KafkaConsumer<byte[], byte[]> c2 = consumer(props)) {
      c1.subscribe(List.of(topic));
      c2.subscribe(List.of(topic));
      Set<String> seen = new HashSet<>();
      long deadline = System.currentTimeMillis() + 60_000;
      while (true) {
        expect(System.currentTimeMillis() < deadline,
            "no stable split: c1 " + c1.assignment() + ", c2 " + c2.assignment() + ", read " + seen.size());
        for (KafkaConsumer<byte[], byte[]> c : List.of(c1, c2)) {
          for (ConsumerRecord<byte[], byte[]> r : c.poll(POLL)) seen.add(r.partition() + "@" + r.offset());
        }
        Set<TopicPartition> a1 = c1.assignment();
        Set<TopicPartition> a2 = c2.assignment();
        if (a1.isEmpty() || a2.isEmpty() || a1.size() + a2.size() != partitions) continue;
        Set<TopicPartition> union = new HashSet<>(a1);
        union.addAll(a2);
        if (union.size() != partitions) continue;
        boolean atEnd = true;
        for (TopicPartition tp : a1) if (c1.position(tp) < per) atEnd = false;
        for (TopicPartition tp : a2) if (c2.position(tp) < per) atEnd = false;
        if (atEnd) break;
      }
      expectEqual(partitions * per, seen.size(), "distinct records read by the group");
      c1.commitSync();
      c2.commitSync();
      ConsumerGroupDescription d =
          admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
      expectEqual(GroupState.STABLE, d.groupState(), "group state");
      expectEqual(2, d.members().size(), "members");
      expectEqual(type, d.type(), "group type");
      if (assignor != null) expectEqual(assignor, d.partitionAssignor(), "assignor");
      Set<TopicPartition> described = new HashSet<>();
      d.members().forEach(m -> described.addAll(m.assignment().topicPartitions()));
      expectEqual(partitions, described.size(), "partitions assigned in the description");
    }
    Map<TopicPartition, OffsetAndMetadata> committed =
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
    Map<Integer, Long> byPartition = new TreeMap<>();
    committed.forEach((tp, o) -> byPartition.put(tp.partition(), o.offset()));
    expectEqual(Map.of(0, 10L, 1, 10L, 2, 10L, 3, 10L), byPartition, "committed offsets");
  }

  void classicGroup(String assignorClass, String protocolName) throws Exception {
    twoConsumers("classic-" + protocolName,
        Map.of(
            ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic",
            ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
            "org.apache.kafka.clients.consumer." + assignorClass),
        GroupType.CLASSIC, protocolName);
  }

  void consumerProtocolGroup() throws Exception {
    twoConsumers("kip848", Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer"),
        GroupType.CONSUMER, "uniform");
  }

  @SuppressWarnings("deprecation")
  void consumerProtocolRange() throws Exception {
    twoConsumers("kip848-range", Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer",
        ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, "range"), GroupType.CONSUMER, "range");
  }

  /**
   * A static member (group.instance.id) that closes stays in the group (no LeaveGroup); the
   * same instance coming back takes its place without a second member; the Admin removes it
   * by instance id (LeaveGroup v3+), leaving the group empty.
   */
  void staticMembership() throws Exception {
    String topic = createTopic("static", 2);
    String group = prefix + "-static";
    fill(topic, 2, 3);
    Map<String, Object> props = Map.of(ConsumerConfig.GROUP_ID_CONFIG, group,
        ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "instance-1",
        ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic",
        ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 30_000);
    for (int round = 0; round < 2; round++) {
      try (KafkaConsumer<byte[], byte[]> c = consumer(props)) {
        c.subscribe(List.of(topic));
        long deadline = System.currentTimeMillis() + 30_000;
        while (c.assignment().size() != 2) {
          expect(System.currentTimeMillis() < deadline, "round " + round + ": assigned " + c.assignment());
          c.poll(POLL);
        }
        c.commitSync();
      }
      ConsumerGroupDescription d =
          admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
      expectEqual(1, d.members().size(), "round " + round + ": members after close");
      expectEqual(Optional.of("instance-1"), d.members().iterator().next().groupInstanceId(), "instance id");
      expectEqual(GroupState.STABLE, d.groupState(), "round " + round + ": state after close");
    }
    admin.removeMembersFromConsumerGroup(group, new org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions(
        List.of(new org.apache.kafka.clients.admin.MemberToRemove("instance-1")))).all().get();
    ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
    expectEqual(0, d.members().size(), "members after removal");
    expectEqual(GroupState.EMPTY, d.groupState(), "state after removal");
    // Removing an unknown instance fails for that member.
    try {
      admin.removeMembersFromConsumerGroup(group, new org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions(
          List.of(new org.apache.kafka.clients.admin.MemberToRemove("instance-9")))).all().get();
      throw new AssertionError("removing an unknown instance succeeded");
    } catch (ExecutionException e) {
      expect(e.getCause() instanceof org.apache.kafka.common.errors.UnknownMemberIdException,
          "expected UnknownMemberIdException, got " + describe(e.getCause()));
    }
  }

  /** A fetch below the log start offset: with auto.offset.reset=none the consumer throws. */
  void offsetOutOfRange() throws Exception {
    String topic = createTopic("out-of-range", 1);
    TopicPartition tp = new TopicPartition(topic, 0);
    fill(topic, 1, 10);
    admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(5))).all().get();
    try (KafkaConsumer<byte[], byte[]> c = consumer(Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none"))) {
      c.assign(List.of(tp));
      c.seek(tp, 2);
      long deadline = System.currentTimeMillis() + 20_000;
      try {
        while (true) {
          expect(System.currentTimeMillis() < deadline, "no OffsetOutOfRangeException");
          expect(c.poll(POLL).isEmpty(), "records returned below the log start offset");
        }
      } catch (org.apache.kafka.clients.consumer.OffsetOutOfRangeException e) {
        expectEqual(Map.of(tp, 2L), e.offsetOutOfRangePartitions(), "out-of-range partitions");
      }
      // Past the end too.
      c.seek(tp, 50);
      deadline = System.currentTimeMillis() + 20_000;
      try {
        while (true) {
          expect(System.currentTimeMillis() < deadline, "no OffsetOutOfRangeException past the end");
          expect(c.poll(POLL).isEmpty(), "records returned past the end");
        }
      } catch (org.apache.kafka.clients.consumer.OffsetOutOfRangeException e) {
        expectEqual(Map.of(tp, 50L), e.offsetOutOfRangePartitions(), "out-of-range partitions past the end");
      }
    }
  }

  /**
   * auto.create.topics.enable (true on both brokers here): producing creates the topic with
   * num.partitions (1) and default.replication.factor (3 on both clusters here) replicas.
   */
  void autoCreateTopic() throws Exception {
    String topic = topic("auto-created");
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
      RecordMetadata m = p.send(new ProducerRecord<>(topic, bytes("k"), bytes("v"))).get();
      expectEqual(0L, m.offset(), "offset");
    }
    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
    expectEqual(1, d.partitions().size(), "partitions (num.partitions)");
    expectEqual(replicationFactor, d.partitions().get(0).replicas().size(), "replicas (default.replication.factor)");
    // CreateTopics leaving both to the broker (-1, KIP-464) gets the same defaults.
    String defaults = topic("broker-defaults");
    admin.createTopics(List.of(new NewTopic(defaults, Optional.empty(), Optional.empty()))).all().get();
    awaitListed(defaults);
    d = admin.describeTopics(List.of(defaults)).allTopicNames().get().get(defaults);
    expectEqual(1, d.partitions().size(), "CreateTopics partitions (num.partitions)");
    expectEqual(replicationFactor, d.partitions().get(0).replicas().size(),
        "CreateTopics replicas (default.replication.factor)");
  }

  // ---------------------------------------------------------------- admin

  void describeCluster() throws Exception {
    DescribeClusterResult r = admin.describeCluster();
    Collection<org.apache.kafka.common.Node> nodes = r.nodes().get();
    expect(!nodes.isEmpty(), "no nodes");
    String clusterId = r.clusterId().get();
    expect(clusterId != null && !clusterId.isEmpty(), "no cluster id");
    org.apache.kafka.common.Node controller = r.controller().get();
    expect(controller != null && !controller.isEmpty(), "no controller");
    Set<String> addresses = new HashSet<>();
    for (org.apache.kafka.common.Node n : nodes) addresses.add(n.host() + ":" + n.port());
    Set<String> given = new HashSet<>(Arrays.asList(bootstrap.split(",")));
    expectEqual(given, addresses, "nodes' addresses");
  }

  void adminTopics() throws Exception {
    String a = topic("admin-a");
    String b = topic("admin-b");
    admin.createTopics(List.of(
        new NewTopic(a, 3, (short) replicationFactor).configs(Map.of("retention.ms", "3600000")),
        new NewTopic(b, 1, (short) replicationFactor))).all().get();
    // Creating it again fails with TopicExistsException.
    try {
      admin.createTopics(List.of(new NewTopic(a, 1, (short) replicationFactor))).all().get();
      throw new AssertionError("second create succeeded");
    } catch (ExecutionException e) {
      expect(e.getCause() instanceof org.apache.kafka.common.errors.TopicExistsException,
          "expected TopicExistsException, got " + describe(e.getCause()));
    }
    awaitListed(a);
    awaitListed(b);
    Map<String, TopicDescription> d = admin.describeTopics(List.of(a, b)).allTopicNames().get();
    expectEqual(3, d.get(a).partitions().size(), "partitions of " + a);
    for (TopicPartitionInfo p : d.get(a).partitions()) {
      expectEqual(replicationFactor, p.replicas().size(), "replicas of partition " + p.partition());
      expectEqual(replicationFactor, p.isr().size(), "isr of partition " + p.partition());
      expect(p.leader() != null && !p.leader().isEmpty(), "no leader for partition " + p.partition());
    }
    expect(d.get(a).topicId() != null && !d.get(a).topicId().equals(org.apache.kafka.common.Uuid.ZERO_UUID),
        "no topic id");
    admin.deleteTopics(List.of(a, b)).all().get();
    long deadline = System.currentTimeMillis() + 30_000;
    while (true) {
      Set<String> now = admin.listTopics().names().get();
      if (!now.contains(a) && !now.contains(b)) break;
      expect(System.currentTimeMillis() < deadline, "deleted topics still listed");
      Thread.sleep(200);
    }
    try {
      admin.describeTopics(List.of(a)).allTopicNames().get();
      throw new AssertionError("describing a deleted topic succeeded");
    } catch (ExecutionException e) {
      expect(e.getCause() instanceof UnknownTopicOrPartitionException,
          "expected UnknownTopicOrPartitionException, got " + describe(e.getCause()));
    }
  }

  void createPartitions() throws Exception {
    String topic = createTopic("grow", 1);
    admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
    long deadline = System.currentTimeMillis() + 30_000;
    while (admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size() != 3) {
      expect(System.currentTimeMillis() < deadline, "topic did not grow to 3 partitions");
      Thread.sleep(200);
    }
    try {
      admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get();
      throw new AssertionError("shrinking to 2 partitions succeeded");
    } catch (ExecutionException e) {
      expect(e.getCause() instanceof org.apache.kafka.common.errors.InvalidPartitionsException,
          "expected InvalidPartitionsException, got " + describe(e.getCause()));
    }
    // The new partition takes records.
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
      expectEqual(0L, p.send(new ProducerRecord<>(topic, 2, null, bytes("x"))).get().offset(), "offset");
    }
  }

  ConfigEntry topicConfig(String topic, String name) throws Exception {
    ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
    long deadline = System.currentTimeMillis() + 15_000;
    while (true) {
      try {
        Config c = admin.describeConfigs(List.of(r)).all().get().get(r);
        return c.get(name);
      } catch (ExecutionException e) {
        // A broker that has not yet learnt of a new topic (see awaitListed).
        if (!(e.getCause() instanceof UnknownTopicOrPartitionException)
            || System.currentTimeMillis() > deadline) throw e;
        Thread.sleep(50);
      }
    }
  }

  /**
   * Waits until describeConfigs shows `name` at `value` from `source`: Kafka's brokers apply a
   * config change from the metadata log a moment after the controller accepted it.
   */
  void awaitConfig(String topic, String name, String value, ConfigEntry.ConfigSource source) throws Exception {
    ConfigEntry[] last = {null};
    await(() -> name + " never became " + value + " (" + source + "); last " + last[0], () -> {
      last[0] = topicConfig(topic, name);
      return last[0] != null && value.equals(last[0].value()) && last[0].source() == source;
    });
  }

  void configs() throws Exception {
    String topic = createTopic("configs", 1, Map.of("cleanup.policy", "compact"));
    ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
    ConfigEntry policy = topicConfig(topic, "cleanup.policy");
    expectEqual("compact", policy.value(), "cleanup.policy");
    expectEqual(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, policy.source(), "cleanup.policy source");
    ConfigEntry retention = topicConfig(topic, "retention.ms");
    expectEqual("604800000", retention.value(), "default retention.ms");
    expectEqual(ConfigEntry.ConfigSource.DEFAULT_CONFIG, retention.source(), "default retention.ms source");
    admin.incrementalAlterConfigs(Map.of(r, List.of(
        new AlterConfigOp(new ConfigEntry("retention.ms", "123456"), AlterConfigOp.OpType.SET),
        new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.APPEND)))).all().get();
    awaitConfig(topic, "retention.ms", "123456", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
    awaitConfig(topic, "cleanup.policy", "compact,delete", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
    admin.incrementalAlterConfigs(Map.of(r, List.of(
        new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get();
    awaitConfig(topic, "retention.ms", "604800000", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
    // An invalid value is refused.
    try {
      admin.incrementalAlterConfigs(Map.of(r, List.of(
          new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get();
      throw new AssertionError("retention.ms=soon accepted");
    } catch (ExecutionException e) {
      expect(e.getCause() instanceof org.apache.kafka.common.errors.InvalidConfigurationException
              || e.getCause() instanceof org.apache.kafka.common.errors.InvalidRequestException,
          "expected InvalidConfigurationException, got " + describe(e.getCause()));
    }
    // A broker's configs: message.max.bytes at its default.
    org.apache.kafka.common.Node node = admin.describeCluster().nodes().get().iterator().next();
    ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, node.idString());
    ConfigEntry max = admin.describeConfigs(List.of(broker)).all().get().get(broker).get("message.max.bytes");
    expect(max != null, "broker lacks message.max.bytes");
    expectEqual("1048588", max.value(), "message.max.bytes");
  }

  void adminGroups() throws Exception {
    String topic = createTopic("groups", 2);
    String group = prefix + "-groups";
    fill(topic, 2, 5);
    try (KafkaConsumer<byte[], byte[]> c = consumer(Map.of(ConsumerConfig.GROUP_ID_CONFIG, group))) {
      c.subscribe(List.of(topic));
      int read = 0;
      long deadline = System.currentTimeMillis() + 30_000;
      while (read < 10) {
        expect(System.currentTimeMillis() < deadline, "read " + read + " of 10");
        read += c.poll(POLL).count();
      }
      c.commitSync();
      Collection<GroupListing> listed = admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get();
      Optional<GroupListing> mine = listed.stream().filter(g -> g.groupId().equals(group)).findFirst();
      expect(mine.isPresent(), "listGroups lacks " + group + ": " + listed);
      expectEqual(Optional.of(GroupState.STABLE), mine.get().groupState(), "listed state");
      ConsumerGroupDescription d =
          admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
      expectEqual(GroupState.STABLE, d.groupState(), "described state");
      expectEqual(1, d.members().size(), "members");
      expectEqual(2, d.members().iterator().next().assignment().topicPartitions().size(), "assigned");
      expect(d.coordinator() != null && !d.coordinator().isEmpty(), "no coordinator");
    }
    ConsumerGroupDescription d =
        admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
    expectEqual(GroupState.EMPTY, d.groupState(), "state after the consumer left");
    Map<TopicPartition, OffsetAndMetadata> offsets =
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
    expectEqual(2, offsets.size(), "committed partitions");
    for (OffsetAndMetadata o : offsets.values()) expectEqual(5L, o.offset(), "committed offset");
    admin.deleteConsumerGroups(List.of(group)).all().get();
    Collection<GroupListing> after = admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get();
    expect(after.stream().noneMatch(g -> g.groupId().equals(group)), "deleted group still listed");
  }

  void listOffsets() throws Exception {
    String topic = createTopic("list-offsets", 1);
    TopicPartition tp = new TopicPartition(topic, 0);
    long base = System.currentTimeMillis() - 60_000;
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
      // Timestamps 0s, 10s, 20s, 30s, 40s past base; the largest is in the middle.
      long[] ts = {0, 10_000, 40_000, 20_000, 30_000};
      for (long t : ts) p.send(new ProducerRecord<>(topic, 0, base + t, null, bytes("t" + t))).get();
    }
    expectEqual(0L, offset(tp, OffsetSpec.earliest()), "earliest");
    expectEqual(5L, offset(tp, OffsetSpec.latest()), "latest");
    expectEqual(2L, offset(tp, OffsetSpec.forTimestamp(base + 15_000)), "first offset with a timestamp at or after base+15s");
    expectEqual(1L, offset(tp, OffsetSpec.forTimestamp(base + 10_000)), "exact timestamp");
    expectEqual(-1L, offset(tp, OffsetSpec.forTimestamp(base + 50_000)), "past the last timestamp");
    ListOffsetsResult.ListOffsetsResultInfo max =
        admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp).get();
    expectEqual(2L, max.offset(), "max timestamp offset");
    expectEqual(base + 40_000, max.timestamp(), "max timestamp");
  }

  long offset(TopicPartition tp, OffsetSpec spec) throws Exception {
    return admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get().offset();
  }

  void deleteRecords() throws Exception {
    String topic = createTopic("delete-records", 1);
    TopicPartition tp = new TopicPartition(topic, 0);
    fill(topic, 1, 10);
    long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp).get().lowWatermark();
    expectEqual(4L, low, "low watermark");
    expectEqual(4L, offset(tp, OffsetSpec.earliest()), "earliest after delete");
    List<Rec> got = readAll(topic, "read_uncommitted");
    expectEqual(6, got.size(), "records left");
    expectEqual(4L, got.get(0).offset(), "first offset left");
    // Past the high watermark: OffsetOutOfRangeException.
    try {
      admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(11))).all().get();
      throw new AssertionError("deleting past the high watermark succeeded");
    } catch (ExecutionException e) {
      expect(e.getCause() instanceof org.apache.kafka.common.errors.OffsetOutOfRangeException,
          "expected OffsetOutOfRangeException, got " + describe(e.getCause()));
    }
    // -1 (RecordsToDelete.beforeOffset(-1)) deletes up to the high watermark.
    long all = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(-1))).lowWatermarks().get(tp).get().lowWatermark();
    expectEqual(10L, all, "low watermark after deleting all");
  }

  // ---------------------------------------------------------------- admin, second part

  /** Waits until `probe` returns true, or fails with `what` and the last probe's reason. */
  interface Probe {
    boolean ok() throws Exception;
  }

  static void await(String what, Probe probe) throws Exception {
    await(() -> what, probe);
  }

  static void await(java.util.function.Supplier<String> what, Probe probe) throws Exception {
    long deadline = System.currentTimeMillis() + 20_000;
    while (!probe.ok()) {
      expect(System.currentTimeMillis() < deadline, what.get());
      Thread.sleep(100);
    }
  }

  void groupOffsets() throws Exception {
    String topic = createTopic("group-offsets", 2);
    String group = prefix + "-group-offsets";
    fill(topic, 2, 5);
    TopicPartition p0 = new TopicPartition(topic, 0);
    TopicPartition p1 = new TopicPartition(topic, 1);
    admin.alterConsumerGroupOffsets(group, Map.of(
        p0, new OffsetAndMetadata(3, "meta"), p1, new OffsetAndMetadata(4))).all().get();
    Map<TopicPartition, OffsetAndMetadata> got =
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
    expectEqual(3L, got.get(p0).offset(), "p0 offset");
    expectEqual("meta", got.get(p0).metadata(), "p0 metadata");
    expectEqual(4L, got.get(p1).offset(), "p1 offset");
    expectEqual(GroupState.EMPTY,
        admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get().groupState(),
        "state of a group with offsets and no members");
    admin.deleteConsumerGroupOffsets(group, Set.of(p1)).all().get();
    got = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
    expectEqual(Set.of(p0), got.keySet(), "partitions with offsets after deleting p1's");
    // A consumer of the group starts where the offsets say: p0 at 3, p1 (none) at the earliest.
    try (KafkaConsumer<byte[], byte[]> c = consumer(Map.of(ConsumerConfig.GROUP_ID_CONFIG, group))) {
      c.assign(List.of(p0, p1));
      List<Rec> read = new ArrayList<>();
      long deadline = System.currentTimeMillis() + 20_000;
      while (read.size() < 7) {
        expect(System.currentTimeMillis() < deadline, "read " + read.size() + " of 7");
        for (ConsumerRecord<byte[], byte[]> r : c.poll(POLL)) read.add(Rec.of(r));
      }
      expectEqual(3L, read.stream().filter(x -> x.partition() == 0).mapToLong(Rec::offset).min().getAsLong(),
          "first p0 offset read");
    }
  }

  void acls() throws Exception {
    var topicPattern = new org.apache.kafka.common.resource.ResourcePattern(
        org.apache.kafka.common.resource.ResourceType.TOPIC, prefix + "-acl",
        org.apache.kafka.common.resource.PatternType.LITERAL);
    var prefixed = new org.apache.kafka.common.resource.ResourcePattern(
        org.apache.kafka.common.resource.ResourceType.TOPIC, prefix + "-acl-",
        org.apache.kafka.common.resource.PatternType.PREFIXED);
    var alice = new org.apache.kafka.common.acl.AclBinding(topicPattern,
        new org.apache.kafka.common.acl.AccessControlEntry("User:alice",
            "*", org.apache.kafka.common.acl.AclOperation.READ, org.apache.kafka.common.acl.AclPermissionType.ALLOW));
    var bob = new org.apache.kafka.common.acl.AclBinding(prefixed,
        new org.apache.kafka.common.acl.AccessControlEntry("User:bob", "127.0.0.1",
            org.apache.kafka.common.acl.AclOperation.WRITE, org.apache.kafka.common.acl.AclPermissionType.DENY));
    admin.createAcls(List.of(alice, bob)).all().get();
    var any = new org.apache.kafka.common.resource.ResourcePatternFilter(
        org.apache.kafka.common.resource.ResourceType.ANY, null, org.apache.kafka.common.resource.PatternType.ANY);
    var bobs = new org.apache.kafka.common.acl.AclBindingFilter(any,
        new org.apache.kafka.common.acl.AccessControlEntryFilter("User:bob", null,
            org.apache.kafka.common.acl.AclOperation.ANY, org.apache.kafka.common.acl.AclPermissionType.ANY));
    await("describeAcls never showed bob's ACL", () -> admin.describeAcls(bobs).values().get().contains(bob));
    // MATCH: the ACLs that apply to one topic name, here through bob's prefix.
    var match = new org.apache.kafka.common.acl.AclBindingFilter(
        new org.apache.kafka.common.resource.ResourcePatternFilter(org.apache.kafka.common.resource.ResourceType.TOPIC,
            prefix + "-acl-x", org.apache.kafka.common.resource.PatternType.MATCH),
        org.apache.kafka.common.acl.AccessControlEntryFilter.ANY);
    expectEqual(Set.of(bob), new HashSet<>(admin.describeAcls(match).values().get()), "ACLs matching " + prefix + "-acl-x");
    var literal = new org.apache.kafka.common.acl.AclBindingFilter(topicPattern.toFilter(),
        org.apache.kafka.common.acl.AccessControlEntryFilter.ANY);
    await("describeAcls never showed alice's ACL",
        () -> new HashSet<>(admin.describeAcls(literal).values().get()).equals(Set.of(alice)));
    var deleted = admin.deleteAcls(List.of(bobs)).all().get();
    expectEqual(Set.of(bob), new HashSet<>(deleted), "deleted ACLs");
    await("bob's ACL still described", () -> admin.describeAcls(bobs).values().get().isEmpty());
    admin.deleteAcls(List.of(literal)).all().get();
  }

  void quotas() throws Exception {
    String user = prefix + "-quota-user";
    var entity = new org.apache.kafka.common.quota.ClientQuotaEntity(Map.of(
        org.apache.kafka.common.quota.ClientQuotaEntity.USER, user,
        org.apache.kafka.common.quota.ClientQuotaEntity.CLIENT_ID, "quota-client"));
    admin.alterClientQuotas(List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration(entity, List.of(
        new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("producer_byte_rate", 1024000.0),
        new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("consumer_byte_rate", 2048000.0))))).all().get();
    var filter = org.apache.kafka.common.quota.ClientQuotaFilter.contains(List.of(
        org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntity(
            org.apache.kafka.common.quota.ClientQuotaEntity.USER, user)));
    Map<String, Double> both = Map.of("producer_byte_rate", 1024000.0, "consumer_byte_rate", 2048000.0);
    await("quotas never described as set", () -> both.equals(admin.describeClientQuotas(filter).entities().get().get(entity)));
    admin.alterClientQuotas(List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration(entity, List.of(
        new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("producer_byte_rate", null))))).all().get();
    await("quota removal never described",
        () -> Map.of("consumer_byte_rate", 2048000.0).equals(admin.describeClientQuotas(filter).entities().get().get(entity)));
    // validateOnly with an unknown quota name fails.
    try {
      admin.alterClientQuotas(List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration(entity, List.of(
          new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("no_such_quota", 1.0)))),
          new org.apache.kafka.clients.admin.AlterClientQuotasOptions().validateOnly(true)).all().get();
      throw new AssertionError("an unknown quota name was accepted");
    } catch (ExecutionException e) {
      expect(e.getCause() instanceof org.apache.kafka.common.errors.InvalidRequestException,
          "expected InvalidRequestException, got " + describe(e.getCause()));
    }
  }

  void scram() throws Exception {
    String user = prefix + "-scram-user";
    var sha256 = new org.apache.kafka.clients.admin.ScramCredentialInfo(
        org.apache.kafka.clients.admin.ScramMechanism.SCRAM_SHA_256, 4096);
    var sha512 = new org.apache.kafka.clients.admin.ScramCredentialInfo(
        org.apache.kafka.clients.admin.ScramMechanism.SCRAM_SHA_512, 8192);
    // One alteration per user and request (Kafka refuses two: DuplicateResourceException).
    admin.alterUserScramCredentials(List.of(
        new org.apache.kafka.clients.admin.UserScramCredentialUpsertion(user, sha256, "secret-256"))).all().get();
    admin.alterUserScramCredentials(List.of(
        new org.apache.kafka.clients.admin.UserScramCredentialUpsertion(user, sha512, "secret-512"))).all().get();
    await("credentials never described", () -> {
      try {
        var d = admin.describeUserScramCredentials(List.of(user)).description(user).get();
        return new HashSet<>(d.credentialInfos()).equals(Set.of(sha256, sha512));
      } catch (ExecutionException e) {
        if (e.getCause() instanceof org.apache.kafka.common.errors.ResourceNotFoundException) return false;
        throw e;
      }
    });
    admin.alterUserScramCredentials(List.of(new org.apache.kafka.clients.admin.UserScramCredentialDeletion(
        user, org.apache.kafka.clients.admin.ScramMechanism.SCRAM_SHA_512))).all().get();
    await("deleted credential still described", () -> admin.describeUserScramCredentials(List.of(user))
        .description(user).get().credentialInfos().equals(List.of(sha256)));
    try {
      admin.describeUserScramCredentials(List.of(prefix + "-nobody")).description(prefix + "-nobody").get();
      throw new AssertionError("an unknown user was described");
    } catch (ExecutionException e) {
      expect(e.getCause() instanceof org.apache.kafka.common.errors.ResourceNotFoundException,
          "expected ResourceNotFoundException, got " + describe(e.getCause()));
    }
    // Too few iterations: refused.
    try {
      admin.alterUserScramCredentials(List.of(new org.apache.kafka.clients.admin.UserScramCredentialUpsertion(
          user, new org.apache.kafka.clients.admin.ScramCredentialInfo(
              org.apache.kafka.clients.admin.ScramMechanism.SCRAM_SHA_256, 100), "x"))).all().get();
      throw new AssertionError("100 iterations accepted");
    } catch (ExecutionException e) {
      expect(e.getCause() instanceof org.apache.kafka.common.errors.UnacceptableCredentialException,
          "expected UnacceptableCredentialException, got " + describe(e.getCause()));
    }
  }

  void features() throws Exception {
    var f = admin.describeFeatures().featureMetadata().get();
    // What is finalized is within what the broker supports.
    f.finalizedFeatures().forEach((name, range) -> {
      var supported = f.supportedFeatures().get(name);
      expect(supported != null, "finalized feature " + name + " is not supported");
      expect(range.maxVersionLevel() <= supported.maxVersion(), name + " finalized above its supported range");
    });
    // updateFeatures (what kafka-features.sh sends): a validate-only safe downgrade of
    // group.version is accepted and changes nothing; a level above the range is refused.
    var groupVersion = f.finalizedFeatures().get("group.version");
    expect(groupVersion != null && groupVersion.maxVersionLevel() == 1, "group.version not finalized at 1: " + groupVersion);
    admin.updateFeatures(
        Map.of("group.version", new org.apache.kafka.clients.admin.FeatureUpdate((short) 0,
            org.apache.kafka.clients.admin.FeatureUpdate.UpgradeType.SAFE_DOWNGRADE)),
        new org.apache.kafka.clients.admin.UpdateFeaturesOptions().validateOnly(true)).all().get();
    var after = admin.describeFeatures().featureMetadata().get().finalizedFeatures().get("group.version");
    expect(after != null && after.maxVersionLevel() == 1, "a validate-only downgrade changed group.version: " + after);
    try {
      admin.updateFeatures(
          Map.of("group.version", new org.apache.kafka.clients.admin.FeatureUpdate((short) 99,
              org.apache.kafka.clients.admin.FeatureUpdate.UpgradeType.UPGRADE)),
          new org.apache.kafka.clients.admin.UpdateFeaturesOptions()).all().get();
      throw new AssertionError("group.version 99 accepted");
    } catch (ExecutionException e) {
      expect(e.getCause() instanceof org.apache.kafka.common.errors.InvalidUpdateVersionException,
          "expected InvalidUpdateVersionException, got " + describe(e.getCause()));
    }
  }

  void logDirs() throws Exception {
    String topic = createTopic("log-dirs", 1);
    fill(topic, 1, 10);
    TopicPartition tp = new TopicPartition(topic, 0);
    List<Integer> ids = admin.describeCluster().nodes().get().stream().map(org.apache.kafka.common.Node::id)
        .sorted().collect(Collectors.toList());
    await("every replica of " + tp + " never reported with data", () -> {
      var all = admin.describeLogDirs(ids).allDescriptions().get();
      int withData = 0;
      for (int id : ids) {
        var dirs = all.get(id);
        if (dirs == null || dirs.isEmpty()) return false;
        for (var d : dirs.values()) {
          if (d.error() != null) return false;
          var info = d.replicaInfos().get(tp);
          if (info != null && info.size() > 0 && !info.isFuture()) withData++;
        }
      }
      return withData == replicationFactor;
    });
    var all = admin.describeLogDirs(ids).allDescriptions().get();
    for (int id : ids) {
      for (var d : all.get(id).values()) {
        expect(d.totalBytes().isPresent() && d.usableBytes().isPresent(),
            "broker " + id + " reports no totalBytes/usableBytes (KIP-827)");
        expect(d.usableBytes().getAsLong() <= d.totalBytes().getAsLong(), "usable > total on broker " + id);
      }
    }
  }

  void reassignAndElect() throws Exception {
    List<Integer> ids = admin.describeCluster().nodes().get().stream().map(org.apache.kafka.common.Node::id)
        .sorted().collect(Collectors.toList());
    expect(ids.size() >= 3, "needs 3 brokers, has " + ids);
    int a = ids.get(0), b = ids.get(1), cc = ids.get(2);
    String topic = topic("reassign");
    TopicPartition tp = new TopicPartition(topic, 0);
    admin.createTopics(List.of(new NewTopic(topic, Map.of(0, List.of(a, b))))).all().get();
    awaitListed(topic);
    await("leader of " + tp + " never " + a, () -> leaderOf(tp) == a);
    // Move the replicas from {a, b} to {b, c}, b first: the reassignment completes.
    admin.alterPartitionReassignments(Map.of(tp, Optional.of(
        new org.apache.kafka.clients.admin.NewPartitionReassignment(List.of(b, cc))))).all().get();
    await("reassignment never completed", () ->
        !admin.listPartitionReassignments().reassignments().get().containsKey(tp)
            && replicasOf(tp).equals(List.of(b, cc)));
    await("leader never moved off the removed replica", () -> leaderOf(tp) == b || leaderOf(tp) == cc);
    // Reorder to {c, b}: c is the preferred leader; a preferred election makes it the leader.
    admin.alterPartitionReassignments(Map.of(tp, Optional.of(
        new org.apache.kafka.clients.admin.NewPartitionReassignment(List.of(cc, b))))).all().get();
    await("reorder never completed", () -> replicasOf(tp).equals(List.of(cc, b)));
    await("ISR never full", () -> isrOf(tp).size() == 2);
    if (leaderOf(tp) != cc) {
      var r = admin.electLeaders(org.apache.kafka.common.ElectionType.PREFERRED, Set.of(tp)).partitions().get();
      expect(r.get(tp).isEmpty(), "preferred election failed: " + r.get(tp));
    }
    await("leader never became the preferred replica " + cc, () -> leaderOf(tp) == cc);
    var again = admin.electLeaders(org.apache.kafka.common.ElectionType.PREFERRED, Set.of(tp)).partitions().get();
    expect(again.get(tp).isPresent()
            && again.get(tp).get() instanceof org.apache.kafka.common.errors.ElectionNotNeededException,
        "expected ElectionNotNeededException, got " + again.get(tp));
    // Cancelling when nothing is in progress: NoReassignmentInProgressException.
    try {
      admin.alterPartitionReassignments(Map.of(tp, Optional.empty())).all().get();
      throw new AssertionError("cancelling no reassignment succeeded");
    } catch (ExecutionException e) {
      expect(e.getCause() instanceof org.apache.kafka.common.errors.NoReassignmentInProgressException,
          "expected NoReassignmentInProgressException, got " + describe(e.getCause()));
    }
  }

  TopicPartitionInfo partitionInfo(TopicPartition tp) throws Exception {
    return admin.describeTopics(List.of(tp.topic())).allTopicNames().get().get(tp.topic())
        .partitions().get(tp.partition());
  }

  int leaderOf(TopicPartition tp) throws Exception {
    var leader = partitionInfo(tp).leader();
    return leader == null || leader.isEmpty() ? -1 : leader.id();
  }

  List<Integer> replicasOf(TopicPartition tp) throws Exception {
    return partitionInfo(tp).replicas().stream().map(org.apache.kafka.common.Node::id).collect(Collectors.toList());
  }

  List<Integer> isrOf(TopicPartition tp) throws Exception {
    return partitionInfo(tp).isr().stream().map(org.apache.kafka.common.Node::id).collect(Collectors.toList());
  }

  void describeProducers() throws Exception {
    String topic = createTopic("producers", 1);
    TopicPartition tp = new TopicPartition(topic, 0);
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of(
        ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true, ProducerConfig.LINGER_MS_CONFIG, 50))) {
      for (int i = 0; i < 5; i++) p.send(new ProducerRecord<>(topic, 0, null, bytes("v" + i)));
      p.flush();
      var producers = admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers();
      expectEqual(1, producers.size(), "active producers");
      var state = producers.get(0);
      expectEqual(4, state.lastSequence(), "last sequence");
      expect(state.producerId() >= 0, "producer id " + state.producerId());
      expect(state.currentTransactionStartOffset().isEmpty(), "an idempotent producer has no transaction");
    }
  }

  void adminTransactions() throws Exception {
    String topic = createTopic("admin-txn", 1);
    TopicPartition tp = new TopicPartition(topic, 0);
    String tid = prefix + "-admin-txn";
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of(
        ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid, ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 45_000))) {
      p.initTransactions();
      p.beginTransaction();
      p.send(new ProducerRecord<>(topic, 0, null, bytes("in-txn"))).get();
      var listed = admin.listTransactions().all().get();
      var mine = listed.stream().filter(t -> t.transactionalId().equals(tid)).findFirst();
      expect(mine.isPresent(), "listTransactions lacks " + tid);
      expectEqual(org.apache.kafka.clients.admin.TransactionState.ONGOING, mine.get().state(), "listed state");
      var d = admin.describeTransactions(List.of(tid)).description(tid).get();
      expectEqual(org.apache.kafka.clients.admin.TransactionState.ONGOING, d.state(), "described state");
      expectEqual(Set.of(tp), d.topicPartitions(), "partitions in the transaction");
      expectEqual(45_000L, d.transactionTimeoutMs(), "transaction timeout");
      expectEqual(mine.get().producerId(), d.producerId(), "producer id");
      expect(d.transactionStartTimeMs().isPresent(), "no transaction start time");
      var producers = admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers();
      expectEqual(1, producers.size(), "active producers");
      expectEqual(OptionalLongOf(0), producers.get(0).currentTransactionStartOffset(), "transaction start offset");
      p.commitTransaction();
      await("transaction never described as committed", () -> admin.describeTransactions(List.of(tid))
          .description(tid).get().state() == org.apache.kafka.clients.admin.TransactionState.COMPLETE_COMMIT);
      expectEqual(Set.of(), admin.describeTransactions(List.of(tid)).description(tid).get().topicPartitions(),
          "partitions after the commit");
    }
    try {
      admin.describeTransactions(List.of(prefix + "-no-txn")).description(prefix + "-no-txn").get();
      throw new AssertionError("an unknown transactional id was described");
    } catch (ExecutionException e) {
      expect(e.getCause() instanceof org.apache.kafka.common.errors.TransactionalIdNotFoundException,
          "expected TransactionalIdNotFoundException, got " + describe(e.getCause()));
    }
  }

  static java.util.OptionalLong OptionalLongOf(long v) {
    return java.util.OptionalLong.of(v);
  }

  void fenceProducers() throws Exception {
    String topic = createTopic("fenced", 1);
    String tid = prefix + "-fenced";
    try (KafkaProducer<byte[], byte[]> p = producer(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid))) {
      p.initTransactions();
      p.beginTransaction();
      p.send(new ProducerRecord<>(topic, 0, null, bytes("doomed"))).get();
      admin.fenceProducers(List.of(tid)).all().get();
      try {
        p.commitTransaction();
        throw new AssertionError("a fenced producer committed");
      } catch (org.apache.kafka.common.errors.ProducerFencedException
          | org.apache.kafka.common.errors.InvalidProducerEpochException e) {
        // Fenced, as the admin asked.
      }
    }
    // Fencing aborted the open transaction: nothing for read_committed, the LSO moved on.
    expectEqual(List.of(), values(readAll(topic, "read_committed")), "records after fencing");
    // The fence is an InitProducerId: the open transaction is aborted, then the id is Empty
    // at a bumped epoch.
    org.apache.kafka.clients.admin.TransactionState[] last = {null};
    await(() -> "transactional id never Empty after the fence: " + last[0], () -> {
      last[0] = admin.describeTransactions(List.of(tid)).description(tid).get().state();
      return last[0] == org.apache.kafka.clients.admin.TransactionState.EMPTY;
    });
  }

  void createTopicsErrors() throws Exception {
    String name = topic("bad");
    Map<String, Class<? extends Throwable>> cases = new LinkedHashMap<>();
    List<NewTopic> topics = new ArrayList<>();
    topics.add(new NewTopic(name + "-rf", 1, (short) 7));
    cases.put(name + "-rf", org.apache.kafka.common.errors.InvalidReplicationFactorException.class);
    topics.add(new NewTopic(name + "-partitions", 0, (short) 1));
    cases.put(name + "-partitions", org.apache.kafka.common.errors.InvalidPartitionsException.class);
    topics.add(new NewTopic(name + "-config", 1, (short) 1).configs(Map.of("cleanup.policy", "sometimes")));
    cases.put(name + "-config", org.apache.kafka.common.errors.InvalidConfigurationException.class);
    topics.add(new NewTopic(name + "-unknown-config", 1, (short) 1).configs(Map.of("no.such.config", "1")));
    cases.put(name + "-unknown-config", org.apache.kafka.common.errors.InvalidConfigurationException.class);
    topics.add(new NewTopic(name + "/slash", 1, (short) 1));
    cases.put(name + "/slash", org.apache.kafka.common.errors.InvalidTopicException.class);
    var result = admin.createTopics(topics).values();
    List<String> wrong = new ArrayList<>();
    for (var e : cases.entrySet()) {
      try {
        result.get(e.getKey()).get();
        wrong.add(e.getKey() + " created");
      } catch (ExecutionException x) {
        if (!e.getValue().isInstance(x.getCause())) {
          wrong.add(e.getKey() + ": expected " + e.getValue().getSimpleName() + ", got " + describe(x.getCause()));
        }
      }
    }
    expectEqual(List.of(), wrong, "CreateTopics errors");
    // validateOnly checks and creates nothing.
    admin.createTopics(List.of(new NewTopic(name + "-validate", 2, (short) replicationFactor)),
        new org.apache.kafka.clients.admin.CreateTopicsOptions().validateOnly(true)).all().get();
    Thread.sleep(500);
    expect(!admin.listTopics().names().get().contains(name + "-validate"), "validateOnly created the topic");
  }

  void topicIds() throws Exception {
    String topic = createTopic("by-id", 2);
    TopicDescription byName = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
    org.apache.kafka.common.Uuid id = byName.topicId();
    var byId = admin.describeTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(id)))
        .allTopicIds().get().get(id);
    expectEqual(topic, byId.name(), "name described by id");
    expectEqual(2, byId.partitions().size(), "partitions described by id");
    admin.deleteTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(id))).all().get();
    await("topic deleted by id still listed", () -> !admin.listTopics().names().get().contains(topic));
    // The broker asked may learn of the deletion a moment after the one that listed: a
    // describe by id fails once every broker knows, and then with Kafka's error.
    Throwable[] failure = {null};
    await("a deleted topic id still described", () -> {
      try {
        admin.describeTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(id))).allTopicIds().get();
        return false;
      } catch (ExecutionException e) {
        failure[0] = e.getCause();
        return true;
      }
    });
    expect(failure[0] instanceof org.apache.kafka.common.errors.UnknownTopicIdException
            || failure[0] instanceof UnknownTopicOrPartitionException,
        "expected UnknownTopicIdException, got " + describe(failure[0]));
  }

  /** What a super user may do, as Metadata and DescribeCluster report it (KIP-430). */
  void authorizedOperations() throws Exception {
    String topic = createTopic("authorized-ops", 1);
    var ops = admin.describeTopics(List.of(topic),
            new org.apache.kafka.clients.admin.DescribeTopicsOptions().includeAuthorizedOperations(true))
        .allTopicNames().get().get(topic).authorizedOperations();
    expectEqual(new java.util.TreeSet<>(Set.of("READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
            "DESCRIBE_CONFIGS", "ALTER_CONFIGS")),
        ops == null ? null : ops.stream().map(Enum::name).collect(Collectors.toCollection(java.util.TreeSet::new)),
        "topic operations");
    var cluster = admin.describeCluster(
        new org.apache.kafka.clients.admin.DescribeClusterOptions().includeAuthorizedOperations(true))
        .authorizedOperations().get();
    System.err.println("cluster authorized operations: " + cluster);
    expect(cluster != null && cluster.containsAll(Set.of(org.apache.kafka.common.acl.AclOperation.ALTER,
            org.apache.kafka.common.acl.AclOperation.DESCRIBE, org.apache.kafka.common.acl.AclOperation.CLUSTER_ACTION,
            org.apache.kafka.common.acl.AclOperation.IDEMPOTENT_WRITE, org.apache.kafka.common.acl.AclOperation.CREATE)),
        "cluster operations: " + cluster);
  }

  /**
   * Prints every config DescribeConfigs lists for a new topic, one `TOPICCONFIG` line each
   * (name, value, source, read-only, sensitive, type, tab-separated): the node side compares
   * tidelog's listing with Kafka's. Passes if the listing is not empty.
   */
  void topicConfigListing() throws Exception {
    String topic = createTopic("config-listing", 1);
    ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
    Config[] config = {null};
    await("describeConfigs never answered for " + topic, () -> {
      try {
        config[0] = admin.describeConfigs(List.of(r),
            new org.apache.kafka.clients.admin.DescribeConfigsOptions().includeSynonyms(false)).all().get().get(r);
        return true;
      } catch (ExecutionException e) {
        if (e.getCause() instanceof UnknownTopicOrPartitionException) return false;
        throw e;
      }
    });
    List<ConfigEntry> entries = new ArrayList<>(config[0].entries());
    expect(!entries.isEmpty(), "no configs listed");
    entries.sort((a, b) -> a.name().compareTo(b.name()));
    StringBuilder out = new StringBuilder();
    for (ConfigEntry e : entries) {
      out.append("TOPICCONFIG ").append(e.name()).append('\t').append(e.value()).append('\t').append(e.source())
          .append('\t').append(e.isReadOnly()).append('\t').append(e.isSensitive()).append('\t').append(e.type())
          .append('\n');
    }
    System.out.print(out);
  }
}

/*
 * Issue 32: Kafka Streams 4.4 (org.apache.kafka:kafka-streams 4.4.0) against a broker, a
 * stateful word count under processing.guarantee=exactly_once_v2, killed and restarted.
 *
 *   java -cp 'CLASSES:.build/kafka-4.4.0/streams/*' StreamsWordCount MODE BOOTSTRAP PREFIX ...
 *
 *   setup BOOTSTRAP PREFIX LINES        creates PREFIX-in (3 partitions) and PREFIX-out, writes
 *                                       LINES lines of 3 words each (37 distinct words)
 *   run BOOTSTRAP PREFIX STATE_DIR [PROTOCOL]
 *                                       runs the application (application.id PREFIX-app): words
 *                                       re-keyed through a repartition topic, counted in a store
 *                                       with a changelog, counts written to PREFIX-out; slowed
 *                                       to about 1 ms a line so that a kill lands mid-stream.
 *                                       Prints RUNNING once the application runs; runs until killed.
 *                                       PROTOCOL: group.protocol, classic (default) or streams
 *                                       (KIP-1071's streams groups)
 *   describe BOOTSTRAP PREFIX           describes the streams group PREFIX-app (Admin
 *                                       describeStreamsGroups): STREAMS-GROUP <state> ACTIVE
 *                                       <active task count of each member> SHARED <tasks
 *                                       active on two members at once>
 *   progress BOOTSTRAP PREFIX           prints the committed output records so far: OUTPUT <n>
 *   verify BOOTSTRAP PREFIX LINES MS    reads PREFIX-out read_committed until each word's last
 *                                       count is exact, or MS pass; prints VERIFY PASS or
 *                                       VERIFY FAIL <why>
 *
 * Exactly once means: each word's committed counts increase strictly (a duplicate or a lost
 * update after the kill would repeat or skip back) and end at the exact count.
 */
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public final class StreamsWordCount {
  static final int WORDS = 37;

  public static void main(String[] args) throws Exception {
    String mode = args[0];
    String bootstrap = args[1];
    String prefix = args[2];
    switch (mode) {
      case "setup" -> setup(bootstrap, prefix, Integer.parseInt(args[3]));
      case "run" -> run(bootstrap, prefix, args[3], args.length > 4 ? args[4] : "classic");
      case "describe" -> describe(bootstrap, prefix);
      case "progress" -> System.out.println("OUTPUT " + readOutput(bootstrap, prefix).size());
      case "verify" -> verify(bootstrap, prefix, Integer.parseInt(args[3]), Long.parseLong(args[4]));
      default -> throw new IllegalArgumentException("unknown mode " + mode);
    }
    System.out.flush();
    System.exit(0);
  }

  static String word(int i) {
    return "w" + ((i * 7919) % WORDS);
  }

  static String line(int i) {
    return word(3 * i) + " " + word(3 * i + 1) + " " + word(3 * i + 2);
  }

  static Map<String, Long> expected(int lines) {
    Map<String, Long> counts = new TreeMap<>();
    for (int i = 0; i < lines; i++) {
      for (String w : line(i).split(" ")) counts.merge(w, 1L, Long::sum);
    }
    return counts;
  }

  static void setup(String bootstrap, String prefix, int lines) throws Exception {
    Properties a = new Properties();
    a.put("bootstrap.servers", bootstrap);
    try (Admin admin = Admin.create(a)) {
      int rf = Math.min(3, admin.describeCluster().nodes().get().size());
      admin.createTopics(List.of(new NewTopic(prefix + "-in", 3, (short) rf),
          new NewTopic(prefix + "-out", 3, (short) rf))).all().get();
      long deadline = System.currentTimeMillis() + 15_000;
      while (!admin.listTopics().names().get().containsAll(List.of(prefix + "-in", prefix + "-out"))) {
        if (System.currentTimeMillis() > deadline) throw new IllegalStateException("topics not listed");
        Thread.sleep(50);
      }
    }
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.LINGER_MS_CONFIG, 10);
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
      for (int i = 0; i < lines; i++) {
        producer.send(new ProducerRecord<>(prefix + "-in", i % 3, "line-" + i, line(i)));
      }
      producer.flush();
    }
    System.out.println("SETUP " + lines);
  }

  static void describe(String bootstrap, String prefix) throws Exception {
    Properties a = new Properties();
    a.put("bootstrap.servers", bootstrap);
    try (Admin admin = Admin.create(a)) {
      var group = admin.describeStreamsGroups(List.of(prefix + "-app")).all().get().get(prefix + "-app");
      List<Integer> counts = new ArrayList<>();
      Map<String, Integer> owners = new HashMap<>();
      for (var member : group.members()) {
        int n = 0;
        for (var task : member.assignment().activeTasks()) {
          for (int partition : task.partitions()) {
            owners.merge(task.subtopologyId() + "_" + partition, 1, Integer::sum);
            n++;
          }
        }
        counts.add(n);
      }
      counts.sort(Integer::compare);
      long shared = owners.values().stream().filter(n -> n > 1).count();
      System.out.println("STREAMS-GROUP " + group.groupState() + " ACTIVE " + counts + " SHARED " + shared);
    }
  }

  static void run(String bootstrap, String prefix, String stateDir, String protocol) throws Exception {
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, prefix + "-app");
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
    p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.MAX_POLL_RECORDS_CONFIG), 50);
    // The killed instance's member leaves the group when its session times out: 10 s, not 45.
    // (A streams group's session timeout is the broker's group.streams.session.timeout.ms.)
    if (protocol.equals("classic")) {
      p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10_000);
    }
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(prefix + "-in", org.apache.kafka.streams.kstream.Consumed.with(Serdes.String(), Serdes.String()))
        .flatMapValues(v -> {
          try {
            Thread.sleep(1);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          return Arrays.asList(v.split(" "));
        })
        .groupBy((k, w) -> w, Grouped.with("by-word", Serdes.String(), Serdes.String()))
        .count(Materialized.as("counts"))
        .toStream()
        .to(prefix + "-out", Produced.with(Serdes.String(), Serdes.Long()));
    KafkaStreams streams = new KafkaStreams(builder.build(), p);
    CountDownLatch done = new CountDownLatch(1);
    streams.setStateListener((now, before) -> {
      System.out.println("STATE " + before + " -> " + now);
      if (now == KafkaStreams.State.RUNNING) System.out.println("RUNNING");
      if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) done.countDown();
      System.out.flush();
    });
    streams.setUncaughtExceptionHandler(e -> {
      System.out.println("UNCAUGHT " + e);
      System.out.flush();
      return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
          .SHUTDOWN_CLIENT;
    });
    Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(10))));
    streams.start();
    done.await();
    System.out.println("STOPPED " + streams.state());
    System.out.flush();
    // A client that shut itself down (ERROR) fails the test through the node side's verify.
    System.exit(streams.state() == KafkaStreams.State.NOT_RUNNING ? 0 : 1);
  }

  /** The committed output records, in partition then offset order. */
  static List<ConsumerRecord<String, Long>> readOutput(String bootstrap, String prefix) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class.getName());
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(p)) {
      String topic = prefix + "-out";
      List<TopicPartition> tps = c.partitionsFor(topic).stream()
          .map(i -> new TopicPartition(topic, i.partition())).collect(Collectors.toList());
      c.assign(tps);
      c.seekToBeginning(tps);
      Map<TopicPartition, Long> end = c.endOffsets(tps);
      List<ConsumerRecord<String, Long>> out = new ArrayList<>();
      long deadline = System.currentTimeMillis() + 30_000;
      while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
        if (System.currentTimeMillis() > deadline) throw new IllegalStateException("reading output timed out");
        for (ConsumerRecord<String, Long> r : c.poll(Duration.ofMillis(100))) out.add(r);
      }
      out.sort((a, b) -> a.partition() != b.partition()
          ? Integer.compare(a.partition(), b.partition()) : Long.compare(a.offset(), b.offset()));
      return out;
    }
  }

  static void verify(String bootstrap, String prefix, int lines, long timeoutMs) throws Exception {
    Map<String, Long> want = expected(lines);
    long deadline = System.currentTimeMillis() + timeoutMs;
    String why = "";
    while (System.currentTimeMillis() < deadline) {
      List<ConsumerRecord<String, Long>> out = readOutput(bootstrap, prefix);
      Map<String, Long> last = new TreeMap<>();
      List<String> notIncreasing = new ArrayList<>();
      for (ConsumerRecord<String, Long> r : out) {
        Long before = last.put(r.key(), r.value());
        if (before != null && r.value() <= before) {
          notIncreasing.add(r.key() + ": " + before + " then " + r.value() + " at " + r.partition() + "@" + r.offset());
        }
      }
      if (!notIncreasing.isEmpty()) {
        System.out.println("VERIFY FAIL counts not strictly increasing (a duplicate or a lost update): "
            + notIncreasing.subList(0, Math.min(5, notIncreasing.size())));
        return;
      }
      Map<String, Long> over = new HashMap<>();
      last.forEach((w, n) -> {
        if (n > want.getOrDefault(w, 0L)) over.put(w, n);
      });
      if (!over.isEmpty()) {
        System.out.println("VERIFY FAIL counts above the exact count (records counted twice): " + over
            + " expected " + want);
        return;
      }
      if (last.equals(want)) {
        System.out.println("VERIFY PASS " + out.size() + " output records, " + want.size() + " words");
        return;
      }
      why = "counts " + last + " short of " + want;
      Thread.sleep(500);
    }
    System.out.println("VERIFY FAIL timed out: " + why);
  }
}

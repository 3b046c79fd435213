/*
 * Issue 35 item 4: data written by one broker (Apache Kafka 4.4 or tidelog), served by the
 * other after its log dir moved over. The same Java client (kafka-clients 4.4.0) writes and
 * reads on both sides, so a difference in what is served is the brokers', not the clients'.
 *
 *   java -cp 'CLASSES:.build/kafka-4.4.0/clients/*' LogDirInterop write BOOTSTRAP TOPIC
 *   java -cp 'CLASSES:.build/kafka-4.4.0/clients/*' LogDirInterop dump BOOTSTRAP TOPIC [GROUP]
 *   java -cp 'CLASSES:.build/kafka-4.4.0/clients/*' LogDirInterop create BOOTSTRAP TOPIC
 *   java -cp 'CLASSES:.build/kafka-4.4.0/clients/*' LogDirInterop append BOOTSTRAP TOPIC
 *
 * write: creates TOPIC (2 partitions, RF 1) and writes to it, all with explicit timestamps,
 * keys and headers: batches of an idempotent producer in each compression codec (none, gzip,
 * snappy, lz4, zstd), a null key and a null value, then a transactional producer commits one
 * transaction, aborts one and commits a third (control batches: markers). Then a consumer of
 * group GROUP (TOPIC-group) commits an offset with metadata on each partition. Prints `DONE`.
 *
 * dump: prints, in an order fixed by partition and offset, every record as both isolation
 * levels read it (offset, timestamp and its type, key, value, headers), each partition's
 * earliest, latest and max-timestamp offsets, offsetsForTimes of each record's timestamp,
 * the producers DescribeProducers names, and the group's committed offsets. Values are
 * printed hex-escaped so that any byte difference shows. Two brokers serving the same data
 * print the same lines.
 *
 * create: only creates TOPIC as write does. append: a new idempotent producer writes one
 * record to each partition and waits for each to be acknowledged (a producer id the broker
 * hands out again would meet an old producer's sequence and fail).
 */
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class LogDirInterop {
  static final int PARTITIONS = 2;
  /**
   * Record timestamps: distinct per record, a second apart, starting 10 minutes ago. Recent,
   * because a broker drops producers idle for producer.id.expiration.ms (a day) by their last
   * timestamp when it loads a log: older ones would vanish from DescribeProducers.
   */
  static final long BASE_TIMESTAMP_MS = System.currentTimeMillis() / 1000 * 1000 - 600_000;

  public static void main(String[] args) throws Exception {
    String mode = args[0];
    String bootstrap = args[1];
    String topic = args[2];
    String group = args.length > 3 ? args[3] : topic + "-group";
    if (mode.equals("write")) write(bootstrap, topic, group);
    else if (mode.equals("create")) {
      create(bootstrap, topic);
      System.out.println("DONE");
    }
    else if (mode.equals("append")) append(bootstrap, topic);
    else if (mode.equals("dump")) dump(bootstrap, topic, group);
    else throw new IllegalArgumentException("mode " + mode);
  }

  static byte[] bytes(String s) {
    return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
  }

  static ProducerRecord<byte[], byte[]> record(String topic, int partition, long n, String key, String value) {
    RecordHeaders headers = new RecordHeaders();
    headers.add("n", bytes(Long.toString(n)));
    if (n % 3 == 0) headers.add("dup", bytes("a")).add("dup", bytes("b"));
    if (n % 4 == 0) headers.add("nullvalue", null);
    return new ProducerRecord<>(topic, partition, BASE_TIMESTAMP_MS + n * 1000, bytes(key), bytes(value), headers);
  }

  static Properties common(String bootstrap) {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    return p;
  }

  static KafkaProducer<byte[], byte[]> producer(String bootstrap, Map<String, Object> extra) {
    Properties p = common(bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    // Batches as the test sends them: each flush() closes one.
    p.put(ProducerConfig.LINGER_MS_CONFIG, "60000");
    p.putAll(extra);
    return new KafkaProducer<>(p);
  }

  static void create(String bootstrap, String topic) throws Exception {
    try (Admin admin = Admin.create(common(bootstrap))) {
      admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get();
    }
  }

  static void append(String bootstrap, String topic) throws Exception {
    try (KafkaProducer<byte[], byte[]> producer =
        producer(bootstrap, Map.of(ProducerConfig.LINGER_MS_CONFIG, "0", ProducerConfig.RETRIES_CONFIG, "3"))) {
      for (int partition = 0; partition < PARTITIONS; partition++) {
        var sent = producer.send(new ProducerRecord<>(topic, partition, bytes("appended"), bytes("appended"))).get();
        System.out.println("APPENDED " + topic + "-" + partition + " " + sent.offset());
      }
    }
    System.out.println("DONE");
  }

  static void write(String bootstrap, String topic, String group) throws Exception {
    create(bootstrap, topic);
    long n = 0;
    String[] codecs = {"none", "gzip", "snappy", "lz4", "zstd"};
    for (String codec : codecs) {
      try (KafkaProducer<byte[], byte[]> producer =
          producer(bootstrap, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec))) {
        // Two batches per codec on each partition, a few records each.
        for (int batch = 0; batch < 2; batch++) {
          for (int partition = 0; partition < PARTITIONS; partition++) {
            for (int i = 0; i < 3; i++, n++) {
              String value = codec + "-" + n + "-" + "x".repeat((int) (n % 7) * 10);
              producer.send(record(topic, partition, n, "key-" + (n % 5), value));
            }
          }
          producer.flush();
        }
      }
    }
    try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, Map.of())) {
      producer.send(record(topic, 0, n++, null, "null-key"));
      producer.send(record(topic, 1, n++, "tombstone", null));
      producer.flush();
    }
    Map<String, Object> txn = Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, topic + "-txn");
    try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, txn)) {
      producer.initTransactions();
      String[] outcomes = {"commit", "abort", "commit"};
      for (String outcome : outcomes) {
        producer.beginTransaction();
        for (int partition = 0; partition < PARTITIONS; partition++) {
          for (int i = 0; i < 2; i++, n++) {
            producer.send(record(topic, partition, n, "txn-" + (n % 3), outcome + "-" + n));
          }
        }
        producer.flush();
        if (outcome.equals("commit")) producer.commitTransaction();
        else producer.abortTransaction();
      }
    }
    // A final idempotent batch after the markers: the last stable offset is the log end.
    try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, Map.of())) {
      for (int partition = 0; partition < PARTITIONS; partition++) {
        producer.send(record(topic, partition, n++, "after", "after-markers"));
      }
      producer.flush();
    }
    // Committed offsets of a consumer group (classic protocol), with metadata.
    Properties c = consumerProperties(bootstrap, "read_committed");
    c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
      Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
      for (int partition = 0; partition < PARTITIONS; partition++) {
        offsets.put(new TopicPartition(topic, partition), new OffsetAndMetadata(5 + partition, "meta-" + partition));
      }
      consumer.commitSync(offsets);
    }
    System.out.println("DONE");
  }

  static Properties consumerProperties(String bootstrap, String isolation) {
    Properties p = common(bootstrap);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    return p;
  }

  static String show(byte[] b) {
    if (b == null) return "null";
    StringBuilder s = new StringBuilder();
    for (byte x : b) {
      if (x >= 0x21 && x < 0x7f && x != '\\') s.append((char) x);
      else s.append(String.format("\\x%02x", x & 0xff));
    }
    return s.toString();
  }

  static void dump(String bootstrap, String topic, String group) throws Exception {
    List<TopicPartition> partitions = new ArrayList<>();
    for (int p = 0; p < PARTITIONS; p++) partitions.add(new TopicPartition(topic, p));
    TreeMap<String, String> timestamps = new TreeMap<>();
    try (Admin admin = Admin.create(common(bootstrap))) {
      String[] specs = {"earliest", "latest", "maxTimestamp"};
      for (String spec : specs) {
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        for (TopicPartition tp : partitions) {
          request.put(tp, spec.equals("earliest") ? OffsetSpec.earliest()
              : spec.equals("latest") ? OffsetSpec.latest() : OffsetSpec.maxTimestamp());
        }
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> answer = admin.listOffsets(request).all().get();
        for (TopicPartition tp : partitions) {
          ListOffsetsResult.ListOffsetsResultInfo info = answer.get(tp);
          System.out.println("OFFSETS " + tp + " " + spec + " " + info.offset() + " " + info.timestamp());
        }
      }
      for (TopicPartition tp : partitions) {
        for (ProducerState state : admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
          System.out.println("PRODUCER " + tp + " id=" + state.producerId() + " epoch=" + state.producerEpoch()
              + " lastSequence=" + state.lastSequence() + " lastTimestamp=" + state.lastTimestamp()
              + " coordinatorEpoch=" + state.coordinatorEpoch().orElse(-1)
              + " txnStart=" + state.currentTransactionStartOffset().orElse(-1));
        }
      }
      Map<TopicPartition, OffsetAndMetadata> committed =
          admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
      for (TopicPartition tp : partitions) {
        OffsetAndMetadata o = committed.get(tp);
        System.out.println("COMMITTED " + group + " " + tp + " "
            + (o == null ? "none" : o.offset() + " " + o.metadata()));
      }
    }
    String[] isolations = {"read_uncommitted", "read_committed"};
    for (String isolation : isolations) {
      try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProperties(bootstrap, isolation))) {
        consumer.assign(partitions);
        consumer.seekToBeginning(partitions);
        Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
        for (TopicPartition tp : partitions) System.out.println("END " + isolation + " " + tp + " " + ends.get(tp));
        List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 60_000;
        while (true) {
          boolean done = true;
          for (TopicPartition tp : partitions) if (consumer.position(tp) < ends.get(tp)) done = false;
          if (done) break;
          if (System.currentTimeMillis() > deadline) throw new RuntimeException("reading " + isolation + " timed out");
          for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) records.add(r);
        }
        records.sort((a, b) -> a.partition() != b.partition() ? a.partition() - b.partition()
            : Long.compare(a.offset(), b.offset()));
        for (ConsumerRecord<byte[], byte[]> r : records) {
          StringBuilder headers = new StringBuilder();
          for (Header h : r.headers()) headers.append(' ').append(h.key()).append('=').append(show(h.value()));
          System.out.println("RECORD " + isolation + " " + r.topic() + "-" + r.partition() + " " + r.offset() + " "
              + r.timestampType() + " " + r.timestamp() + " key=" + show(r.key()) + " value=" + show(r.value())
              + " leaderEpoch=" + r.leaderEpoch().orElse(-1) + headers);
          if (isolation.equals("read_uncommitted")) timestamps.put(r.topic() + "-" + r.partition() + " " + r.timestamp(), "");
        }
      }
    }
    try (KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(consumerProperties(bootstrap, "read_uncommitted"))) {
      for (String key : timestamps.keySet()) {
        String[] parts = key.split(" ");
        int partition = Integer.parseInt(parts[0].substring(parts[0].lastIndexOf('-') + 1));
        long ts = Long.parseLong(parts[1]);
        TopicPartition tp = new TopicPartition(topic, partition);
        var found = consumer.offsetsForTimes(Map.of(tp, ts)).get(tp);
        System.out.println("BYTIME " + tp + " " + ts + " " + (found == null ? "none" : found.offset() + " " + found.timestamp()));
      }
    }
    System.out.println("DONE");
  }
}

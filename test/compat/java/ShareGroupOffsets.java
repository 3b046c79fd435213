/*
 * Share group offsets with kafka-clients 4.4's Admin (KIP-932): listShareGroupOffsets
 * (DescribeShareGroupOffsets), alterShareGroupOffsets, deleteShareGroupOffsets and
 * deleteShareGroups (DeleteGroups), with a KafkaShareConsumer to make the group non-empty
 * and to show that an altered start offset is where delivery starts.
 *
 * Each step prints one line, `STEP <name> <outcome>`, where the outcome is the result (offsets
 * as partition=start/lag) or the exception's class name: the test compares the lines of a
 * tidelog run with those of an Apache Kafka 4.4 run. Steps that wait (for the consumer's
 * partitions to be initialized, for the group to be empty) wait up to 60 s.
 *
 * Usage: ShareGroupOffsets <bootstrap> <topic> <group>
 * Prints: STEP lines; CHECK name PASS|FAIL ms [reason]; DONE passed failed.
 */
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.function.Supplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ShareGroupOffsets {
  static final int RECORDS_PER_PARTITION = 10;
  static int passed = 0;
  static int failed = 0;
  static final long START = System.currentTimeMillis();

  interface Call {
    Object run() throws Exception;
  }

  static void check(String name, boolean ok, String reason) {
    if (ok) passed++;
    else failed++;
    System.out.println("CHECK " + name + " " + (ok ? "PASS" : "FAIL") + " "
        + (System.currentTimeMillis() - START) + (ok ? "" : " " + reason));
  }

  /** Runs a step and prints its outcome: its result, or the class of the exception it ended in. */
  static String step(String name, Call call) {
    String outcome;
    try {
      Object result = call.run();
      outcome = result == null ? "ok" : String.valueOf(result);
    } catch (ExecutionException e) {
      outcome = e.getCause().getClass().getSimpleName();
    } catch (Exception e) {
      outcome = e.getClass().getSimpleName();
    }
    System.out.println("STEP " + name + " " + outcome);
    return outcome;
  }

  static String offsets(Admin admin, String group, Collection<TopicPartition> partitions) throws Exception {
    return offsets(admin, group, partitions, false);
  }

  /**
   * The group's offsets as {partition=start/lag}, or with `lagOnly` {partition=lag}: once
   * records are acknowledged Kafka may go on reporting the earlier start offset with the
   * done records counted apart (deliveryCompleteCount), where tidelog moves it at once; the
   * lag is the same.
   */
  static String offsets(Admin admin, String group, Collection<TopicPartition> partitions, boolean lagOnly)
      throws Exception {
    ListShareGroupOffsetsSpec spec = new ListShareGroupOffsetsSpec();
    if (partitions != null) spec.topicPartitions(partitions);
    Map<TopicPartition, SharePartitionOffsetInfo> info =
        admin.listShareGroupOffsets(Map.of(group, spec)).partitionsToOffsetInfo(group).get();
    Map<String, String> sorted = new TreeMap<>();
    for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : info.entrySet()) {
      SharePartitionOffsetInfo i = e.getValue();
      sorted.put(e.getKey().toString(),
          i == null ? "null"
              : (lagOnly ? "" : i.startOffset() + "/") + i.lag().map(String::valueOf).orElse("-"));
    }
    return sorted.toString();
  }

  static String shareGroups(Admin admin) throws Exception {
    List<String> listed = new ArrayList<>();
    for (GroupListing g : admin.listGroups(ListGroupsOptions.forShareGroups()).all().get()) {
      listed.add(g.groupId() + ":" + g.type().map(String::valueOf).orElse("-") + ":"
          + g.protocol() + ":" + g.groupState().map(String::valueOf).orElse("-"));
    }
    listed.sort(null);
    return listed.toString();
  }

  static boolean waitFor(Supplier<Boolean> condition) throws InterruptedException {
    long deadline = System.currentTimeMillis() + 60_000;
    while (System.currentTimeMillis() < deadline) {
      if (condition.get()) return true;
      Thread.sleep(250);
    }
    return false;
  }

  static String groupState(Admin admin, String group) {
    try {
      return String.valueOf(admin.describeShareGroups(List.of(group)).all().get().get(group).groupState());
    } catch (ExecutionException e) {
      return e.getCause().getClass().getSimpleName();
    } catch (Exception e) {
      return e.getClass().getSimpleName();
    }
  }

  static KafkaShareConsumer<String, String> consumer(String bootstrap, String group) {
    Properties props = new Properties();
    props.put("bootstrap.servers", bootstrap);
    props.put("group.id", group);
    props.put("key.deserializer", StringDeserializer.class.getName());
    props.put("value.deserializer", StringDeserializer.class.getName());
    return new KafkaShareConsumer<>(props);
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    String group = args[2];
    TopicPartition p0 = new TopicPartition(topic, 0);
    TopicPartition p1 = new TopicPartition(topic, 1);
    Properties adminProps = new Properties();
    adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    Properties producerProps = new Properties();
    producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    try (Admin admin = Admin.create(adminProps);
        KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
      admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
      for (int p = 0; p < 2; p++)
        for (int i = 0; i < RECORDS_PER_PARTITION; i++)
          producer.send(new ProducerRecord<>(topic, p, "k", "v" + i)).get();

      // A group that does not exist.
      step("list-unknown-group", () -> offsets(admin, "no-such-share-group", null));
      step("delete-offsets-unknown-group", () ->
          admin.deleteShareGroupOffsets("no-such-share-group", Set.of(topic)).all().get());
      step("alter-unknown-group", () ->
          admin.alterShareGroupOffsets("no-such-share-group-2", Map.of(p0, 1L)).all().get());
      step("delete-unknown-group", () -> admin.deleteShareGroups(List.of("no-such-share-group")).all().get());

      // A member joins; its partitions start at the latest offset (share.auto.offset.reset).
      try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group)) {
        c.subscribe(List.of(topic));
        boolean initialized = waitFor(() -> {
          c.poll(Duration.ofMillis(100));
          try {
            return offsets(admin, group, null).contains(p1.toString());
          } catch (Exception e) {
            return false;
          }
        });
        check("partitions-initialized", initialized, "the group's partitions were not listed in 60 s");
        step("list-with-member", () -> offsets(admin, group, null));
        step("list-partition-0", () -> offsets(admin, group, List.of(p0)));
        step("list-groups-with-member", () -> shareGroups(admin));
        step("alter-with-member", () -> admin.alterShareGroupOffsets(group, Map.of(p0, 3L)).all().get());
        step("delete-offsets-with-member", () -> admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get());
        step("delete-group-with-member", () -> admin.deleteShareGroups(List.of(group)).all().get());
      }
      check("empty-after-close", waitFor(() -> groupState(admin, group).equals("Empty")),
          "state " + groupState(admin, group));

      // Empty: the start offsets may be altered; delivery starts there.
      step("alter-empty", () -> admin.alterShareGroupOffsets(group, Map.of(p0, 3L, p1, 0L)).all().get());
      step("list-after-alter", () -> offsets(admin, group, null));
      step("alter-unknown-topic", () ->
          admin.alterShareGroupOffsets(group, Map.of(new TopicPartition("no-such-topic", 0), 1L)).all().get());
      Map<Integer, Long> firstOffset = new TreeMap<>();
      int received = 0;
      try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group)) {
        c.subscribe(List.of(topic));
        long deadline = System.currentTimeMillis() + 60_000;
        int expected = RECORDS_PER_PARTITION - 3 + RECORDS_PER_PARTITION;
        while (received < expected && System.currentTimeMillis() < deadline) {
          for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
            received++;
            firstOffset.merge(r.partition(), r.offset(), Math::min);
          }
        }
        c.commitSync();
        System.out.println("STEP consumed " + received + " first=" + firstOffset);
        boolean done = waitFor(() -> {
          try {
            return offsets(admin, group, null, true).equals("{" + p0 + "=0, " + p1 + "=0}");
          } catch (Exception e) {
            return false;
          }
        });
        check("lag-zero", done, "the lag did not reach 0 in 60 s");
        step("lag-after-consume", () -> offsets(admin, group, null, true));
      }
      check("empty-again", waitFor(() -> groupState(admin, group).equals("Empty")),
          "state " + groupState(admin, group));

      step("delete-offsets-empty", () -> admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get());
      step("list-after-delete-offsets", () -> offsets(admin, group, null));
      step("delete-offsets-unknown-topic", () ->
          admin.deleteShareGroupOffsets(group, Set.of("no-such-topic")).all().get());
      step("list-groups-empty", () -> shareGroups(admin));
      step("describe-classic", () -> {
        try {
          return String.valueOf(admin.describeClassicGroups(List.of(group)).all().get().get(group).state());
        } catch (ExecutionException e) {
          return e.getCause().getClass().getSimpleName();
        }
      });
      step("delete-group-empty", () -> admin.deleteShareGroups(List.of(group)).all().get());
      step("list-groups-after-delete", () -> shareGroups(admin));
      step("describe-after-delete", () -> groupState(admin, group));
      step("delete-group-again", () -> admin.deleteShareGroups(List.of(group)).all().get());
    }
    System.out.println("DONE " + passed + " " + failed);
  }
}

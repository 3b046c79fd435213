/*
 * Share groups (KIP-932) with kafka-clients 4.4: two KafkaShareConsumers in one share group
 * on a one-partition topic, explicit acknowledgement. The group starts at the latest offset
 * (share.auto.offset.reset's default), so warm-up records are produced until one is
 * delivered; then N records, each answered by its key:
 *   accept-*       ACCEPT on first delivery;
 *   release-once   RELEASE on its first delivery, ACCEPT on the second;
 *   reject         REJECT: never delivered again;
 *   release-always RELEASE every time: delivered group.share.delivery.count.limit times,
 *                  then archived.
 * Consumer 1 sends its acknowledgements with commitSync (ShareAcknowledge), consumer 2 with
 * its next poll (piggybacked on ShareFetch). After the last expected delivery both poll on
 * for a few seconds: nothing may arrive. An Admin then describes the share group.
 *
 * Usage: ShareGroups <bootstrap> <topic> <group> <deliveryCountLimit>
 * Prints: DELIVERED key counts... (delivery counts, in order); CHECK name PASS|FAIL ms
 * [reason]; DESCRIBE state=... members=N; DONE passed failed.
 */
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ShareGroups {
  static final int ACCEPTED = 10;
  static int passed = 0;
  static int failed = 0;
  static final long START = System.currentTimeMillis();
  /** Set once any warm-up record was delivered. */
  static boolean sawWarm = false;

  static void check(String name, boolean ok, String reason) {
    if (ok) passed++;
    else failed++;
    System.out.println("CHECK " + name + " " + (ok ? "PASS" : "FAIL") + " "
        + (System.currentTimeMillis() - START) + (ok ? "" : " " + reason));
  }

  static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, String clientId) {
    Properties props = new Properties();
    props.put("bootstrap.servers", bootstrap);
    props.put("group.id", group);
    props.put("client.id", clientId);
    props.put("share.acknowledgement.mode", "explicit");
    props.put("key.deserializer", StringDeserializer.class.getName());
    props.put("value.deserializer", StringDeserializer.class.getName());
    return new KafkaShareConsumer<>(props);
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    String group = args[2];
    int limit = Integer.parseInt(args[3]);
    Properties adminProps = new Properties();
    adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    try (Admin admin = Admin.create(adminProps)) {
      admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
      Properties producerProps = new Properties();
      producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
      producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
      producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
      try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps);
          KafkaShareConsumer<String, String> c1 = consumer(bootstrap, group, "share-1");
          KafkaShareConsumer<String, String> c2 = consumer(bootstrap, group, "share-2")) {
        c1.subscribe(List.of(topic));
        c2.subscribe(List.of(topic));
        run(producer, List.of(c1, c2), topic, limit);
        // Both members are in the group while their consumers are open.
        ShareGroupDescription description = admin.describeShareGroups(List.of(group)).all().get().get(group);
        System.out.println("DESCRIBE state=" + description.groupState() + " members="
            + description.members().size());
      }
    }
    System.out.println("DONE " + passed + " " + failed);
  }

  static void run(KafkaProducer<String, String> producer, List<KafkaShareConsumer<String, String>> consumers,
      String topic, int limit) throws Exception {
    Map<String, List<Short>> delivered = new TreeMap<>();
    // Warm-up: the share-partition starts at the latest offset when first fetched.
    long warmDeadline = System.currentTimeMillis() + 90_000;
    int warm = 0;
    boolean warmed = false;
    while (!warmed && System.currentTimeMillis() < warmDeadline) {
      producer.send(new ProducerRecord<>(topic, "warm", "warm-" + warm++)).get();
      for (KafkaShareConsumer<String, String> c : consumers) pollOnce(c, delivered, limit, consumers.indexOf(c) == 0);
      warmed = sawWarm;
    }
    check("warm-up-delivered", warmed, "no warm-up record was delivered in 90 s");
    delivered.clear();
    List<String> keys = new ArrayList<>();
    for (int i = 0; i < ACCEPTED; i++) keys.add("accept-" + i);
    keys.add("release-once");
    keys.add("reject");
    keys.add("release-always");
    for (String key : keys) producer.send(new ProducerRecord<>(topic, key, "value-" + key));
    producer.flush();
    long deadline = System.currentTimeMillis() + 120_000;
    while (!complete(delivered, limit) && System.currentTimeMillis() < deadline) {
      for (KafkaShareConsumer<String, String> c : consumers) pollOnce(c, delivered, limit, consumers.indexOf(c) == 0);
    }
    check("all-expected-deliveries", complete(delivered, limit), "deliveries so far " + delivered);
    // Nothing more may come: accepted, rejected and archived records are done.
    long quietUntil = System.currentTimeMillis() + 4_000;
    int extra = 0;
    while (System.currentTimeMillis() < quietUntil) {
      for (KafkaShareConsumer<String, String> c : consumers) extra += pollOnce(c, delivered, limit, consumers.indexOf(c) == 0);
    }
    check("no-further-deliveries", extra == 0, extra + " more deliveries: " + delivered);
    for (Map.Entry<String, List<Short>> e : delivered.entrySet()) {
      if (e.getKey().equals("warm")) continue;
      StringBuilder line = new StringBuilder("DELIVERED " + e.getKey());
      for (Short count : e.getValue()) line.append(' ').append(count);
      System.out.println(line);
    }
    for (KafkaShareConsumer<String, String> c : consumers) {
      for (Map.Entry<TopicIdPartition, Optional<KafkaException>> r : c.commitSync().entrySet()) {
        check("final-commit", r.getValue().isEmpty(), String.valueOf(r.getValue()));
      }
    }
  }

  /** Polls once, acknowledging each record by its key; returns how many non-warm-up records came. */
  static int pollOnce(KafkaShareConsumer<String, String> c, Map<String, List<Short>> delivered, int limit,
      boolean commitSync) {
    ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(200));
    int count = 0;
    for (ConsumerRecord<String, String> record : records) {
      String key = record.key();
      short deliveryCount = record.deliveryCount().orElse((short) -1);
      delivered.computeIfAbsent(key, k -> new ArrayList<>()).add(deliveryCount);
      if (key.equals("warm")) sawWarm = true;
      else count++;
      AcknowledgeType type = switch (key) {
        case "release-once" -> deliveryCount == 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
        case "reject" -> AcknowledgeType.REJECT;
        case "release-always" -> AcknowledgeType.RELEASE;
        default -> AcknowledgeType.ACCEPT;
      };
      c.acknowledge(record, type);
    }
    if (commitSync && !records.isEmpty()) {
      for (Map.Entry<TopicIdPartition, Optional<KafkaException>> r : c.commitSync().entrySet()) {
        if (r.getValue().isPresent()) check("commit-sync", false, r.getKey() + " " + r.getValue().get());
      }
    }
    return count;
  }

  static boolean complete(Map<String, List<Short>> delivered, int limit) {
    for (int i = 0; i < ACCEPTED; i++) if (!delivered.containsKey("accept-" + i)) return false;
    return delivered.getOrDefault("release-once", List.of()).size() >= 2
        && delivered.containsKey("reject")
        && delivered.getOrDefault("release-always", List.of()).size() >= limit;
  }
}

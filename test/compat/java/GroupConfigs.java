/*
 * Group configs (ConfigResource.Type.GROUP, KIP-848 / KIP-932) with kafka-clients 4.4's
 * Admin: incrementalAlterConfigs sets and deletes them, describeConfigs shows each with its
 * source, values Kafka refuses end in InvalidConfigurationException, and a share group whose
 * share.auto.offset.reset is earliest gets the records written before it first fetched.
 *
 * Each step prints one line, `STEP <name> <outcome>`, where the outcome is the result or the
 * exception's class name (and message for refusals): the test compares the lines of a
 * tidelog run with those of an Apache Kafka 4.4 run.
 *
 * Usage: GroupConfigs <bootstrap> <topic> <group>
 * Prints: STEP lines; CHECK name PASS|FAIL ms [reason]; DONE passed failed.
 */
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class GroupConfigs {
  static final int RECORDS = 5;
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

  static String step(String name, Call call) {
    String outcome;
    try {
      Object result = call.run();
      outcome = result == null ? "ok" : String.valueOf(result);
    } catch (ExecutionException e) {
      outcome = e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage();
    } catch (Exception e) {
      outcome = e.getClass().getSimpleName() + ": " + e.getMessage();
    }
    System.out.println("STEP " + name + " " + outcome);
    return outcome;
  }

  static Object alter(Admin admin, ConfigResource resource, AlterConfigOp... ops) throws Exception {
    admin.incrementalAlterConfigs(Map.of(resource, List.of(ops))).all().get();
    return null;
  }

  static AlterConfigOp set(String name, String value) {
    return new AlterConfigOp(new ConfigEntry(name, value), AlterConfigOp.OpType.SET);
  }

  static AlterConfigOp delete(String name) {
    return new AlterConfigOp(new ConfigEntry(name, ""), AlterConfigOp.OpType.DELETE);
  }

  /** The named configs as {name=value/source}. */
  static String describe(Admin admin, ConfigResource resource, String... names) throws Exception {
    Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
    Map<String, String> shown = new TreeMap<>();
    for (String name : names) {
      ConfigEntry e = config.get(name);
      shown.put(name, e == null ? "absent" : e.value() + "/" + e.source());
    }
    return shown.toString();
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    String group = args[2];
    ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
    Properties adminProps = new Properties();
    adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    Properties producerProps = new Properties();
    producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    try (Admin admin = Admin.create(adminProps);
        KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
      admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
      for (int i = 0; i < RECORDS; i++) producer.send(new ProducerRecord<>(topic, 0, "k", "v" + i)).get();

      String[] shown = {"share.auto.offset.reset", "share.record.lock.duration.ms", "consumer.session.timeout.ms"};
      step("describe-unset", () -> describe(admin, resource, shown));
      step("set", () -> alter(admin, resource, set("share.auto.offset.reset", "earliest"),
          set("consumer.session.timeout.ms", "50000")));
      step("describe-set", () -> describe(admin, resource, shown));
      step("unknown-name", () -> alter(admin, resource, set("no.such.group.config", "1")));
      step("below-bound", () -> alter(admin, resource, set("consumer.session.timeout.ms", "1000")));
      step("above-bound", () -> alter(admin, resource, set("share.record.lock.duration.ms", "90000")));
      step("not-a-number", () -> alter(admin, resource, set("consumer.heartbeat.interval.ms", "often")));
      step("delete", () -> alter(admin, resource, delete("consumer.session.timeout.ms")));
      step("describe-after-delete", () -> describe(admin, resource, shown));

      // The share group starts at the earliest offset: it gets the records written before.
      Properties props = new Properties();
      props.put("bootstrap.servers", bootstrap);
      props.put("group.id", group);
      props.put("key.deserializer", StringDeserializer.class.getName());
      props.put("value.deserializer", StringDeserializer.class.getName());
      List<Long> offsets = new ArrayList<>();
      try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(props)) {
        c.subscribe(List.of(topic));
        long deadline = System.currentTimeMillis() + 60_000;
        while (offsets.size() < RECORDS && System.currentTimeMillis() < deadline) {
          for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) offsets.add(r.offset());
        }
      }
      offsets.sort(null);
      step("consumed", () -> offsets);
      check("consumed-earliest", offsets.size() == RECORDS && offsets.get(0) == 0L,
          "got offsets " + offsets);
    }
    System.out.println("DONE " + passed + " " + failed);
  }
}

/*
 * Issue 32, item 3: the Java client's recorded session (test/differential/record.ts runs it
 * through the recorder's proxy with kafka-clients 4.4.0 from .build/kafka-4.4.0/clients):
 *
 *   java -cp 'CLASSES:.build/kafka-4.4.0/clients/*' RecordJava BOOTSTRAP TOPIC GROUP
 *
 * Creates a 2-partition topic with the Admin, produces 4 records idempotently with acks=all,
 * consumes them in a KIP-848 group (group.protocol=consumer: ConsumerGroupHeartbeat), commits
 * and closes; prints the records read as `partition:offset:value`, sorted. Timeouts are short
 * and metadata is not refreshed on a timer, so that the session file stays small.
 */
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class RecordJava {
  /** The whole session must end well within this. */
  static final long DEADLINE_MS = 60_000;

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    String group = args[2];

    Properties common = new Properties();
    common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    common.put(AdminClientConfig.CLIENT_ID_CONFIG, "recorded-java");
    // No timed refresh: only the metadata a step needs goes into the session.
    common.put(AdminClientConfig.METADATA_MAX_AGE_CONFIG, "300000");
    common.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");

    try (Admin admin = Admin.create(common)) {
      admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
    }

    Properties producerProps = new Properties();
    producerProps.putAll(common);
    producerProps.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
    producerProps.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
      for (int partition = 0; partition < 2; partition++) {
        for (int i = 0; i < 2; i++) {
          ProducerRecord<String, String> record =
              new ProducerRecord<>(topic, partition, "k" + partition + i, "java-" + partition + "-" + i);
          record.headers().add("h", "1".getBytes(StandardCharsets.UTF_8));
          producer.send(record);
        }
      }
      producer.flush();
    }

    Properties consumerProps = new Properties();
    consumerProps.putAll(common);
    consumerProps.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    consumerProps.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
    consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    consumerProps.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
    consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    List<String> read = new ArrayList<>();
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps)) {
      consumer.subscribe(List.of(topic));
      long deadline = System.currentTimeMillis() + DEADLINE_MS;
      while (read.size() < 4) {
        if (System.currentTimeMillis() > deadline) throw new IllegalStateException("read only " + read);
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100)))
          read.add(r.partition() + ":" + r.offset() + ":" + r.value());
      }
      consumer.commitSync(Duration.ofSeconds(10));
    }
    Collections.sort(read);
    System.out.println(String.join(" ", read));
  }
}

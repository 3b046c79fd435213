/*
 * Client telemetry (KIP-714) with kafka-clients 4.4: an Admin sets a CLIENT_METRICS
 * subscription (IncrementalAlterConfigs), describes and lists it, tries values Kafka
 * refuses; then a producer with enable.metrics.push=true (the default) runs. With a
 * metrics URL (tidelog's /metrics) it produces until the URL shows its pushed metrics under
 * its client instance id, and prints those lines.
 *
 * Usage: Telemetry <bootstrap> <subscription> [metricsUrl]
 * Prints: DESCRIBE name=value source; LIST name...; REFUSED case ErrorClass; INSTANCE id;
 * PUSHED line (metrics lines of this client); DONE.
 */
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
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
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringSerializer;

public class Telemetry {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String subscription = args[1];
    String metricsUrl = args.length > 2 ? args[2] : null;
    Properties adminProps = new Properties();
    adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    ConfigResource resource = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, subscription);
    try (Admin admin = Admin.create(adminProps)) {
      alter(admin, resource, List.of(
          set("metrics", "org.apache.kafka.producer."),
          set("interval.ms", "1000"),
          set("match", "client_id=telemetry-producer,client_software_name=apache-kafka-java")));
      Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
      Map<String, String> described = new TreeMap<>();
      for (ConfigEntry entry : config.entries()) {
        described.put(entry.name(), entry.value() + " " + entry.source());
      }
      described.forEach((name, value) -> System.out.println("DESCRIBE " + name + "=" + value));
      @SuppressWarnings("deprecation")
      Collection<?> listed = admin.listClientMetricsResources().all().get();
      List<String> names = new ArrayList<>();
      for (Object listing : listed) names.add(listing.toString());
      System.out.println("LIST " + String.join(" ", names));
      refused(admin, "interval-too-small", resource, set("interval.ms", "50"));
      refused(admin, "unknown-config", resource, set("retention.ms", "1000"));
      refused(admin, "bad-match", resource, set("match", "client_colour=red"));
      refused(admin, "empty-name", new ConfigResource(ConfigResource.Type.CLIENT_METRICS, ""), set("interval.ms", "1000"));
      Config after = admin.describeConfigs(List.of(resource)).all().get().get(resource);
      System.out.println("UNCHANGED interval.ms=" + after.get("interval.ms").value());
      // A subscription setting one config: how the others are listed; then removed again.
      ConfigResource partial = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, subscription + "-partial");
      alter(admin, partial, List.of(set("metrics", "org.apache.kafka.consumer.")));
      refused(admin, "append", partial, new AlterConfigOp(new ConfigEntry("metrics", "org.apache.kafka.admin."), AlterConfigOp.OpType.APPEND));
      describe(admin, "PARTIAL", partial);
      describe(admin, "ABSENT", new ConfigResource(ConfigResource.Type.CLIENT_METRICS, subscription + "-absent"));
      alter(admin, partial, List.of(new AlterConfigOp(new ConfigEntry("metrics", ""), AlterConfigOp.OpType.DELETE)));
      @SuppressWarnings("deprecation")
      Collection<?> relisted = admin.listClientMetricsResources().all().get();
      System.out.println("RELIST " + relisted.size());
    }

    Properties producerProps = new Properties();
    producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    producerProps.put(ProducerConfig.CLIENT_ID_CONFIG, "telemetry-producer");
    producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    producerProps.put(ProducerConfig.ENABLE_METRICS_PUSH_CONFIG, "true");
    HttpClient http = HttpClient.newHttpClient();
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
      String instanceId = null;
      // A broker that does not advertise GetTelemetrySubscriptions (Kafka without a telemetry
      // receiver) never gives the client an instance id: it waits out the whole timeout. 30 s
      // there only cost the test suite's time, so the run without a metrics URL waits 2 s.
      Duration instanceWait = Duration.ofSeconds(metricsUrl == null ? 2 : 30);
      try {
        instanceId = producer.clientInstanceId(instanceWait).toString();
      } catch (Exception e) {
        System.out.println("NOINSTANCE " + e.getClass().getSimpleName());
      }
      System.out.println("INSTANCE " + instanceId);
      long deadline = System.currentTimeMillis() + (metricsUrl == null ? 4_000 : 90_000);
      boolean seen = false;
      int sent = 0;
      while (System.currentTimeMillis() < deadline && !seen) {
        producer.send(new ProducerRecord<>("telemetry-topic", "k", "v" + sent++)).get();
        Thread.sleep(200);
        if (metricsUrl == null || instanceId == null) continue;
        String body = http.send(HttpRequest.newBuilder(URI.create(metricsUrl)).build(),
            HttpResponse.BodyHandlers.ofString()).body();
        List<String> mine = new ArrayList<>();
        for (String line : body.split("\n")) {
          if (line.contains("client_instance_id=\"" + instanceId + "\"")) mine.add(line);
        }
        if (mine.stream().anyMatch(l -> l.startsWith("org_apache_kafka_producer_"))) {
          seen = true;
          for (String line : mine) System.out.println("PUSHED " + line);
        }
      }
      System.out.println("SENT " + sent);
    }
    System.out.println("DONE");
  }

  static void describe(Admin admin, String label, ConfigResource resource) throws Exception {
    try {
      Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
      Map<String, String> described = new TreeMap<>();
      for (ConfigEntry entry : config.entries()) described.put(entry.name(), entry.value() + " " + entry.source());
      described.forEach((name, value) -> System.out.println(label + " " + name + "=" + value));
    } catch (ExecutionException e) {
      System.out.println(label + " " + e.getCause().getClass().getSimpleName());
    }
  }

  static AlterConfigOp set(String name, String value) {
    return new AlterConfigOp(new ConfigEntry(name, value), AlterConfigOp.OpType.SET);
  }

  static void alter(Admin admin, ConfigResource resource, List<AlterConfigOp> ops) throws Exception {
    admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
  }

  static void refused(Admin admin, String name, ConfigResource resource, AlterConfigOp op) throws Exception {
    try {
      alter(admin, resource, List.of(op));
      System.out.println("REFUSED " + name + " none");
    } catch (ExecutionException e) {
      System.out.println("REFUSED " + name + " " + e.getCause().getClass().getSimpleName());
    }
  }
}

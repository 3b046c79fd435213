/*
 * Issue 32: a Kafka Connect 4.4 distributed worker (org.apache.kafka:connect-runtime 4.4.0)
 * against a broker.
 *
 *   java -cp 'CLASSES:.build/kafka-4.4.0/connect/*' ConnectCheck BOOTSTRAP PREFIX WORKDIR RECORDS
 *
 * Starts one distributed worker in this JVM (group PREFIX-connect, internal topics
 * PREFIX-configs/-offsets/-status made by the worker itself), then over its REST API a
 * source connector writing RECORDS sequence records to PREFIX-data and a sink connector
 * appending them to WORKDIR/sink.txt. Both connectors are defined here (SeqSource, LineSink):
 * Connect's FileStream connectors (connect-file 4.4.0) are not served by the registry here.
 *
 * Then, in the same JVM, a standalone worker (ConnectStandalone, source offsets in the file
 * WORKDIR/standalone.offsets) runs the same source into PREFIX-sa-data and sink out of it to
 * WORKDIR/standalone-sink.txt; a second standalone worker on the same offsets file is given
 * the source again and must resume after its last record, writing none twice.
 * Prints one line per check (CHECK <name> PASS|FAIL <ms> [why]) and DONE <passed> <failed>.
 */
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.cli.ConnectStandalone;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.runtime.Connect;
import org.apache.kafka.connect.sink.SinkConnector;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

public final class ConnectCheck {
  // ---------------------------------------------------------------- the connectors

  /** Writes "seq-0" .. "seq-(count-1)" to `topic`, resuming from its committed source offset. */
  public static final class SeqSource extends SourceConnector {
    private Map<String, String> props;

    @Override public void start(Map<String, String> props) { this.props = props; }
    @Override public Class<? extends Task> taskClass() { return SeqTask.class; }
    @Override public List<Map<String, String>> taskConfigs(int maxTasks) { return List.of(props); }
    @Override public void stop() {}
    @Override public ConfigDef config() {
      return new ConfigDef()
          .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "target topic")
          .define("count", ConfigDef.Type.INT, ConfigDef.Importance.HIGH, "records");
    }
    @Override public String version() { return "1"; }
  }

  public static final class SeqTask extends SourceTask {
    private String topic;
    private int count;
    private long next;
    private Map<String, String> partition;

    @Override public String version() { return "1"; }
    @Override public void start(Map<String, String> props) {
      topic = props.get("topic");
      count = Integer.parseInt(props.get("count"));
      partition = Map.of("source", "seq");
      Map<String, Object> offset = context.offsetStorageReader().offset(partition);
      next = offset == null ? 0 : ((Number) offset.get("pos")).longValue() + 1;
    }
    @Override public List<SourceRecord> poll() throws InterruptedException {
      if (next >= count) {
        Thread.sleep(100);
        return null;
      }
      List<SourceRecord> out = new ArrayList<>();
      for (int i = 0; i < 50 && next < count; i++, next++) {
        out.add(new SourceRecord(partition, Map.of("pos", next), topic, 0, Schema.STRING_SCHEMA, "seq-" + next));
      }
      return out;
    }
    @Override public void stop() {}
  }

  /** Appends each record's value as a line to `file`. */
  public static final class LineSink extends SinkConnector {
    private Map<String, String> props;

    @Override public void start(Map<String, String> props) { this.props = props; }
    @Override public Class<? extends Task> taskClass() { return LineTask.class; }
    @Override public List<Map<String, String>> taskConfigs(int maxTasks) { return List.of(props); }
    @Override public void stop() {}
    @Override public ConfigDef config() {
      return new ConfigDef().define("file", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "output file");
    }
    @Override public String version() { return "1"; }
  }

  public static final class LineTask extends SinkTask {
    private Path file;

    @Override public String version() { return "1"; }
    @Override public void start(Map<String, String> props) { file = Path.of(props.get("file")); }
    @Override public void put(Collection<SinkRecord> records) {
      StringBuilder s = new StringBuilder();
      for (SinkRecord r : records) s.append(r.value()).append('\n');
      try {
        Files.writeString(file, s, StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
      } catch (java.io.IOException e) {
        throw new org.apache.kafka.connect.errors.ConnectException(e);
      }
    }
    @Override public void stop() {}
  }

  // ---------------------------------------------------------------- the checks

  interface Probe {
    boolean ok() throws Exception;
  }

  static void await(String what, long ms, Probe probe) throws Exception {
    long deadline = System.currentTimeMillis() + ms;
    while (!probe.ok()) {
      if (System.currentTimeMillis() > deadline) throw new AssertionError(what);
      Thread.sleep(200);
    }
  }

  static final HttpClient http = HttpClient.newHttpClient();

  static HttpResponse<String> rest(String base, String method, String path, String body) throws Exception {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(30))
        .header("Content-Type", "application/json");
    b = body == null ? b.method(method, HttpRequest.BodyPublishers.noBody())
        : b.method(method, HttpRequest.BodyPublishers.ofString(body));
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  static int passed = 0;
  static int failed = 0;

  interface Check {
    void run() throws Exception;
  }

  static void check(String name, Check c) {
    long start = System.nanoTime();
    String failure = null;
    try {
      c.run();
    } catch (Throwable t) {
      failure = t.getClass().getSimpleName() + ": " + t.getMessage();
    }
    long ms = (System.nanoTime() - start) / 1_000_000;
    if (failure == null) {
      passed++;
      System.out.println("CHECK " + name + " PASS " + ms);
    } else {
      failed++;
      System.out.println("CHECK " + name + " FAIL " + ms + " " + failure.replaceAll("\\s+", " "));
    }
    System.out.flush();
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String prefix = args[1];
    Path work = Path.of(args[2]);
    int records = Integer.parseInt(args[3]);
    Path sinkFile = work.resolve("sink.txt");
    Properties ap = new Properties();
    ap.put("bootstrap.servers", bootstrap);
    Admin admin = Admin.create(ap);
    int rf = Math.min(3, admin.describeCluster().nodes().get().size());
    String data = prefix + "-data";
    admin.createTopics(List.of(new NewTopic(data, 1, (short) rf))).all().get();

    Map<String, String> w = new HashMap<>();
    w.put("bootstrap.servers", bootstrap);
    w.put("group.id", prefix + "-connect");
    w.put("config.storage.topic", prefix + "-configs");
    w.put("offset.storage.topic", prefix + "-offsets");
    w.put("status.storage.topic", prefix + "-status");
    w.put("config.storage.replication.factor", String.valueOf(rf));
    w.put("offset.storage.replication.factor", String.valueOf(rf));
    w.put("status.storage.replication.factor", String.valueOf(rf));
    w.put("offset.storage.partitions", "5");
    w.put("status.storage.partitions", "3");
    w.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
    w.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
    w.put("listeners", "http://127.0.0.1:0");
    w.put("offset.flush.interval.ms", "500");
    w.put("scheduled.rebalance.max.delay.ms", "1000");
    w.put("plugin.discovery", "only_scan");
    Connect<?>[] worker = {null};
    String[] base = {null};
    try {
      check("connect-worker-starts", () -> {
        worker[0] = new ConnectDistributed().startConnect(w);
        String url = worker[0].rest().advertisedUrl().toString();
        base[0] = url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
        await("the worker never answered GET /connectors", 60_000, () -> {
          try {
            return rest(base[0], "GET", "/connectors", null).statusCode() == 200;
          } catch (java.io.IOException e) {
            return false;
          }
        });
      });
      if (base[0] == null) return;
      check("connect-internal-topics-compacted", () -> {
        for (String t : List.of("-configs", "-offsets", "-status")) {
          ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, prefix + t);
          String policy = admin.describeConfigs(List.of(r)).all().get().get(r).get("cleanup.policy").value();
          if (!"compact".equals(policy)) throw new AssertionError(prefix + t + " cleanup.policy=" + policy);
        }
        int configsPartitions = admin.describeTopics(List.of(prefix + "-configs")).allTopicNames().get()
            .get(prefix + "-configs").partitions().size();
        if (configsPartitions != 1) throw new AssertionError("config topic partitions " + configsPartitions);
      });
      check("connect-source-connector", () -> {
        String body = "{\"name\":\"" + prefix + "-src\",\"config\":{\"connector.class\":\"ConnectCheck$SeqSource\","
            + "\"tasks.max\":\"1\",\"topic\":\"" + data + "\",\"count\":\"" + records + "\"}}";
        HttpResponse<String> r = rest(base[0], "POST", "/connectors", body);
        if (r.statusCode() != 201) throw new AssertionError("POST /connectors: " + r.statusCode() + " " + r.body());
        await("source task never RUNNING", 60_000, () -> {
          String s = rest(base[0], "GET", "/connectors/" + prefix + "-src/status", null).body();
          return s.contains("\"tasks\":[{\"id\":0,\"state\":\"RUNNING\"");
        });
        await("not all " + records + " records in " + data, 60_000, () -> {
          TopicPartition tp = new TopicPartition(data, 0);
          return admin.listOffsets(Map.of(tp, org.apache.kafka.clients.admin.OffsetSpec.latest()))
              .partitionResult(tp).get().offset() >= records;
        });
        // The source offset is committed to the offsets topic (KIP-875 reads it back).
        await("source offset never committed", 30_000, () -> rest(base[0], "GET",
            "/connectors/" + prefix + "-src/offsets", null).body().contains("\"pos\":" + (records - 1)));
      });
      check("connect-sink-connector", () -> {
        String body = "{\"name\":\"" + prefix + "-sink\",\"config\":{\"connector.class\":\"ConnectCheck$LineSink\","
            + "\"tasks.max\":\"1\",\"topics\":\"" + data + "\",\"file\":\"" + sinkFile + "\"}}";
        HttpResponse<String> r = rest(base[0], "POST", "/connectors", body);
        if (r.statusCode() != 201) throw new AssertionError("POST /connectors: " + r.statusCode() + " " + r.body());
        await("sink file never had " + records + " lines", 60_000,
            () -> Files.exists(sinkFile) && Files.readAllLines(sinkFile).size() >= records);
        List<String> lines = Files.readAllLines(sinkFile);
        List<String> want = new ArrayList<>();
        for (int i = 0; i < records; i++) want.add("seq-" + i);
        if (!lines.equals(want)) {
          throw new AssertionError("sink file: " + lines.size() + " lines, first difference at "
              + firstDifference(lines, want));
        }
        // The sink's consumer group commits the offsets it wrote.
        await("sink group never committed offset " + records, 30_000, () -> {
          OffsetAndMetadata o = admin.listConsumerGroupOffsets("connect-" + prefix + "-sink")
              .partitionsToOffsetAndMetadata().get().get(new TopicPartition(data, 0));
          return o != null && o.offset() == records;
        });
      });
      check("connect-restart-and-delete", () -> {
        HttpResponse<String> r = rest(base[0], "POST",
            "/connectors/" + prefix + "-src/restart?includeTasks=true", null);
        if (r.statusCode() / 100 != 2) throw new AssertionError("restart: " + r.statusCode() + " " + r.body());
        await("restarted source never RUNNING", 60_000, () -> rest(base[0], "GET",
            "/connectors/" + prefix + "-src/status", null).body().contains("\"tasks\":[{\"id\":0,\"state\":\"RUNNING\""));
        Thread.sleep(1000);
        // Resumed from its committed offset: no record written twice.
        TopicPartition tp = new TopicPartition(data, 0);
        long end = admin.listOffsets(Map.of(tp, org.apache.kafka.clients.admin.OffsetSpec.latest()))
            .partitionResult(tp).get().offset();
        if (end != records) throw new AssertionError("after restart " + data + " has " + end + " records");
        for (String name : List.of(prefix + "-src", prefix + "-sink")) {
          HttpResponse<String> d = rest(base[0], "DELETE", "/connectors/" + name, null);
          if (d.statusCode() / 100 != 2) throw new AssertionError("DELETE " + name + ": " + d.statusCode());
        }
        await("connectors still listed", 30_000, () -> rest(base[0], "GET", "/connectors", null).body().equals("[]"));
      });
      if (worker[0] != null) worker[0].stop();
      worker[0] = null;
      standalone(bootstrap, prefix, work, records, admin, rf);
    } finally {
      if (worker[0] != null) worker[0].stop();
      admin.close(Duration.ofSeconds(5));
      System.out.println("DONE " + passed + " " + failed);
      System.out.flush();
      System.exit(0);
    }
  }

  // ---------------------------------------------------------------- the standalone worker

  static String baseUrl(Connect<?> worker) {
    String url = worker.rest().advertisedUrl().toString();
    return url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
  }

  static void awaitRest(String base) throws Exception {
    await("the worker never answered GET /connectors", 60_000, () -> {
      try {
        return rest(base, "GET", "/connectors", null).statusCode() == 200;
      } catch (java.io.IOException e) {
        return false;
      }
    });
  }

  static long endOffset(Admin admin, String topic) throws Exception {
    TopicPartition tp = new TopicPartition(topic, 0);
    return admin.listOffsets(Map.of(tp, org.apache.kafka.clients.admin.OffsetSpec.latest()))
        .partitionResult(tp).get().offset();
  }

  /** Creates the SeqSource `name` writing `records` to `topic` and waits until its task runs. */
  static void createSource(String base, String name, String topic, int records) throws Exception {
    String body = "{\"name\":\"" + name + "\",\"config\":{\"connector.class\":\"ConnectCheck$SeqSource\","
        + "\"tasks.max\":\"1\",\"topic\":\"" + topic + "\",\"count\":\"" + records + "\"}}";
    HttpResponse<String> r = rest(base, "POST", "/connectors", body);
    if (r.statusCode() != 201) throw new AssertionError("POST /connectors: " + r.statusCode() + " " + r.body());
    await(name + " task never RUNNING", 60_000, () -> rest(base, "GET", "/connectors/" + name + "/status", null)
        .body().contains("\"tasks\":[{\"id\":0,\"state\":\"RUNNING\""));
  }

  static Connect<?> startStandalone(Map<String, String> w) throws Exception {
    Connect<?> c = new ConnectStandalone().startConnect(w);
    awaitRest(baseUrl(c));
    return c;
  }

  static void standalone(String bootstrap, String prefix, Path work, int records, Admin admin, int rf)
      throws Exception {
    String data = prefix + "-sa-data";
    Path offsets = work.resolve("standalone.offsets");
    Path sinkFile = work.resolve("standalone-sink.txt");
    String src = prefix + "-sa-src";
    String sink = prefix + "-sa-sink";
    admin.createTopics(List.of(new NewTopic(data, 1, (short) rf))).all().get();
    Map<String, String> w = new HashMap<>();
    w.put("bootstrap.servers", bootstrap);
    w.put("offset.storage.file.filename", offsets.toString());
    w.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
    w.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
    w.put("listeners", "http://127.0.0.1:0");
    w.put("offset.flush.interval.ms", "500");
    w.put("plugin.discovery", "only_scan");
    Connect<?>[] worker = {null};
    try {
      check("connect-standalone-worker-starts", () -> worker[0] = startStandalone(w));
      if (worker[0] == null) return;
      String base = baseUrl(worker[0]);
      check("connect-standalone-source-connector", () -> {
        createSource(base, src, data, records);
        await("not all " + records + " records in " + data, 60_000, () -> endOffset(admin, data) >= records);
        // The standalone worker keeps source offsets in its file, not in a topic.
        await("source offset never committed", 30_000, () -> rest(base, "GET",
            "/connectors/" + src + "/offsets", null).body().contains("\"pos\":" + (records - 1)));
        if (!Files.exists(offsets) || Files.size(offsets) == 0) throw new AssertionError("no offsets file " + offsets);
      });
      check("connect-standalone-sink-connector", () -> {
        String body = "{\"name\":\"" + sink + "\",\"config\":{\"connector.class\":\"ConnectCheck$LineSink\","
            + "\"tasks.max\":\"1\",\"topics\":\"" + data + "\",\"file\":\"" + sinkFile + "\"}}";
        HttpResponse<String> r = rest(base, "POST", "/connectors", body);
        if (r.statusCode() != 201) throw new AssertionError("POST /connectors: " + r.statusCode() + " " + r.body());
        await("sink file never had " + records + " lines", 60_000,
            () -> Files.exists(sinkFile) && Files.readAllLines(sinkFile).size() >= records);
        List<String> lines = Files.readAllLines(sinkFile);
        List<String> want = new ArrayList<>();
        for (int i = 0; i < records; i++) want.add("seq-" + i);
        if (!lines.equals(want)) {
          throw new AssertionError("sink file: " + lines.size() + " lines, first difference at "
              + firstDifference(lines, want));
        }
        await("sink group never committed offset " + records, 30_000, () -> {
          OffsetAndMetadata o = admin.listConsumerGroupOffsets("connect-" + sink)
              .partitionsToOffsetAndMetadata().get().get(new TopicPartition(data, 0));
          return o != null && o.offset() == records;
        });
      });
      check("connect-standalone-resumes-from-offsets-file", () -> {
        worker[0].stop();
        worker[0] = null;
        // A new worker on the same file: the source given to it again resumes after its
        // last record (a standalone worker keeps no connector configs of its own).
        worker[0] = startStandalone(w);
        String again = baseUrl(worker[0]);
        createSource(again, src, data, records);
        Thread.sleep(1000);
        long end = endOffset(admin, data);
        if (end != records) throw new AssertionError("after the restart " + data + " has " + end + " records");
        HttpResponse<String> d = rest(again, "DELETE", "/connectors/" + src, null);
        if (d.statusCode() / 100 != 2) throw new AssertionError("DELETE " + src + ": " + d.statusCode());
      });
    } finally {
      if (worker[0] != null) worker[0].stop();
    }
  }

  static String firstDifference(List<String> got, List<String> want) {
    for (int i = 0; i < Math.max(got.size(), want.size()); i++) {
      String g = i < got.size() ? got.get(i) : null;
      String x = i < want.size() ? want.get(i) : null;
      if (g == null ? x != null : !g.equals(x)) return i + ": got " + g + ", want " + x;
    }
    return "none";
  }
}

/*
 * Issue 32: MirrorMaker 2 (org.apache.kafka:connect-mirror 4.3.1, the newest the registry
 * here serves) copying a topic from cluster A to cluster B, with a consumer group's offsets
 * translated.
 *
 *   java -cp 'CLASSES:.build/kafka-4.4.0/mirror/*' MirrorCheck BOOTSTRAP_A BOOTSTRAP_B PREFIX RECORDS
 *
 * Makes PREFIX-data (2 partitions) on A, writes half of RECORDS to it, reads them with group
 * PREFIX-group and commits the group's end offsets on A, then starts the MirrorMaker driver
 * in this JVM (the dedicated mode of `connect-mirror-maker.sh`: flow A->B enabled for that
 * topic and group, B->A disabled). Checks that A.PREFIX-data on B holds the same records in
 * the same partitions and order, that RemoteClusterUtils.translateOffsets on B gives the
 * group's offsets on A.PREFIX-data, that sync.group.offsets.enabled committed them to the
 * group on B, and that the other half, written while MirrorMaker runs, is copied too.
 *
 * The records on B get the same offsets as on A (nothing else writes there), and a
 * caught-up group is translated exactly: MM2 translates an upstream offset past its newest
 * offset sync to that sync's downstream offset + 1, so an offset inside the topic might come
 * back lower (MM2 keeps only some syncs), but the end offset cannot.
 * Prints one line per check (CHECK <name> PASS|FAIL <ms> [why]) and DONE <passed> <failed>.
 */
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.connect.mirror.MirrorMaker;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;
import org.apache.kafka.connect.mirror.SourceAndTarget;

public final class MirrorCheck {
  static final int PARTITIONS = 2;

  interface Probe {
    boolean ok() throws Exception;
  }

  static void await(String what, long ms, Probe probe) throws Exception {
    long deadline = System.currentTimeMillis() + ms;
    while (!probe.ok()) {
      if (System.currentTimeMillis() > deadline) throw new AssertionError(what);
      Thread.sleep(250);
    }
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

  static Admin admin(String bootstrap) {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    return Admin.create(p);
  }

  static void produce(String bootstrap, String topic, int from, int to) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("acks", "all");
    p.put("linger.ms", "5");
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
      for (int i = from; i < to; i++) {
        producer.send(new ProducerRecord<>(topic, i % PARTITIONS, "k-" + i, "v-" + i));
      }
      producer.flush();
    }
  }

  /** Every record of `topic` by partition, as "key=value" in offset order. */
  static Map<Integer, List<String>> readAll(String bootstrap, String topic, int records, String group)
      throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("enable.auto.commit", "false");
    if (group != null) p.put("group.id", group);
    Map<Integer, List<String>> out = new HashMap<>();
    try (KafkaConsumer<String, String> consumer =
        new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
      List<TopicPartition> tps = new ArrayList<>();
      for (int i = 0; i < PARTITIONS; i++) tps.add(new TopicPartition(topic, i));
      consumer.assign(tps);
      consumer.seekToBeginning(tps);
      int seen = 0;
      long deadline = System.currentTimeMillis() + 20_000;
      while (seen < records && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
          out.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.key() + "=" + r.value());
          seen++;
        }
      }
      if (group != null) {
        // The group's offsets on A: the position after every record read.
        Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
        for (TopicPartition tp : tps) commit.put(tp, new OffsetAndMetadata(consumer.position(tp)));
        consumer.commitSync(commit);
      }
    }
    return out;
  }

  public static void main(String[] args) throws Exception {
    String bootstrapA = args[0];
    String bootstrapB = args[1];
    String prefix = args[2];
    int records = Integer.parseInt(args[3]);
    String data = prefix + "-data";
    String remote = "A." + data;
    String group = prefix + "-group";
    Admin adminA = admin(bootstrapA);
    Admin adminB = admin(bootstrapB);
    int rf = Math.min(3, Math.min(adminA.describeCluster().nodes().get().size(),
        adminB.describeCluster().nodes().get().size()));
    adminA.createTopics(List.of(new NewTopic(data, PARTITIONS, (short) rf))).all().get();
    int first = records / 2;
    produce(bootstrapA, data, 0, first);
    // The group reads everything there is and commits, before MirrorMaker starts (a group
    // MirrorMaker finds at start gets its checkpoint task at once; one made later waits for
    // the connector's next task reconfiguration, which took 30-60 s here).
    Map<Integer, List<String>> onA = readAll(bootstrapA, data, first, group);
    Map<TopicPartition, OffsetAndMetadata> want = new HashMap<>();
    for (int i = 0; i < PARTITIONS; i++) {
      want.put(new TopicPartition(remote, i), new OffsetAndMetadata(onA.getOrDefault(i, List.of()).size()));
    }

    Map<String, String> mm = new HashMap<>();
    mm.put("clusters", "A, B");
    mm.put("A.bootstrap.servers", bootstrapA);
    mm.put("B.bootstrap.servers", bootstrapB);
    mm.put("A->B.enabled", "true");
    mm.put("A->B.topics", data);
    mm.put("A->B.groups", group);
    mm.put("B->A.enabled", "false");
    for (String key : List.of("replication.factor", "checkpoints.topic.replication.factor",
        "heartbeats.topic.replication.factor", "offset-syncs.topic.replication.factor",
        "config.storage.replication.factor", "offset.storage.replication.factor",
        "status.storage.replication.factor")) {
      mm.put(key, String.valueOf(rf));
    }
    // Short intervals: the defaults (checkpoints every 60 s, group and topic refresh every
    // 10 min) are for production.
    mm.put("emit.checkpoints.interval.seconds", "1");
    mm.put("emit.heartbeats.interval.seconds", "1");
    mm.put("sync.group.offsets.enabled", "true");
    mm.put("sync.group.offsets.interval.seconds", "1");
    mm.put("refresh.topics.interval.seconds", "2");
    mm.put("refresh.groups.interval.seconds", "2");
    mm.put("sync.topic.configs.interval.seconds", "5");
    // An offset sync for every record copied, so the newest sync is the topic's last record.
    mm.put("offset.lag.max", "0");
    // Worker settings go per target cluster. The source task sends the offset syncs it held
    // back at each offset flush (every 60 s by default), so the newest sync, the one a
    // caught-up group is translated with, waits for it.
    for (String cluster : List.of("A", "B")) {
      mm.put(cluster + ".offset.flush.interval.ms", "500");
      mm.put(cluster + ".scheduled.rebalance.max.delay.ms", "1000");
    }
    MirrorMaker[] mirror = {null};
    SourceAndTarget flow = new SourceAndTarget("A", "B");
    Map<String, Object> clientB = Map.of("bootstrap.servers", bootstrapB);
    try {
      check("mm2-starts", () -> {
        mirror[0] = new MirrorMaker(mm, List.of("B"));
        mirror[0].start();
        for (String connector : List.of("MirrorSourceConnector", "MirrorCheckpointConnector")) {
          await(connector + " never RUNNING", 90_000, () -> {
            try {
              var s = mirror[0].connectorStatus(flow, connector);
              // The checkpoint connector has no task until it has seen a group to translate.
              boolean needsTask = connector.equals("MirrorSourceConnector");
              return s != null && "RUNNING".equals(s.connector().state())
                  && (!needsTask || !s.tasks().isEmpty())
                  && s.tasks().stream().allMatch(t -> "RUNNING".equals(t.state()));
            } catch (RuntimeException e) {
              return false; // the herder has not joined its group yet
            }
          });
        }
      });
      if (mirror[0] == null) return;
      check("mm2-topic-mirrored", () -> {
        await(remote + " never on B", 60_000, () -> adminB.listTopics().names().get().contains(remote));
        int partitions = adminB.describeTopics(List.of(remote)).allTopicNames().get().get(remote).partitions().size();
        if (partitions != PARTITIONS) throw new AssertionError(remote + " has " + partitions + " partitions");
        await("not all " + first + " records in " + remote, 60_000, () -> {
          long total = 0;
          for (TopicPartition tp : want.keySet()) {
            total += adminB.listOffsets(Map.of(tp, org.apache.kafka.clients.admin.OffsetSpec.latest()))
                .partitionResult(tp).get().offset();
          }
          return total >= first;
        });
        Map<Integer, List<String>> onB = readAll(bootstrapB, remote, first, null);
        if (!onB.equals(onA)) {
          throw new AssertionError("records differ: A has " + sizes(onA) + ", B has " + sizes(onB));
        }
      });
      check("mm2-offsets-translated", () -> {
        Map<TopicPartition, OffsetAndMetadata>[] got = new Map[] {null};
        try {
          await("translateOffsets never gave the group's offsets", 60_000, () -> {
            got[0] = RemoteClusterUtils.translateOffsets(clientB, "A", group, Duration.ofSeconds(10));
            return sameOffsets(got[0], want);
          });
        } catch (AssertionError e) {
          throw new AssertionError(e.getMessage() + ": got " + got[0] + ", want " + want);
        }
      });
      check("mm2-group-offsets-synced", () -> {
        Map<TopicPartition, OffsetAndMetadata>[] got = new Map[] {null};
        try {
          await("group " + group + " on B never had the translated offsets", 60_000, () -> {
            got[0] = adminB.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            return sameOffsets(got[0], want);
          });
        } catch (AssertionError e) {
          throw new AssertionError(e.getMessage() + ": got " + got[0] + ", want " + want);
        }
      });
      check("mm2-live-copy", () -> {
        // Records written while MirrorMaker runs are copied too.
        produce(bootstrapA, data, first, records);
        Map<Integer, List<String>> all = readAll(bootstrapA, data, records, null);
        Map<Integer, List<String>>[] onB = new Map[] {null};
        try {
          await("records written later never all on B", 60_000, () -> {
            onB[0] = readAll(bootstrapB, remote, records, null);
            return onB[0].equals(all);
          });
        } catch (AssertionError e) {
          throw new AssertionError(e.getMessage() + ": A has " + sizes(all) + ", B has " + sizes(onB[0]));
        }
      });
    } finally {
      if (mirror[0] != null) mirror[0].stop();
      adminA.close(Duration.ofSeconds(5));
      adminB.close(Duration.ofSeconds(5));
      System.out.println("DONE " + passed + " " + failed);
      System.out.flush();
      System.exit(0);
    }
  }

  static boolean sameOffsets(Map<TopicPartition, OffsetAndMetadata> got, Map<TopicPartition, OffsetAndMetadata> want) {
    if (got == null) return false;
    for (var e : want.entrySet()) {
      OffsetAndMetadata o = got.get(e.getKey());
      if (o == null || o.offset() != e.getValue().offset()) return false;
    }
    return true;
  }

  static Map<Integer, Integer> sizes(Map<Integer, List<String>> byPartition) {
    Map<Integer, Integer> out = new HashMap<>();
    byPartition.forEach((p, l) -> out.put(p, l.size()));
    return out;
  }
}

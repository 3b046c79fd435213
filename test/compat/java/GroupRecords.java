// Decodes __consumer_offsets records written by tidelog (one "keyHex valueHex|-" per line of
// the file given) with Apache Kafka 4.4's own GroupCoordinatorRecordSerde, as Kafka's group
// coordinator reads its partition when it loads: one line per record, the key and the value
// (or TOMBSTONE) as Kafka's generated messages print them, or FAIL with the exception.
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;

public class GroupRecords {
  public static void main(String[] args) throws Exception {
    GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
    HexFormat hex = HexFormat.of();
    for (String line : Files.readAllLines(Path.of(args[0]))) {
      String[] parts = line.split(" ");
      ByteBuffer key = ByteBuffer.wrap(hex.parseHex(parts[0]));
      ByteBuffer value = parts[1].equals("-") ? null : ByteBuffer.wrap(hex.parseHex(parts[1]));
      try {
        var record = serde.deserialize(key, value);
        System.out.println(record.key() + " => " + (record.value() == null ? "TOMBSTONE" : record.value().message()));
      } catch (Exception e) {
        System.out.println("FAIL " + e);
      }
    }
    System.out.println("DONE");
  }
}

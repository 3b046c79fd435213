/*
 * Delegation tokens (KIP-48) with kafka-clients 4.4: SCRAM users made over PLAINTEXT, a
 * token created, described, renewed and expired over SASL_PLAINTEXT/SCRAM-SHA-256, and
 * clients authenticating with the token (tokenauth=true). Every outcome is printed as a
 * line that does not depend on time, so that two brokers can be compared line by line.
 *
 * Usage: DelegationTokens <plaintext bootstrap> <sasl_plaintext bootstrap>
 */
import java.util.Base64;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateDelegationTokenOptions;
import org.apache.kafka.clients.admin.DescribeDelegationTokenOptions;
import org.apache.kafka.clients.admin.ExpireDelegationTokenOptions;
import org.apache.kafka.clients.admin.RenewDelegationTokenOptions;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.security.token.delegation.TokenInformation;
import org.apache.kafka.common.serialization.StringSerializer;

public class DelegationTokens {
  static String plaintext;
  static String sasl;

  public static void main(String[] args) throws Exception {
    plaintext = args[0];
    sasl = args[1];
    try (Admin admin = Admin.create(props(plaintext, null))) {
      admin.alterUserScramCredentials(List.of(
          upsert("alice", "alice-secret"), upsert("bob", "bob-secret"), upsert("carol", "carol-secret"))).all().get();
      outcome("plaintext-create", () -> admin.createDelegationToken().delegationToken().get());
    }
    // Kafka applies SCRAM users through its metadata log: wait until alice can log in.
    Admin alice = null;
    for (int attempt = 0; attempt < 60 && alice == null; attempt++) {
      Admin candidate = Admin.create(props(sasl, scram("alice", "alice-secret", false)));
      try {
        candidate.describeCluster().clusterId().get();
        alice = candidate;
      } catch (ExecutionException e) {
        candidate.close();
        Thread.sleep(500);
      }
    }
    if (alice == null) throw new IllegalStateException("alice never logged in");
    try (Admin a = alice;
        Admin bob = Admin.create(props(sasl, scram("bob", "bob-secret", false)));
        Admin carol = Admin.create(props(sasl, scram("carol", "carol-secret", false)))) {
      DelegationToken token = a.createDelegationToken(new CreateDelegationTokenOptions()
          .renewers(List.of(new KafkaPrincipal("User", "bob"))).maxLifetimeMs(3_600_000)).delegationToken().get();
      TokenInformation info = token.tokenInfo();
      // Kafka's brokers learn of a token through the metadata log: wait until it is described.
      awaitTokens(a, 1);
      System.out.println("CREATED owner=" + info.owner() + " requester=" + info.tokenRequester()
          + " renewers=" + info.renewers() + " max-issue=" + (info.maxTimestamp() - info.issueTimestamp())
          + " expiry-issue=" + (info.expiryTimestamp() - info.issueTimestamp())
          + " hmac-bytes=" + token.hmac().length);
      outcome("create-group-renewer", () -> a.createDelegationToken(new CreateDelegationTokenOptions()
          .renewers(List.of(new KafkaPrincipal("Group", "g")))).delegationToken().get());
      describe("describe-all", a, null);
      describe("describe-owner-bob", a, List.of(new KafkaPrincipal("User", "bob")));
      describe("describe-owner-carol", a, List.of(new KafkaPrincipal("User", "carol")));
      describe("describe-as-carol", carol, null);
      long before = System.currentTimeMillis();
      long renewed = a.renewDelegationToken(token.hmac(), new RenewDelegationTokenOptions().renewTimePeriodMs(60_000))
          .expiryTimestamp().get();
      System.out.println("RENEWED in-window=" + (renewed >= before + 60_000 && renewed <= System.currentTimeMillis() + 60_000));
      long capped = bob.renewDelegationToken(token.hmac(), new RenewDelegationTokenOptions().renewTimePeriodMs(86_400_000))
          .expiryTimestamp().get();
      System.out.println("RENEWED-BY-BOB capped=" + (capped == info.maxTimestamp()));
      outcome("renew-as-carol", () -> carol.renewDelegationToken(token.hmac()).expiryTimestamp().get());
      outcome("renew-unknown", () -> a.renewDelegationToken(new byte[] {1, 2, 3}).expiryTimestamp().get());

      String password = Base64.getEncoder().encodeToString(token.hmac());
      try (Admin viaToken = Admin.create(props(sasl, scram(token.tokenInfo().tokenId(), password, true)))) {
        outcome("token-login", () -> viaToken.describeCluster().clusterId().get());
        outcome("token-create", () -> viaToken.createDelegationToken().delegationToken().get());
      }
      Properties producerProps = props(sasl, scram(token.tokenInfo().tokenId(), password, true));
      producerProps.put("key.serializer", StringSerializer.class.getName());
      producerProps.put("value.serializer", StringSerializer.class.getName());
      producerProps.put("delivery.timeout.ms", "30000");
      try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
        outcome("token-produce", () -> producer.send(new ProducerRecord<>("token-topic", "k", "v")).get());
      }
      try (Admin wrong = Admin.create(props(sasl, scram(token.tokenInfo().tokenId(), "d3Jvbmc=", true)))) {
        outcome("token-wrong-hmac", () -> wrong.describeCluster().clusterId().get());
      }
      outcome("expire-as-carol", () -> carol.expireDelegationToken(token.hmac()).expiryTimestamp().get());
      outcome("expire-now", () -> a.expireDelegationToken(token.hmac(),
          new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1)).expiryTimestamp().get());
      awaitTokens(a, 0);
      describe("describe-after-expire", a, null);
      outcome("renew-expired", () -> a.renewDelegationToken(token.hmac()).expiryTimestamp().get());
      try (Admin viaToken = Admin.create(props(sasl, scram(token.tokenInfo().tokenId(), password, true)))) {
        outcome("token-login-after-expire", () -> viaToken.describeCluster().clusterId().get());
      }
    }
    System.out.println("DONE");
  }

  interface Action {
    Object run() throws Exception;
  }

  static void outcome(String name, Action action) {
    try {
      action.run();
      System.out.println("OUTCOME " + name + " ok");
    } catch (ExecutionException e) {
      System.out.println("OUTCOME " + name + " " + e.getCause().getClass().getSimpleName());
    } catch (Exception e) {
      System.out.println("OUTCOME " + name + " " + e.getClass().getSimpleName());
    }
  }

  static void describe(String name, Admin admin, List<KafkaPrincipal> owners) throws Exception {
    DescribeDelegationTokenOptions options = new DescribeDelegationTokenOptions();
    if (owners != null) options.owners(owners);
    try {
      List<DelegationToken> tokens = admin.describeDelegationToken(options).delegationTokens().get();
      StringBuilder line = new StringBuilder("DESCRIBED " + name + " " + tokens.size());
      for (DelegationToken t : tokens) line.append(" ").append(t.tokenInfo().owner()).append(t.tokenInfo().renewers());
      System.out.println(line);
    } catch (ExecutionException e) {
      System.out.println("DESCRIBED " + name + " " + e.getCause().getClass().getSimpleName());
    }
  }

  static void awaitTokens(Admin admin, int count) throws Exception {
    for (int attempt = 0; attempt < 60; attempt++) {
      if (admin.describeDelegationToken().delegationTokens().get().size() == count) return;
      Thread.sleep(500);
    }
    throw new IllegalStateException("the brokers never described " + count + " tokens");
  }

  static UserScramCredentialUpsertion upsert(String user, String password) {
    return new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password);
  }

  static String scram(String user, String password, boolean token) {
    return "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"" + user
        + "\" password=\"" + password + "\"" + (token ? " tokenauth=\"true\"" : "") + ";";
  }

  static Properties props(String bootstrap, String jaas) {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("request.timeout.ms", "15000");
    p.put("default.api.timeout.ms", "30000");
    if (jaas != null) {
      p.put("security.protocol", "SASL_PLAINTEXT");
      p.put("sasl.mechanism", "SCRAM-SHA-256");
      p.put("sasl.jaas.config", jaas);
    }
    return p;
  }
}

// A KIP-848 regex subscription resolved by the broker (SubscriptionPattern, RE2/J syntax:
// SubscribedTopicRegex) with the Java client 4.x: records of the matching topic, none of the
// other, and a matching topic created while subscribed is picked up. Prints "regex: OK N".
// Usage: java -cp 'target/java-libs/*' RegexSubscription.java HOST:PORT
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.*;
public class RegexSubscription {
  public static void main(String[] a) throws Exception {
    Properties p = new Properties(); p.put("bootstrap.servers", a[0]);
    try (Admin ad = Admin.create(p)) { ad.createTopics(List.of(new NewTopic("orders-eu", 2, (short)1), new NewTopic("payments", 1, (short)1))).all().get(); }
    try (Producer<String,String> pr = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) { for (int i=0;i<10;i++) { pr.send(new ProducerRecord<>("orders-eu", "e"+i)); pr.send(new ProducerRecord<>("payments", "p"+i)); } pr.flush(); }
    Properties c = new Properties(); c.putAll(p); c.put("group.id","rx"); c.put("group.protocol","consumer"); c.put("auto.offset.reset","earliest");
    Set<String> seen = new TreeSet<>();
    try (KafkaConsumer<String,String> k = new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
      k.subscribe(new SubscriptionPattern("orders-.*"));
      long end = System.currentTimeMillis() + 30000; boolean created = false;
      while (System.currentTimeMillis() < end && seen.size() < 15) {
        for (ConsumerRecord<String,String> r : k.poll(Duration.ofMillis(200))) seen.add(r.topic()+":"+r.value());
        if (!created && seen.size() >= 10) { created = true;
          try (Admin ad = Admin.create(p)) { ad.createTopics(List.of(new NewTopic("orders-us", 1, (short)1))).all().get(); }
          try (Producer<String,String> pr = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) { for (int i=0;i<5;i++) pr.send(new ProducerRecord<>("orders-us", "u"+i)); pr.flush(); } }
      }
    }
    boolean ok = seen.size() == 15 && seen.stream().noneMatch(s -> s.startsWith("payments")) && seen.contains("orders-us:u4");
    System.out.println((ok ? "regex: OK " : "regex: FAILED ") + seen.size() + " " + seen);
    if (!ok) System.exit(1);
  }
}

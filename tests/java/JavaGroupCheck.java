// Two Java consumers (kafka-clients 4.x) in one group with the cooperative-sticky assignor
// share a topic's partitions and commit what they read. Usage:
//   java -cp 'target/java-libs/*' tests/java/JavaGroupCheck.java HOST:PORT TOPIC GROUP
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.*;

public class JavaGroupCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, 4, (short) 1))).all().get();
        }
        int n = 400;
        try (Producer<String, String> p = new KafkaProducer<>(common, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < n; i++) p.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
            p.flush();
        }
        Set<String> seen = ConcurrentHashMap.newKeySet();
        AtomicInteger stopped = new AtomicInteger();
        Set<Integer>[] owned = new Set[2];
        ExecutorService pool = Executors.newFixedThreadPool(2);
        List<Future<?>> futures = new ArrayList<>();
        for (int c = 0; c < 2; c++) {
            final int me = c;
            owned[me] = ConcurrentHashMap.newKeySet();
            futures.add(pool.submit(() -> {
                Properties cp = new Properties();
                cp.putAll(common);
                cp.put("group.id", group);
                cp.put("auto.offset.reset", "earliest");
                cp.put("enable.auto.commit", "false");
                cp.put("partition.assignment.strategy", CooperativeStickyAssignor.class.getName());
                try (Consumer<String, String> consumer = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
                    consumer.subscribe(List.of(topic));
                    long deadline = System.currentTimeMillis() + 60_000;
                    long quietSince = System.currentTimeMillis();
                    while (System.currentTimeMillis() < deadline) {
                        ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<String, String> r : recs) seen.add(r.value());
                        if (!recs.isEmpty()) { consumer.commitSync(); quietSince = System.currentTimeMillis(); }
                        consumer.assignment().forEach(tp -> owned[me].add(tp.partition()));
                        if (seen.size() >= n && System.currentTimeMillis() - quietSince > 2000) break;
                    }
                    consumer.commitSync();
                }
                stopped.incrementAndGet();
                return null;
            }));
        }
        for (Future<?> f : futures) f.get();
        pool.shutdown();
        if (seen.size() != n) throw new AssertionError("consumed " + seen.size() + " of " + n);
        System.out.println("java group: OK " + seen.size() + " records; member partitions " + owned[0] + " " + owned[1]);
    }
}

// The Java client (kafka-clients 4.x) against strand: admin, idempotent producer with keys,
// consumer by assignment from the beginning. Run as a single-file program:
//   java -cp 'target/java-libs/*' tests/java/JavaClientCheck.java HOST:PORT
import java.time.Duration;
import java.util.*;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class JavaClientCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = "java-" + UUID.randomUUID().toString().substring(0, 8);
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
            if (!admin.listTopics().names().get().contains(topic)) throw new AssertionError("topic not listed");
        }
        Properties pp = new Properties();
        pp.putAll(common);
        pp.put("acks", "all");
        pp.put("enable.idempotence", "true");
        pp.put("compression.type", "lz4");
        Map<String, Integer> partitionOf = new HashMap<>();
        int n = 1000;
        try (Producer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < n; i++) sent.add(p.send(new ProducerRecord<>(topic, "key-" + (i % 13), "value-" + i)));
            for (int i = 0; i < n; i++) {
                RecordMetadata m = sent.get(i).get();
                Integer prev = partitionOf.putIfAbsent("key-" + (i % 13), m.partition());
                if (prev != null && prev != m.partition()) throw new AssertionError("key moved partition");
            }
        }
        Properties cp = new Properties();
        cp.putAll(common);
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        Map<String, List<Integer>> seen = new HashMap<>();
        int count = 0;
        try (Consumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1), new TopicPartition(topic, 2));
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 30_000;
            while (count < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    count++;
                    seen.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(Integer.parseInt(r.value().substring(6)));
                }
            }
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long total = end.values().stream().mapToLong(Long::longValue).sum();
            if (total != n) throw new AssertionError("end offsets sum to " + total);
        }
        if (count != n) throw new AssertionError("consumed " + count + " of " + n);
        for (List<Integer> seq : seen.values()) {
            List<Integer> sorted = new ArrayList<>(seq);
            Collections.sort(sorted);
            if (!sorted.equals(seq)) throw new AssertionError("a key's records came out of order");
        }
        System.out.println("java client: OK " + count + " records, " + seen.size() + " keys in order");
    }
}

// The Java client (kafka-clients 4.x) against a Strand cluster, bootstrapped with one node:
// produces keyed records to an existing topic (each key must stay on one partition), then reads
// the whole topic back by assignment until it has seen every record all clients wrote. Run as a
// single-file program:
//   java -cp 'target/java-libs/*' tests/java/JavaClusterCheck.java HOST:PORT TOPIC PARTITIONS SEND EXPECT
import java.time.Duration;
import java.util.*;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class JavaClusterCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int partitions = Integer.parseInt(args[2]), send = Integer.parseInt(args[3]);
        int expect = Integer.parseInt(args[4]);
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("acks", "all");
        pp.put("enable.idempotence", "true");
        Map<String, Integer> partitionOf = new HashMap<>();
        try (Producer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < send; i++) sent.add(p.send(new ProducerRecord<>(topic, "java-k" + (i % 31), "java-v" + i)));
            for (int i = 0; i < send; i++) {
                RecordMetadata m = sent.get(i).get();
                Integer prev = partitionOf.putIfAbsent("java-k" + (i % 31), m.partition());
                if (prev != null && prev != m.partition()) throw new AssertionError("key moved partition");
            }
        }
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        Set<String> values = new HashSet<>();
        Set<Integer> from = new TreeSet<>();
        try (Consumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            while (values.size() < expect && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    values.add(r.value());
                    from.add(r.partition());
                }
            }
        }
        if (values.size() != expect) throw new AssertionError("read " + values.size() + " of " + expect);
        System.out.println("java cluster: OK " + values.size() + " records from partitions " + from);
    }
}

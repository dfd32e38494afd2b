// One member of a KIP-848 consumer group (kafka-clients 4.x, group.protocol=consumer), run as
// a child process by tests/integration/test_consumer_protocol.py so it can be killed with -9.
// Prints one line per event, flushed:
//   ASSIGNED p,p,...   REVOKED p,p,...   LOST p,...   R partition offset   READY
// and commits after every poll. Stops (closing, so it leaves the group) when STOPFILE exists.
// Usage: java -cp 'target/java-libs/*' ConsumerProtocolMember.java HOST:PORT TOPIC GROUP NAME STOPFILE [ASSIGNOR]
import java.io.File;
import java.time.Duration;
import java.util.*;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ConsumerProtocolMember {
    static String parts(Collection<TopicPartition> tps) {
        return tps.stream().map(tp -> Integer.toString(tp.partition())).sorted().collect(Collectors.joining(","));
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], name = args[3];
        File stop = new File(args[4]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("group.protocol", "consumer");
        if (args.length > 5) p.put("group.remote.assignor", args[5]);
        p.put("client.id", name);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        try (Consumer<String, String> c = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    if (!tps.isEmpty()) System.out.println("REVOKED " + parts(tps));
                }
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    System.out.println("ASSIGNED " + parts(tps));
                }
                public void onPartitionsLost(Collection<TopicPartition> tps) {
                    System.out.println("LOST " + parts(tps));
                }
            });
            System.out.println("READY");
            long deadline = System.currentTimeMillis() + 240_000;
            while (!stop.exists() && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(100));
                StringBuilder out = new StringBuilder();
                for (ConsumerRecord<String, String> r : recs) out.append("R ").append(r.partition()).append(' ').append(r.offset()).append('\n');
                if (out.length() > 0) System.out.print(out);
                System.out.flush();
                if (!recs.isEmpty()) c.commitSync();
            }
        }
        System.out.println("CLOSED");
        System.out.flush();
    }
}

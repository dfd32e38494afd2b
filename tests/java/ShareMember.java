// One member of a share group (KIP-932) through the Java client 4.x's KafkaShareConsumer with
// explicit acknowledgement, run as a child process by tests/integration/test_share_groups.py
// (so it can be killed with -9). Prints, flushed:
//   GOT partition offset deliveryCount value    (each record delivered to it)
//   ACK partition offset TYPE                   (once commitSync has acknowledged it)
//   READY / CLOSED
// MODE: accept (accept everything), mixed (first delivery: offset%3==0 release, ==1 reject,
// else accept; later deliveries accept), release (release everything, always), hold (print
// the first batch and hang, acknowledging nothing). Each batch takes 50 ms of "work" before
// it is acknowledged (so members share a backlog). Stops when STOPFILE exists.
// Usage: java -cp 'target/java-libs/*' ShareMember.java HOST:PORT TOPIC GROUP NAME STOPFILE MODE
import java.io.File;
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareMember {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], name = args[3];
        File stop = new File(args[4]);
        String mode = args[5];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", name);
        p.put("share.acknowledgement.mode", "explicit");
        p.put("max.poll.records", "20");
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(topic));
            System.out.println("READY");
            System.out.flush();
            long deadline = System.currentTimeMillis() + 240_000;
            while (!stop.exists() && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                StringBuilder got = new StringBuilder();
                List<String> acks = new ArrayList<>();
                for (ConsumerRecord<String, String> r : recs) {
                    short count = r.deliveryCount().orElse((short) -1);
                    got.append("GOT ").append(r.partition()).append(' ').append(r.offset()).append(' ').append(count).append(' ').append(r.value()).append('\n');
                    if (mode.equals("hold")) continue;
                    AcknowledgeType t = AcknowledgeType.ACCEPT;
                    if (mode.equals("release")) t = AcknowledgeType.RELEASE;
                    if (mode.equals("mixed") && count == 1) {
                        if (r.offset() % 3 == 0) t = AcknowledgeType.RELEASE;
                        else if (r.offset() % 3 == 1) t = AcknowledgeType.REJECT;
                    }
                    c.acknowledge(r, t);
                    acks.add("ACK " + r.partition() + " " + r.offset() + " " + t);
                }
                System.out.print(got);
                System.out.flush();
                if (mode.equals("hold")) {
                    Thread.sleep(600_000);
                }
                // The work each batch stands for: others take records meanwhile.
                Thread.sleep(50);
                Map<?, ?> result = c.commitSync();
                boolean failed = false;
                for (Object v : result.values()) {
                    if (v instanceof Optional && ((Optional<?>) v).isPresent()) {
                        failed = true;
                        System.out.println("ACKFAIL " + ((Optional<?>) v).get());
                    }
                }
                if (!failed) for (String a : acks) System.out.println(a);
                System.out.flush();
            }
        }
        System.out.println("CLOSED");
        System.out.flush();
    }
}

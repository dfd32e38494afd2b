// The Java client (kafka-clients 4.x) as an idempotent acks=all producer at a fixed rate, for
// the failover test: writes unique values ("java-<i>") round-robin over the partitions until
// STOP_FILE exists, then flushes. Prints "ACK <partition> <offset> <value>" for each
// acknowledgement, "FAIL <value> <error>" for each failure, and "DONE <sent>" at the end.
//   java -cp 'target/java-libs/*' tests/java/JavaFailoverProducer.java HOST:PORT TOPIC PARTITIONS RATE STOP_FILE
import java.nio.file.*;
import java.util.Properties;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaFailoverProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        double rate = Double.parseDouble(args[3]);
        Path stop = Paths.get(args[4]);
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("acks", "all");
        pp.put("enable.idempotence", "true");
        pp.put("linger.ms", "2");
        pp.put("delivery.timeout.ms", "120000");
        pp.put("retry.backoff.ms", "50");
        pp.put("retry.backoff.max.ms", "200");
        long sent = 0;
        try (Producer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            long started = System.nanoTime();
            while (!Files.exists(stop)) {
                String value = "java-" + sent;
                p.send(new ProducerRecord<>(topic, (int) (sent % partitions), null, value), (m, e) -> {
                    synchronized (System.out) {
                        if (e != null) System.out.println("FAIL " + value + " " + e);
                        else System.out.println("ACK " + m.partition() + " " + m.offset() + " " + value);
                    }
                });
                sent++;
                long aheadNanos = started + (long) (sent * 1e9 / rate) - System.nanoTime();
                if (aheadNanos > 0) Thread.sleep(aheadNanos / 1_000_000, (int) (aheadNanos % 1_000_000));
            }
            p.flush();
        }
        synchronized (System.out) {
            System.out.println("DONE " + sent);
        }
    }
}

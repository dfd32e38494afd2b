// The chaos harness's Java workload (#19): an idempotent acks=all producer (Apache Kafka's
// own client) appending unique values at a steady rate, round robin over the partitions.
// Run as a single-file program (java -cp 'kafka-libs/*' ChaosProducer.java ...): no build.
//
//   ChaosProducer <bootstrap> <topic> <partitions> <rate/s> <proc> <t0 epoch ms> [acks]
//
// acks other than "all" (a deliberately weakened setting) turns idempotence off too.
//
// Prints one JSON line per history event on stdout ("t" in seconds since t0, the harness's
// clock): send invoke / ok (partition, offset) / info (an error after retries: maybe
// written). Stops producing when stdin closes, flushes (90 s at most) and exits.
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.serialization.StringSerializer;

public class ChaosProducer {
    static long t0;

    static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String t() {
        return String.format("%.4f", (System.currentTimeMillis() - t0) / 1000.0);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], proc = args[4];
        int partitions = Integer.parseInt(args[2]);
        double rate = Double.parseDouble(args[3]);
        t0 = Long.parseLong(args[5]);
        String acks = args.length > 6 ? args[6] : "all";
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, String.valueOf(acks.equals("all")));
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) { }
            } catch (Exception e) { }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        long start = System.currentTimeMillis();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (long i = 0; !stop.get(); i++) {
                while (!stop.get() && i > (System.currentTimeMillis() - start) * rate / 1000.0) {
                    Thread.sleep(2);
                }
                if (stop.get()) {
                    break;
                }
                String value = proc + "-" + i;
                int part = (int) (i % partitions);
                emit("{\"t\": " + t() + ", \"proc\": \"" + proc + "\", \"f\": \"send\", "
                        + "\"type\": \"invoke\", \"value\": \"" + value + "\", \"partition\": "
                        + part + "}");
                producer.send(new ProducerRecord<>(topic, part, null, value), (md, err) -> {
                    if (err == null) {
                        emit("{\"t\": " + t() + ", \"proc\": \"" + proc + "\", \"f\": \"send\", "
                                + "\"type\": \"ok\", \"value\": \"" + value + "\", \"partition\": "
                                + md.partition() + ", \"offset\": " + md.offset() + "}");
                    } else {
                        String kind = err instanceof RecordTooLargeException ? "fail" : "info";
                        emit("{\"t\": " + t() + ", \"proc\": \"" + proc + "\", \"f\": \"send\", "
                                + "\"type\": \"" + kind + "\", \"value\": \"" + value
                                + "\", \"error\": \"" + err.getClass().getSimpleName() + "\"}");
                    }
                });
            }
            producer.flush();
            producer.close(java.time.Duration.ofSeconds(90));
        }
    }
}

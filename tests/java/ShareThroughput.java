// Records acknowledged per second by 4 share-group consumers (KafkaShareConsumer) on ONE
// partition, next to 4 classic-group consumers (KafkaConsumer, group.protocol=classic) on 4
// partitions — same broker, same records, one run. Each consumer acknowledges (share:
// commitSync of the batch, implicit acceptance) or commits (classic: commitSync) after every
// poll. The rate is counted from the first record received to the last acknowledged one.
// Usage: java -cp 'target/java-libs/*' ShareThroughput.java HOST:PORT RECORDS RECORD_BYTES
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;

public class ShareThroughput {
    static void produce(String bootstrap, String topic, int n, int bytes) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("linger.ms", "5");
        p.put("batch.size", "262144");
        byte[] value = new byte[bytes];
        try (Producer<byte[], byte[]> pr = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < n; i++) pr.send(new ProducerRecord<>(topic, value));
            pr.flush();
        }
    }

    interface Body { void run(AtomicLong done, AtomicLong first, AtomicLong last, int n) throws Exception; }

    static double measure(int n, Body body) throws Exception {
        AtomicLong done = new AtomicLong(), first = new AtomicLong(), last = new AtomicLong();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        List<Future<?>> fs = new ArrayList<>();
        for (int i = 0; i < 4; i++) fs.add(pool.submit(() -> { body.run(done, first, last, n); return null; }));
        for (Future<?> f : fs) f.get(300, TimeUnit.SECONDS);
        pool.shutdown();
        if (done.get() < n) throw new IllegalStateException("only " + done.get() + " of " + n);
        return n / ((last.get() - first.get()) / 1e9);
    }

    static void mark(AtomicLong first, AtomicLong last) {
        long now = System.nanoTime();
        first.compareAndSet(0, now);
        last.set(now);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int n = Integer.parseInt(args[1]), bytes = Integer.parseInt(args[2]);
        String shareTopic = "share-tput-" + System.nanoTime(), classicTopic = "classic-tput-" + System.nanoTime();
        String shareGroup = shareTopic + "-g", classicGroup = classicTopic + "-g";
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(shareTopic, 1, (short) 1), new NewTopic(classicTopic, 4, (short) 1))).all().get();
            admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, shareGroup),
                List.of(new AlterConfigOp(new org.apache.kafka.clients.admin.ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)))).all().get();
        }
        produce(bootstrap, shareTopic, n, bytes);
        produce(bootstrap, classicTopic, n, bytes);

        double share = measure(n, (done, first, last, total) -> {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", shareGroup);
            try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                c.subscribe(List.of(shareTopic));
                long deadline = System.currentTimeMillis() + 240_000;
                while (done.get() < total && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(100));
                    if (recs.isEmpty()) continue;
                    if (first.get() == 0) mark(first, last);
                    c.commitSync();
                    done.addAndGet(recs.count());
                    mark(first, last);
                }
            }
        });
        double classic = measure(n, (done, first, last, total) -> {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", classicGroup);
            p.put("group.protocol", "classic");
            p.put("auto.offset.reset", "earliest");
            p.put("enable.auto.commit", "false");
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                c.subscribe(List.of(classicTopic));
                long deadline = System.currentTimeMillis() + 240_000;
                while (done.get() < total && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(100));
                    if (recs.isEmpty()) continue;
                    if (first.get() == 0) mark(first, last);
                    c.commitSync();
                    done.addAndGet(recs.count());
                    mark(first, last);
                }
            }
        });
        System.out.printf("share group, 4 consumers, 1 partition: %.0f records/s acknowledged%n", share);
        System.out.printf("classic group, 4 consumers, 4 partitions: %.0f records/s committed%n", classic);
        System.out.printf("share / classic: %.2f%n", share / classic);
    }
}

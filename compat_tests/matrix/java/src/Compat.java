import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Java kafka-clients side of the compatibility matrix: one scenario per run, facts and records on stdout.
 *
 * Usage: Compat SCENARIO BOOTSTRAP TOPIC [ARGS...]. Output lines are "STEP name" (progress, so a failure
 * shows where it stopped), "FACT key=value", "SENT partition offset" and
 * "REC tag partition offset timestamp key value headers" in the line format of compat_tests/matrix/records.py.
 * Any client exception ends the program with a stack trace on stderr and a non-zero exit code.
 */
public final class Compat {
    private static final HexFormat HEX = HexFormat.of();
    private static final Duration POLL = Duration.ofMillis(200);

    private Compat() {}

    public static void main(String[] args) throws Exception {
        String scenario = args[0];
        String bootstrap = args[1];
        String topic = args[2];
        switch (scenario) {
            case "admin" -> admin(bootstrap, topic);
            case "roundtrip" -> roundtrip(bootstrap, topic, Integer.parseInt(args[3]), Path.of(args[4]), extraProps(args, 5));
            case "each" -> each(bootstrap, topic, Path.of(args[3]), extraProps(args, 4));
            case "paced" -> paced(bootstrap, topic, Integer.parseInt(args[3]), Path.of(args[4]), extraProps(args, 5));
            case "group" -> group(bootstrap, topic, args[3], Path.of(args[4]), Path.of(args[5]), extraProps(args, 6));
            case "offsets" -> offsets(bootstrap, topic, Long.parseLong(args[3]), Integer.parseInt(args[4]));
            case "spark" -> spark(bootstrap, topic, Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            default -> throw new IllegalArgumentException("unknown scenario " + scenario);
        }
        System.out.flush();
        // Client threads (e.g. a producer's sender) must not keep the JVM alive after the scenario ended.
        System.exit(0);
    }

    private static Properties extraProps(String[] args, int from) {
        Properties p = new Properties();
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            p.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return p;
    }

    private static void step(String name) {
        System.out.println("STEP " + name);
        System.out.flush();
    }

    private static void fact(String key, Object value) {
        System.out.println("FACT " + key + "=" + value);
        System.out.flush();
    }

    // ---- clients -------------------------------------------------------------------------------------------

    private static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        return Admin.create(p);
    }

    private static KafkaProducer<byte[], byte[]> producer(String bootstrap, Properties extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    private static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String groupId) {
        return consumer(bootstrap, groupId, new Properties());
    }

    private static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String groupId, Properties extra) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        if (groupId != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        }
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    private static void createTopic(Admin admin, String topic, int partitions, Map<String, String> configs) throws Exception {
        NewTopic nt = new NewTopic(topic, partitions, (short) 1).configs(configs);
        admin.createTopics(List.of(nt)).all().get(30, TimeUnit.SECONDS);
    }

    // ---- record lines ----------------------------------------------------------------------------------------

    /** One record of a spec file: "codec partition key value headers" (see records.py). */
    private record Spec(String codec, int partition, byte[] key, byte[] value, RecordHeaders headers, long timestamp) {}

    private static byte[] unhex(String field) {
        if (field.equals("-")) {
            return null;
        }
        return HEX.parseHex(field.substring(1));
    }

    private static String hex(byte[] b) {
        return b == null ? "-" : "=" + HEX.formatHex(b);
    }

    private static RecordHeaders parseHeaders(String field) {
        RecordHeaders h = new RecordHeaders();
        if (field.equals("-")) {
            return h;
        }
        for (String item : field.split(",")) {
            int colon = item.indexOf(':');
            h.add(item.substring(0, colon), HEX.parseHex(item.substring(colon + 1)));
        }
        return h;
    }

    private static String formatHeaders(Iterable<Header> headers) {
        List<String> parts = new ArrayList<>();
        for (Header h : headers) {
            parts.add(h.key() + ":" + (h.value() == null ? "" : HEX.formatHex(h.value())));
        }
        return parts.isEmpty() ? "-" : String.join(",", parts);
    }

    private static List<Spec> readSpec(Path file) throws Exception {
        List<Spec> out = new ArrayList<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            if (line.isBlank()) {
                continue;
            }
            String[] f = line.split(" ");
            long ts = f.length > 5 ? Long.parseLong(f[5]) : -1L;
            out.add(new Spec(f[0], Integer.parseInt(f[1]), unhex(f[2]), unhex(f[3]), parseHeaders(f[4]), ts));
        }
        return out;
    }

    private static ProducerRecord<byte[], byte[]> toRecord(String topic, Spec s) {
        Long ts = s.timestamp() < 0 ? null : s.timestamp();
        return new ProducerRecord<>(topic, s.partition(), ts, s.key(), s.value(), s.headers());
    }

    private static void printRecord(String tag, ConsumerRecord<byte[], byte[]> r) {
        System.out.println("REC " + tag + " " + r.partition() + " " + r.offset() + " " + r.timestamp() + " "
                + hex(r.key()) + " " + hex(r.value()) + " " + formatHeaders(r.headers()));
    }

    /** Produce the spec in order, one producer per run of equal codecs, flushing between runs. */
    private static void produceSpec(String bootstrap, String topic, List<Spec> specs, Properties extra) throws Exception {
        int i = 0;
        while (i < specs.size()) {
            String codec = specs.get(i).codec();
            Properties props = new Properties();
            props.putAll(extra);
            props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
            step("produce " + codec);
            List<java.util.concurrent.Future<RecordMetadata>> acks = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, props)) {
                while (i < specs.size() && specs.get(i).codec().equals(codec)) {
                    acks.add(producer.send(toRecord(topic, specs.get(i))));
                    i++;
                }
                producer.flush();
                for (var ack : acks) {
                    RecordMetadata md = ack.get(30, TimeUnit.SECONDS);
                    System.out.println("SENT " + md.partition() + " " + md.offset());
                }
            }
        }
    }

    /** Read every partition of the topic from the beginning until `expected` records arrived or 30 s passed. */
    private static List<ConsumerRecord<byte[], byte[]>> consumeAll(String bootstrap, String topic, int partitions, int expected) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, null)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (out.size() < expected && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL)) {
                    out.add(r);
                }
            }
            // One more short poll so that records beyond the expected count (duplicates) are seen too.
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                out.add(r);
            }
        }
        return out;
    }

    // ---- scenarios -----------------------------------------------------------------------------------------

    private static void admin(String bootstrap, String topic) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            step("createTopics");
            createTopic(admin, topic, 3, Map.of("retention.ms", "3600000", "cleanup.policy", "compact"));
            step("listTopics");
            fact("listed", admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic));
            step("describeTopics");
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            fact("partitions", d.partitions().size());
            fact("leaders", d.partitions().stream().allMatch(p -> p.leader() != null && !p.leader().isEmpty()));
            step("describeConfigs");
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config cfg = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res);
            fact("config.retention.ms", cfg.get("retention.ms").value());
            fact("config.cleanup.policy", cfg.get("cleanup.policy").value());
            step("describeCluster");
            DescribeClusterResult cluster = admin.describeCluster();
            fact("cluster.nodes", cluster.nodes().get(30, TimeUnit.SECONDS).size());
            fact("cluster.id.present", cluster.clusterId().get(30, TimeUnit.SECONDS) != null);
            fact("cluster.controller.present", cluster.controller().get(30, TimeUnit.SECONDS) != null);
            step("createPartitions");
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get(30, TimeUnit.SECONDS);
            TopicDescription d2 = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            fact("partitions.after", d2.partitions().size());
            step("deleteTopics");
            admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
            boolean gone = false;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
            while (!gone && System.nanoTime() < deadline) {
                gone = !admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic);
                if (!gone) {
                    Thread.sleep(100);
                }
            }
            fact("deleted", gone);
        }
    }

    private static void roundtrip(String bootstrap, String topic, int partitions, Path specFile, Properties extra) throws Exception {
        List<Spec> specs = readSpec(specFile);
        try (Admin admin = admin(bootstrap)) {
            step("createTopics");
            createTopic(admin, topic, partitions, Map.of());
        }
        produceSpec(bootstrap, topic, specs, extra);
        step("consume");
        for (ConsumerRecord<byte[], byte[]> r : consumeAll(bootstrap, topic, partitions, specs.size())) {
            printRecord("all", r);
        }
    }

    /** Produce each record of the spec on its own (one batch each) and print "SENT partition offset" or
     * "FACT failed.i=ExceptionClass: message" for each, in order: a proxy filter's per-record answers. */
    private static void each(String bootstrap, String topic, Path specFile, Properties extra) throws Exception {
        List<Spec> specs = readSpec(specFile);
        Properties props = new Properties();
        props.putAll(extra);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        step("produce each");
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, props)) {
            for (int i = 0; i < specs.size(); i++) {
                try {
                    RecordMetadata md = producer.send(toRecord(topic, specs.get(i))).get(30, TimeUnit.SECONDS);
                    System.out.println("SENT " + md.partition() + " " + md.offset());
                } catch (java.util.concurrent.ExecutionException e) {
                    fact("failed." + i, e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
                }
            }
        }
    }

    /** Produce one record at a time with a short pause, printing each ack, so a test can restart the broker meanwhile. */
    private static void paced(String bootstrap, String topic, int partitions, Path specFile, Properties extra) throws Exception {
        List<Spec> specs = readSpec(specFile);
        try (Admin admin = admin(bootstrap)) {
            step("createTopics");
            createTopic(admin, topic, partitions, Map.of());
        }
        step("produce");
        List<java.util.concurrent.Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, extra)) {
            for (int i = 0; i < specs.size(); i++) {
                final int index = i;
                acks.add(producer.send(toRecord(topic, specs.get(i)), (md, err) -> {
                    if (err == null) {
                        System.out.println("ACK " + index);
                        System.out.flush();
                    }
                }));
                Thread.sleep(5);
            }
            producer.flush();
            for (var ack : acks) {
                RecordMetadata md = ack.get(60, TimeUnit.SECONDS);
                System.out.println("SENT " + md.partition() + " " + md.offset());
            }
        }
        step("consume");
        for (ConsumerRecord<byte[], byte[]> r : consumeAll(bootstrap, topic, partitions, specs.size())) {
            printRecord("all", r);
        }
    }

    /** Poll in a thread until told to stop; remembers records and whether it ever held partitions. */
    private static final class Member implements Runnable {
        final String name;
        final KafkaConsumer<byte[], byte[]> consumer;
        final List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        final AtomicBoolean stop = new AtomicBoolean();
        volatile int assigned;
        volatile Throwable error;

        Member(String name, KafkaConsumer<byte[], byte[]> consumer) {
            this.name = name;
            this.consumer = consumer;
        }

        @Override
        public void run() {
            try {
                while (!stop.get()) {
                    ConsumerRecords<byte[], byte[]> batch = consumer.poll(POLL);
                    synchronized (records) {
                        batch.forEach(records::add);
                    }
                    assigned = consumer.assignment().size();
                }
                consumer.commitSync(Duration.ofSeconds(30));
                step("committed " + name);
            } catch (Throwable t) {
                error = t;
            } finally {
                consumer.close(Duration.ofSeconds(10));
            }
        }

        int count() {
            synchronized (records) {
                return records.size();
            }
        }
    }

    private static void group(String bootstrap, String topic, String groupId, Path firstSpec, Path secondSpec,
                              Properties memberProps) throws Exception {
        List<Spec> first = readSpec(firstSpec);
        List<Spec> second = readSpec(secondSpec);
        int partitions = 4;
        try (Admin admin = admin(bootstrap)) {
            step("createTopics");
            createTopic(admin, topic, partitions, Map.of());
        }
        step("join two members");
        Member a = new Member("a", consumer(bootstrap, groupId, memberProps));
        Member b = new Member("b", consumer(bootstrap, groupId, memberProps));
        a.consumer.subscribe(List.of(topic));
        b.consumer.subscribe(List.of(topic));
        Thread ta = new Thread(a);
        Thread tb = new Thread(b);
        ta.start();
        tb.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(45);
        while ((a.assigned == 0 || b.assigned == 0 || a.assigned + b.assigned != partitions) && System.nanoTime() < deadline
                && a.error == null && b.error == null) {
            Thread.sleep(50);
        }
        fact("assigned.a", a.assigned);
        fact("assigned.b", b.assigned);
        step("produce first");
        produceSpec(bootstrap, topic, first, new Properties());
        step("consume first");
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (a.count() + b.count() < first.size() && System.nanoTime() < deadline && a.error == null && b.error == null) {
            Thread.sleep(50);
        }
        Thread.sleep(300);
        a.stop.set(true);
        b.stop.set(true);
        ta.join(60_000);
        tb.join(60_000);
        for (Member m : List.of(a, b)) {
            if (m.error != null) {
                throw new RuntimeException("member " + m.name + " failed", m.error);
            }
            for (ConsumerRecord<byte[], byte[]> r : m.records) {
                printRecord(m.name, r);
            }
        }
        step("committed offsets");
        try (Admin admin = admin(bootstrap)) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            for (var e : committed.entrySet()) {
                fact("committed." + e.getKey().partition(), e.getValue().offset());
            }
        }
        step("produce second");
        produceSpec(bootstrap, topic, second, new Properties());
        step("resume");
        Member c = new Member("c", consumer(bootstrap, groupId, memberProps));
        c.consumer.subscribe(List.of(topic));
        Thread tc = new Thread(c);
        tc.start();
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(45);
        while (c.count() < second.size() && System.nanoTime() < deadline && c.error == null) {
            Thread.sleep(50);
        }
        Thread.sleep(300);
        c.stop.set(true);
        tc.join(60_000);
        if (c.error != null) {
            throw new RuntimeException("member c failed", c.error);
        }
        for (ConsumerRecord<byte[], byte[]> r : c.records) {
            printRecord("c", r);
        }
    }

    private static void offsets(String bootstrap, String topic, long baseTs, int count) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = admin(bootstrap)) {
            step("createTopics");
            createTopic(admin, topic, 2, Map.of());
            step("produce");
            try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, new Properties())) {
                for (int i = 0; i < count; i++) {
                    byte[] v = ("v" + i).getBytes(StandardCharsets.UTF_8);
                    producer.send(new ProducerRecord<>(topic, 0, baseTs + i * 1000L, null, v)).get(30, TimeUnit.SECONDS);
                }
            }
            step("admin listOffsets");
            fact("admin.earliest", admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get(30, TimeUnit.SECONDS).offset());
            fact("admin.latest", admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get(30, TimeUnit.SECONDS).offset());
            ListOffsetsResult.ListOffsetsResultInfo byTime =
                    admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(baseTs + 4500))).partitionResult(tp).get(30, TimeUnit.SECONDS);
            fact("admin.time.offset", byTime.offset());
            fact("admin.time.timestamp", byTime.timestamp());
            fact("admin.future.offset", admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(baseTs + 1_000_000L)))
                    .partitionResult(tp).get(30, TimeUnit.SECONDS).offset());
        }
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, null)) {
            step("consumer beginning/end offsets");
            fact("consumer.beginning", consumer.beginningOffsets(List.of(tp)).get(tp));
            fact("consumer.end", consumer.endOffsets(List.of(tp)).get(tp));
            fact("consumer.empty.end", consumer.endOffsets(List.of(new TopicPartition(topic, 1))).get(new TopicPartition(topic, 1)));
            step("offsetsForTimes");
            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(Map.of(tp, baseTs + 4500));
            fact("consumer.time.offset", found.get(tp).offset());
            fact("consumer.time.timestamp", found.get(tp).timestamp());
            fact("consumer.future", consumer.offsetsForTimes(Map.of(tp, baseTs + 1_000_000L)).get(tp));
            step("fetch from beginning");
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            List<ConsumerRecord<byte[], byte[]>> seen = new ArrayList<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (seen.size() < count && System.nanoTime() < deadline) {
                consumer.poll(POLL).forEach(seen::add);
            }
            for (ConsumerRecord<byte[], byte[]> r : seen) {
                printRecord("scan", r);
            }
            // Seeking with a leader epoch makes the consumer validate the position with OffsetsForLeaderEpoch
            // (KIP-320) before fetching, as it does after a leader change.
            step("seek with leader epoch");
            Optional<Integer> epoch = seen.size() > 3 ? seen.get(3).leaderEpoch() : Optional.empty();
            fact("leader.epoch.present", epoch.isPresent());
            consumer.seek(tp, new OffsetAndMetadata(3, epoch, ""));
            List<ConsumerRecord<byte[], byte[]>> after = new ArrayList<>();
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (after.isEmpty() && System.nanoTime() < deadline) {
                consumer.poll(POLL).forEach(after::add);
            }
            fact("after.seek.first", after.isEmpty() ? -1 : after.get(0).offset());
            fact("position.after", consumer.position(tp));
        }
    }

    /**
     * The call sequence of Spark's Kafka source (KafkaOffsetReaderAdmin + KafkaDataConsumer) and sink:
     * describeTopics, listOffsets earliest/latest per partition, then a consumer with a group id that only
     * assign()s, seek()s and poll()s with read_uncommitted, and a default producer writing the results.
     */
    private static void spark(String bootstrap, String topic, int partitions, int total) throws Exception {
        String results = topic + "-results";
        try (Admin admin = admin(bootstrap)) {
            step("createTopics");
            createTopic(admin, topic, partitions, Map.of());
            createTopic(admin, results, 1, Map.of());
        }
        step("produce backlog");
        Properties fast = new Properties();
        fast.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        fast.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144");
        fast.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, fast)) {
            for (int i = 0; i < total; i++) {
                byte[] v = ("row-" + i).getBytes(StandardCharsets.UTF_8);
                producer.send(new ProducerRecord<>(topic, i % partitions, null, v));
            }
            producer.flush();
        }
        Map<TopicPartition, Long> start = new HashMap<>();
        Map<TopicPartition, Long> end = new HashMap<>();
        try (Admin admin = admin(bootstrap)) {
            step("describeTopics");
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            fact("partitions", d.partitions().size());
            Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (TopicPartitionInfo p : d.partitions()) {
                TopicPartition tp = new TopicPartition(topic, p.partition());
                earliest.put(tp, OffsetSpec.earliest());
                latest.put(tp, OffsetSpec.latest());
            }
            step("listOffsets");
            admin.listOffsets(earliest).all().get(30, TimeUnit.SECONDS).forEach((tp, info) -> start.put(tp, info.offset()));
            admin.listOffsets(latest).all().get(30, TimeUnit.SECONDS).forEach((tp, info) -> end.put(tp, info.offset()));
        }
        long expectedTotal = 0;
        for (TopicPartition tp : end.keySet()) {
            fact("range." + tp.partition(), start.get(tp) + ".." + end.get(tp));
            expectedTotal += end.get(tp) - start.get(tp);
        }
        step("read backlog");
        Properties cp = new Properties();
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        long read = 0;
        long bad = 0;
        String firstBad = "";
        Map<Integer, Long> next = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, "spark-kafka-source-" + topic + "-driver-0", cp)) {
            List<TopicPartition> tps = new ArrayList<>(start.keySet());
            consumer.assign(tps);
            for (TopicPartition tp : tps) {
                consumer.seek(tp, start.get(tp));
                next.put(tp.partition(), start.get(tp));
            }
            Set<Integer> done = new HashSet<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            while (done.size() < tps.size() && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    long want = next.get(r.partition());
                    // Row i went to partition i % partitions at offset i / partitions.
                    String expect = "row-" + (r.offset() * partitions + r.partition());
                    if (r.offset() != want || !expect.equals(new String(r.value(), StandardCharsets.UTF_8))) {
                        if (bad == 0) {
                            firstBad = r.partition() + "@" + r.offset() + " want offset " + want + " value " + expect;
                        }
                        bad++;
                    }
                    next.put(r.partition(), r.offset() + 1);
                    read++;
                }
                for (TopicPartition tp : tps) {
                    if (next.get(tp.partition()) >= end.get(tp)) {
                        done.add(tp.partition());
                    }
                }
            }
        }
        fact("expected", expectedTotal);
        fact("read", read);
        fact("bad", bad);
        fact("first.bad", firstBad.isEmpty() ? "none" : firstBad.replace(' ', '_'));
        step("write results");
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, new Properties())) {
            for (int p = 0; p < partitions; p++) {
                byte[] v = (p + ":" + (next.get(p) - start.get(new TopicPartition(topic, p)))).getBytes(StandardCharsets.UTF_8);
                producer.send(new ProducerRecord<>(results, 0, null, v)).get(30, TimeUnit.SECONDS);
            }
        }
        step("read results");
        List<String> counts = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : consumeAll(bootstrap, results, 1, partitions)) {
            counts.add(new String(r.value(), StandardCharsets.UTF_8));
        }
        fact("results", String.join(",", counts));
    }
}

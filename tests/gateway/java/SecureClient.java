import java.io.FileReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client (kafka-clients 3.9.1) over Logway's secured listeners, for tests/gateway/test_security_clients.py.
 *
 * roundtrip TOPIC_PREFIX CONFIG...: for each client config file (bootstrap.servers, security.protocol, SASL,
 *   TLS): admin createTopics + describeCluster, produce 20 records, consume them in a group, commit; prints
 *   "OK <config> produced=20 consumed=20 committed=20" or "FAIL <config> <exception>".
 * reauth TOPIC CONFIG MIN_REAUTHS MAX_SECONDS: one producer and one group consumer, a record a time, until the
 *   producer and the consumer have each re-authenticated MIN_REAUTHS times and 20 records went through, or
 *   MAX_SECONDS passed (a bound, not the expected time); prints "OK produced=N consumed=N reauth=R
 *   producer_reauth=P consumer_reauth=C" (successful-reauthentication-total over each client's connections)
 *   or "FAIL <exception>" with the counts so far.
 */
public final class SecureClient {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("roundtrip")) {
            for (int i = 2; i < args.length; i++) {
                String topic = args[1] + "-" + (i - 2);
                try {
                    System.out.println("OK " + args[i] + " " + roundtrip(load(args[i]), topic));
                } catch (Exception e) {
                    System.out.println("FAIL " + args[i] + " " + e);
                }
                System.out.flush();
            }
        } else {
            reauth(load(args[2]), args[1], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
        }
        System.exit(0);
    }

    private static Properties load(String path) throws Exception {
        Properties p = new Properties();
        try (FileReader r = new FileReader(path)) {
            p.load(r);
        }
        return p;
    }

    private static Properties with(Properties base, Object... kv) {
        Properties p = new Properties();
        p.putAll(base);
        for (int i = 0; i < kv.length; i += 2) p.put(kv[i], kv[i + 1]);
        return p;
    }

    private static KafkaProducer<String, String> producer(Properties conf) {
        return new KafkaProducer<>(with(conf, "acks", "all", "linger.ms", "1"), new StringSerializer(), new StringSerializer());
    }

    private static KafkaConsumer<String, String> consumer(Properties conf, String group) {
        return new KafkaConsumer<>(with(conf, "group.id", group, "auto.offset.reset", "earliest",
                "enable.auto.commit", "false"), new StringDeserializer(), new StringDeserializer());
    }

    private static String roundtrip(Properties conf, String topic) throws Exception {
        try (Admin admin = Admin.create(conf)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
            admin.describeCluster().nodes().get(30, TimeUnit.SECONDS);
        }
        try (KafkaProducer<String, String> p = producer(conf)) {
            for (int i = 0; i < 20; i++) p.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
            p.flush();
        }
        int consumed = 0;
        long committed;
        try (KafkaConsumer<String, String> c = consumer(conf, "g-" + topic)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30000;
            while (consumed < 20 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    if (!r.value().equals("v" + consumed)) throw new IllegalStateException("record " + consumed + " is " + r.value());
                    consumed++;
                }
            }
            c.commitSync();
            TopicPartition tp = new TopicPartition(topic, 0);
            OffsetAndMetadata om = c.committed(Set.of(tp)).get(tp);
            committed = om == null ? -1 : om.offset();
        }
        return "produced=20 consumed=" + consumed + " committed=" + committed;
    }

    private static double reauths(Map<MetricName, ? extends Metric> metrics) {
        double total = 0;
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            if (e.getKey().name().equals("successful-reauthentication-total")) total += ((Number) e.getValue().metricValue()).doubleValue();
        }
        return total;
    }

    private static void reauth(Properties conf, String topic, int minReauths, int maxSeconds) throws Exception {
        int produced = 0, consumed = 0;
        KafkaProducer<String, String> p = producer(with(conf, "max.block.ms", "10000", "delivery.timeout.ms", "10000",
                "request.timeout.ms", "5000"));
        KafkaConsumer<String, String> c = consumer(with(conf, "default.api.timeout.ms", "10000"), "g-" + topic);
        try {
            c.subscribe(List.of(topic));
            long end = System.currentTimeMillis() + maxSeconds * 1000L;
            while (System.currentTimeMillis() < end
                    && (reauths(p.metrics()) < minReauths || reauths(c.metrics()) < minReauths || produced < 20)) {
                p.send(new ProducerRecord<>(topic, "v" + produced)).get(10, TimeUnit.SECONDS);
                produced++;
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) consumed++;
                c.commitSync();
            }
            long drain = System.currentTimeMillis() + 10000;
            while (consumed < produced && System.currentTimeMillis() < drain) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) consumed++;
            }
            System.out.println("OK produced=" + produced + " consumed=" + consumed + " reauth="
                    + (long) (reauths(p.metrics()) + reauths(c.metrics())) + " producer_reauth="
                    + (long) reauths(p.metrics()) + " consumer_reauth=" + (long) reauths(c.metrics()));
        } catch (Exception e) {
            Throwable cause = e;
            while (cause.getCause() != null) cause = cause.getCause();
            System.out.println("FAIL produced=" + produced + " consumed=" + consumed + " " + cause);
        } finally {
            System.out.flush();
            p.close(Duration.ofSeconds(2));
            c.close(Duration.ofSeconds(2));
        }
    }
}

// Client quotas with the Java client: AdminClient's alterClientQuotas / describeClientQuotas, and a producer or a
// consumer running flat out under a client id for some seconds, with the throttle time the client was told.
// Run in source-file mode: java -cp 'lib/*' src/Quotas.java <scenario> <bootstrap> ...
//   admin <bootstrap> <client id> <bytes a second>   validate-only, then set producer_byte_rate/consumer_byte_rate
//   produce <bootstrap> <topic> <client id> <seconds>
//   consume <bootstrap> <topic> <client id> <seconds>
// Prints KEY=VALUE lines for compat_tests/kafka/test_quotas.py.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.quota.*;
import org.apache.kafka.common.serialization.*;

public class Quotas {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "admin" -> admin(args[1], args[2], Double.parseDouble(args[3]));
            case "produce" -> produce(args[1], args[2], args[3], Integer.parseInt(args[4]));
            case "consume" -> consume(args[1], args[2], args[3], Integer.parseInt(args[4]));
            default -> throw new IllegalArgumentException("unknown scenario " + args[0]);
        }
        System.out.flush();
        System.exit(0);
    }

    static void admin(String bootstrap, String clientId, double rate) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, clientId));
            ClientQuotaAlteration set = new ClientQuotaAlteration(entity, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", rate),
                new ClientQuotaAlteration.Op("consumer_byte_rate", rate)));
            admin.alterClientQuotas(List.of(set), new AlterClientQuotasOptions().validateOnly(true)).all().get();
            System.out.println("after_validate_only=" + describe(admin, clientId));
            admin.alterClientQuotas(List.of(set)).all().get();
            System.out.println("after_alter=" + describe(admin, clientId));
            ClientQuotaAlteration bad = new ClientQuotaAlteration(entity, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", 0.5)));
            try {
                admin.alterClientQuotas(List.of(bad)).all().get();
                System.out.println("fractional=accepted");
            } catch (Exception e) {
                System.out.println("fractional=" + e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
            }
        }
    }

    static String describe(Admin admin, String clientId) throws Exception {
        ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(List.of(
            ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, clientId)));
        Map<ClientQuotaEntity, Map<String, Double>> found = admin.describeClientQuotas(filter).entities().get();
        return new TreeMap<>(found.values().stream().findFirst().orElse(Map.of())).toString();
    }

    static double metric(Map<MetricName, ? extends Metric> metrics, String name) {
        double max = 0;
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            if (e.getKey().name().equals(name) && e.getValue().metricValue() instanceof Double d && !d.isNaN()) {
                max = Math.max(max, d);
            }
        }
        return max;
    }

    static void produce(String bootstrap, String topic, String clientId, int seconds) throws Exception {
        Map<String, Object> p = new HashMap<>(Map.of("bootstrap.servers", bootstrap, "client.id", clientId,
            "acks", "1", "linger.ms", "5", "key.serializer", ByteArraySerializer.class.getName(),
            "value.serializer", ByteArraySerializer.class.getName(), "max.block.ms", "60000"));
        AtomicLong acked = new AtomicLong();
        byte[] value = new byte[16 * 1024];
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.partitionsFor(topic);
            long deadline = System.currentTimeMillis() + seconds * 1000L;
            while (System.currentTimeMillis() < deadline) {
                producer.send(new ProducerRecord<>(topic, 0, null, value), (meta, error) -> {
                    if (error == null && System.currentTimeMillis() < deadline) acked.addAndGet(value.length);
                });
            }
            System.out.println("bytes=" + acked.get());
            System.out.println("throttle_time_max=" + metric(producer.metrics(), "produce-throttle-time-max"));
            producer.close(Duration.ZERO);
        }
    }

    static void consume(String bootstrap, String topic, String clientId, int seconds) throws Exception {
        Map<String, Object> p = Map.of("bootstrap.servers", bootstrap, "client.id", clientId,
            "key.deserializer", ByteArrayDeserializer.class.getName(),
            "value.deserializer", ByteArrayDeserializer.class.getName(), "enable.auto.commit", "false");
        long bytes = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + seconds * 1000L;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) bytes += r.value().length;
            }
            System.out.println("bytes=" + bytes);
            System.out.println("throttle_time_max=" + metric(consumer.metrics(), "fetch-throttle-time-max"));
        }
    }
}

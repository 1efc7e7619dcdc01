// Kafka Streams' exactly-once pattern with the Java client: consume-transform-produce with
// sendOffsetsToTransaction, a committed and an aborted round, a fenced zombie, a read_committed reader.
// Run in source-file mode: java -cp 'lib/*' src/Transactions.java <bootstrap> <topic prefix>
// Prints KEY=VALUE lines for compat_tests/matrix/test_java_transactions.py.

import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.*;

public class Transactions {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], in = args[1] + "-in", out = args[1] + "-out", group = args[1] + "-app";
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic(in, 1, (short) 1), new NewTopic(out, 1, (short) 1))).all().get();
        }
        try (KafkaProducer<String, String> plain = new KafkaProducer<>(props(bootstrap, Map.of()))) {
            for (int i = 0; i < 30; i++) plain.send(new ProducerRecord<>(in, String.valueOf(i))).get();
        }
        KafkaProducer<String, String> producer = new KafkaProducer<>(props(bootstrap, Map.of("transactional.id", group + "-tx")));
        producer.initTransactions();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(bootstrap, group))) {
            consumer.subscribe(List.of(in));  // one member for all rounds: its generation goes with the offsets
            round(consumer, out, producer, 10, true);
            round(consumer, out, producer, 10, false);
            round(consumer, out, producer, 20, true);
        }

        KafkaProducer<String, String> fresh = new KafkaProducer<>(props(bootstrap, Map.of("transactional.id", group + "-tx")));
        fresh.initTransactions();
        boolean fenced = false;
        try {
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(out, "zombie")).get();
            producer.commitTransaction();
        } catch (ProducerFencedException e) {
            fenced = true;
        } catch (Exception e) {
            fenced = e.getCause() instanceof ProducerFencedException;
        }
        System.out.println("fenced=" + fenced);
        producer.close(Duration.ofSeconds(5));
        fresh.close(Duration.ofSeconds(5));

        Map<String, Object> c = consumerProps(bootstrap, args[1] + "-reader");
        try (KafkaConsumer<String, String> reader = new KafkaConsumer<>(c)) {
            reader.assign(List.of(new TopicPartition(out, 0)));
            reader.seekToBeginning(List.of(new TopicPartition(out, 0)));
            List<String> values = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 15000;
            while (values.size() < 30 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : reader.poll(Duration.ofMillis(200))) values.add(r.value());
            }
            reader.poll(Duration.ofMillis(500)).forEach(r -> values.add(r.value()));
            System.out.println("output=" + String.join(",", values));
        }
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            OffsetAndMetadata committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                .get(new TopicPartition(in, 0));
            System.out.println("committed=" + (committed == null ? -1 : committed.offset()));
        }
    }

    static void round(KafkaConsumer<String, String> consumer, String out, KafkaProducer<String, String> producer,
                      int n, boolean commit) {
        producer.beginTransaction();
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        int taken = 0;
        long deadline = System.currentTimeMillis() + 15000;
        while (taken < n && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                producer.send(new ProducerRecord<>(out, r.value() + "!"));
                next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                taken++;
            }
        }
        producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
        if (commit) {
            producer.commitTransaction();
        } else {
            producer.abortTransaction();
            // As Kafka Streams does after an abort: rewind to the last committed offsets.
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : consumer.committed(consumer.assignment()).entrySet()) {
                consumer.seek(e.getKey(), e.getValue() == null ? 0 : e.getValue().offset());
            }
        }
    }

    static Map<String, Object> props(String bootstrap, Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>(extra);
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return p;
    }

    static Map<String, Object> consumerProps(String bootstrap, String group) {
        Map<String, Object> p = new HashMap<>();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("isolation.level", "read_committed");
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("max.poll.records", "10");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return p;
    }
}

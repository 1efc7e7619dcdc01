// A Kafka 4.3.1 client driven from the tests: a consumer (group.protocol=classic|consumer, KIP-848) or a share
// consumer (KIP-932) that prints what it gets, one line per event, and stops when stdin says so.
//
//   java Kafka4Client consume <bootstrap> <group> <topic-or-/regex/> [key=value ...]
//   java Kafka4Client share   <bootstrap> <group> <topic> [ack=accept|release|reject|release-first] [key=value ...]
//   java Kafka4Client txn     <bootstrap> <transactional.id> <topic> plan=commit,abort,... [offsets-group=<g>]
//                             [count=<records per transaction>] [key=value ...]
//
// txn: a transactional KafkaProducer (transaction version 2 where the broker finalizes it) runs one transaction
// per plan step, writing "<step>-<i>" records to partition 0 and, with offsets-group, committing the group's
// offset <step + 1> of <topic>-0 in it (sendOffsetsToTransaction: TxnOffsetCommit); prints "COMMITTED <step>"
// or "ABORTED <step>" after each, then exits.
//
// Lines out: "ASSIGNED t-0,t-1" / "REVOKED ..." (consumer rebalance callbacks), "RECORD <topic> <partition>
// <offset> <delivery-count or -> <value>", "COMMITTED" after each commitSync / share commitSync, "ERROR <text>".
// Lines in: "stop" (or end of input) closes the consumer (leaving the group) and exits 0.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class Kafka4Client {
    static final AtomicBoolean stop = new AtomicBoolean();

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static Properties props(String bootstrap, String group, String[] args, int from) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq > 0 && !args[i].startsWith("ack=")) p.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return p;
    }

    static String names(Collection<TopicPartition> tps) {
        return tps.stream().map(tp -> tp.topic() + "-" + tp.partition()).sorted().collect(Collectors.joining(","));
    }

    public static void main(String[] args) throws Exception {
        Thread input = new Thread(() -> {
            Scanner in = new Scanner(System.in);
            while (in.hasNextLine()) {
                if (in.nextLine().trim().equals("stop")) break;
            }
            stop.set(true);
        });
        input.setDaemon(true);
        input.start();
        try {
            if (args[0].equals("consume")) consume(args);
            else if (args[0].equals("txn")) transactions(args);
            else share(args);
        } catch (Exception e) {
            say("ERROR " + e);
            e.printStackTrace();
            System.exit(1);
        }
        say("CLOSED");
    }

    static void transactions(String[] args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[1]);
        p.put("transactional.id", args[2]);
        p.put("key.serializer", org.apache.kafka.common.serialization.StringSerializer.class.getName());
        p.put("value.serializer", org.apache.kafka.common.serialization.StringSerializer.class.getName());
        String[] plan = new String[0];
        String group = null;
        int count = 3;
        for (int i = 4; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            String key = args[i].substring(0, eq), value = args[i].substring(eq + 1);
            if (key.equals("plan")) plan = value.split(",");
            else if (key.equals("offsets-group")) group = value;
            else if (key.equals("count")) count = Integer.parseInt(value);
            else p.put(key, value);
        }
        try (org.apache.kafka.clients.producer.KafkaProducer<String, String> producer =
                 new org.apache.kafka.clients.producer.KafkaProducer<>(p)) {
            producer.initTransactions();
            for (int step = 0; step < plan.length; step++) {
                producer.beginTransaction();
                for (int i = 0; i < count; i++)
                    producer.send(new org.apache.kafka.clients.producer.ProducerRecord<>(args[3], 0, null, step + "-" + i));
                producer.flush();  // the records before the offsets: the same requests in the same order every run
                if (group != null)
                    producer.sendOffsetsToTransaction(
                        Map.of(new TopicPartition(args[3], 0), new OffsetAndMetadata(step + 1)),
                        new ConsumerGroupMetadata(group));
                if (plan[step].equals("commit")) {
                    producer.commitTransaction();
                    say("COMMITTED " + step);
                } else {
                    producer.abortTransaction();
                    say("ABORTED " + step);
                }
            }
        }
    }

    static void consume(String[] args) {
        Properties p = props(args[1], args[2], args, 4);
        p.putIfAbsent("enable.auto.commit", "false");
        p.putIfAbsent("auto.offset.reset", "earliest");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    if (!tps.isEmpty()) {
                        commit(consumer);
                        say("REVOKED " + names(tps));
                    }
                }
                public void onPartitionsLost(Collection<TopicPartition> tps) {
                    say("LOST " + names(tps));
                }
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    say("ASSIGNED " + names(consumer.assignment()));
                }
            };
            String topic = args[3];
            if (topic.startsWith("/") && topic.endsWith("/")) {
                String regex = topic.substring(1, topic.length() - 1);
                if (p.getProperty("group.protocol", "classic").equals("consumer"))
                    consumer.subscribe(new SubscriptionPattern(regex), listener);
                else
                    consumer.subscribe(Pattern.compile(regex), listener);
            } else {
                consumer.subscribe(List.of(topic.split(",")), listener);
            }
            while (!stop.get()) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : records)
                    say("RECORD " + r.topic() + " " + r.partition() + " " + r.offset() + " - " + r.value());
                if (!records.isEmpty()) commit(consumer);
            }
        }
    }

    // A classic member may find itself out of the group mid-rebalance: its commit fails, the records come again.
    static void commit(KafkaConsumer<String, String> consumer) {
        try {
            consumer.commitSync();
            say("COMMITTED");
        } catch (CommitFailedException | org.apache.kafka.common.errors.RebalanceInProgressException e) {
            say("COMMIT-FAILED " + e.getClass().getSimpleName());
        }
    }

    static void share(String[] args) {
        Properties p = props(args[1], args[2], args, 4);
        String ack = "accept";
        for (int i = 4; i < args.length; i++) if (args[i].startsWith("ack=")) ack = args[i].substring(4);
        p.putIfAbsent("share.acknowledgement.mode", "explicit");
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p)) {
            consumer.subscribe(List.of(args[3]));
            boolean releasedOnce = false;
            while (!stop.get()) {
                ConsumerRecords<String, String> records;
                try {
                    records = consumer.poll(Duration.ofMillis(200));
                } catch (org.apache.kafka.common.KafkaException e) {
                    say("POLL-FAILED " + e.getClass().getSimpleName());
                    continue;
                }
                List<String> acked = new ArrayList<>();
                for (ConsumerRecord<String, String> r : records) {
                    AcknowledgeType type = AcknowledgeType.ACCEPT;
                    if (ack.equals("release") || (ack.equals("release-first") && !releasedOnce)) type = AcknowledgeType.RELEASE;
                    else if (ack.equals("reject")) type = AcknowledgeType.REJECT;
                    releasedOnce = releasedOnce || type == AcknowledgeType.RELEASE;
                    consumer.acknowledge(r, type);
                    acked.add(r.value());
                    say("RECORD " + r.topic() + " " + r.partition() + " " + r.offset() + " "
                        + r.deliveryCount().map(String::valueOf).orElse("-") + " " + r.value() + " " + type);
                }
                if (!records.isEmpty()) {
                    // The acknowledgements are kept once commitSync reports no error for any partition.
                    try {
                        Map<org.apache.kafka.common.TopicIdPartition, Optional<org.apache.kafka.common.KafkaException>> result =
                            consumer.commitSync();
                        boolean ok = result.values().stream().allMatch(Optional::isEmpty);
                        say((ok ? "COMMITTED " : "COMMIT-FAILED ") + String.join(",", acked));
                    } catch (org.apache.kafka.common.KafkaException e) {
                        say("COMMIT-FAILED " + e.getClass().getSimpleName());
                    }
                }
            }
        }
    }
}

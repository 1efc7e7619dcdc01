// Issue 15: the Java consumer (kafka-clients) reading a backlog from earliest, for bench.java_consume.
// Args: bootstrap topic partitions end0,end1,...  Prints READY, waits for a line on stdin, consumes,
// then prints RESULT <start_ns> <end_ns> <messages read once> <fetch requests> <records counted>.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ConsumeBench {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        String[] endText = args[2].split(",");
        List<TopicPartition> parts = new ArrayList<>();
        long[] ends = new long[endText.length];
        long total = 0;
        for (int p = 0; p < endText.length; p++) {
            parts.add(new TopicPartition(topic, p));
            ends[p] = Long.parseLong(endText[p]);
            total += ends[p];
        }
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("enable.auto.commit", "false");
        props.put("fetch.max.wait.ms", "500");
        for (int i = 3; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.partitionsFor(topic);
            System.out.println("READY");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in)).readLine();
            long start = System.nanoTime();
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            long got = 0;
            long deadline = start + 600_000_000_000L;
            while (System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                got += records.count();
                if (got >= total && reached(consumer, parts, ends)) {
                    break;
                }
            }
            long end = System.nanoTime();
            // Records read once each: every position at its end and no more records counted than written.
            long done = 0;
            for (int p = 0; p < ends.length; p++) {
                done += Math.min(consumer.position(parts.get(p)), ends[p]);
            }
            if (got != total) {
                done = Math.min(done, total - Math.abs(got - total));
            }
            double fetches = 0;
            for (Map.Entry<MetricName, ? extends Metric> e : consumer.metrics().entrySet()) {
                MetricName n = e.getKey();
                if (n.group().equals("consumer-fetch-manager-metrics") && n.name().equals("fetch-total")
                        && n.tags().size() == 1) {
                    fetches = (Double) e.getValue().metricValue();
                }
            }
            System.out.println("RESULT " + start + " " + end + " " + done + " " + (long) fetches + " " + got);
        }
    }

    static boolean reached(KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> parts, long[] ends) {
        for (int p = 0; p < ends.length; p++) {
            if (consumer.position(parts.get(p)) < ends[p]) {
                return false;
            }
        }
        return true;
    }
}
